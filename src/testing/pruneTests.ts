/**
 * Pruning branches: what a restore left behind stops being reachable, by one appended event —
 * the tree shows it as pruned, a restore or move there is refused, `gc` frees what only it held
 * and keeps every shared object byte for byte; labelled, recent and forked branches and the
 * current path stay; an append made while a pruning is decided is never lost.
 */
import assert from "node:assert/strict"
import { Effect } from "effect"
import type { CheckpointerService } from "../core/Checkpointer.js"
import { SnapshotBlobError } from "../core/errors.js"
import { BranchLabeled, FileSnapshot, LeafMoved, type SessionEvent, SessionForked, UserMessage } from "../core/events.js"
import { DEFAULT_GRACE_MS } from "../core/internal/objectCollection.js"
import { sha256Hex } from "../core/internal/sha256.js"
import { MAX_ATTEMPTS, type PrunableStore, pruneBranches } from "../core/pruneBranches.js"
import { planMove, planRestore } from "../core/restore.js"
import * as Session from "../core/session.js"
import { encodedEvents, expectFailure, readAll, shiftedBy } from "./helpers.js"
import { manifestCapture } from "./manifestSamples.js"
import type { ConformanceSuite } from "./runner.js"

const HOUR = 60 * 60_000
/** When the old branches were made: long before anything another test writes, so a store-wide pruning takes only this group's. */
const LONG_AGO = -100 * 24 * HOUR

const snapshot = (path: string, data: Uint8Array) =>
  new FileSnapshot({ toolUseId: "toolu_prune", path, state: { _tag: "content", data, mode: 0o644, size: data.length, sha256: sha256Hex(data) } })
const prompt = (text: string) => new UserMessage({ content: text, origin: "user" })

/**
 * A session with one branch left behind:
 * 1 prompt, 2 snapshot K (on both branches); 3 prompt, 4 snapshot O (the old branch's alone),
 * 5 snapshot S; 6 a restore back to 2; 7 prompt, 8 snapshot S (shared with the old branch), 9 snapshot N.
 * Events 1–6 (and `extra`) are appended `oldAt` ms from now, 7–9 `newAt` (default now).
 */
const withOldBranch = (c: CheckpointerService, id: string, oldAt: number, extra: ReadonlyArray<SessionEvent> = [], newAt = 0) =>
  Effect.gen(function*() {
    const bytes = Object.fromEntries(["K", "O", "S", "N"].map((name) => [name, new TextEncoder().encode(`${id}:${name}:`.repeat(4))]))
    yield* shiftedBy(oldAt)(c.append(id, [
      prompt("first"),
      snapshot("k", bytes.K!),
      prompt("the old way"),
      snapshot("o", bytes.O!),
      snapshot("s", bytes.S!),
      new LeafMoved({ from: 5, to: 2, reason: "restore" }),
      ...extra
    ]))
    yield* shiftedBy(newAt)(c.append(id, [prompt("the new way"), snapshot("s", bytes.S!), snapshot("n", bytes.N!)]))
    return Object.fromEntries(Object.entries(bytes).map(([name, data]) => [name, { data, sha256: sha256Hex(data) }]))
  })

const treeOf = (c: CheckpointerService, id: string) => Effect.map(readAll(c, id), (events) => Session.tree(Session.fold(events)))
const stateOf = (c: CheckpointerService, id: string) => Effect.map(readAll(c, id), (events) => Session.fold(events))
const collectLater = (c: CheckpointerService) => shiftedBy(2 * DEFAULT_GRACE_MS)(c.gc())
const readsBack = (c: CheckpointerService, id: string, object: { data: Uint8Array; sha256: string }, what: string) =>
  Effect.map(c.readSnapshot(id, object.sha256), (data) => assert.deepEqual(Array.from(data), Array.from(object.data), what))

export const pruneTests = <E>({ runner, test }: ConformanceSuite<E>) => {
  runner.describe("pruning branches", () => {
    test("an old unlabelled branch is pruned by one appended event: shown as pruned, refused as a target, its own objects collected", (c, p) =>
      Effect.gen(function*() {
        const id = p + "old"
        const objects = yield* withOldBranch(c, id, -2 * HOUR)
        const before = yield* readAll(c, id)
        const byBranch = (yield* c.du({ branches: true })).sessions.find((session) => session.id === id)!.branches!
        assert.deepEqual(byBranch.map((branch) => [branch.tip, branch.current, branch.own.objects, branch.referenced.objects]), [[5, false, 1, 3], [9, true, 1, 3]])
        assert.equal("branches" in (yield* c.du()).sessions.find((session) => session.id === id)!, false, "du() alone is as before")

        const report = yield* c.pruneBranches({ olderThanMs: HOUR, sessionId: id })
        assert.deepEqual(report.skipped, [])
        assert.deepEqual(report.sessions.map((session) => [session.sessionId, session.seq, session.pruned.map(({ nodes, tip }) => ({ tip, nodes }))]), [
          [id, 10, [{ tip: 5, nodes: [{ from: 3, to: 5 }] }]]
        ])
        const after = yield* readAll(c, id)
        assert.deepEqual(encodedEvents(after.slice(0, before.length)), encodedEvents(before), "no stored event changed")
        assert.equal(after.length, before.length + 1)
        assert.equal(after.at(-1)!.event._tag, "BranchesPruned")

        const tree = yield* treeOf(c, id)
        assert.deepEqual(tree.branches.map((branch) => [branch.leaf, branch.pruned === true, branch.checkpoint]), [[5, true, null], [9, false, 7]])
        assert.deepEqual(tree.checkpoints.map((checkpoint) => checkpoint.seq), [1, 7], "a pruned branch offers no checkpoint")
        assert.equal(tree.undo, undefined, "the undo would go back to the pruned branch")
        const state = yield* stateOf(c, id)
        assert.deepEqual(planRestore(id, state, 3, { files: true, conversation: true }).refusals.map((refusal) => refusal.reason), ["branch_pruned"])
        const moved = Session.step(state, { seq: state.head + 1, ts: 0, event: new LeafMoved({ from: 9, to: 5, reason: "switch" }) })
        assert.deepEqual(planMove(state, moved, {}).refusals.map((refusal) => refusal.reason), ["branch_pruned"])

        const branches = (yield* c.du({ branches: true })).sessions.find((session) => session.id === id)!
        assert.deepEqual(branches.branches!.map((branch) => branch.tip), [9])
        assert.equal(branches.referenced.objects, 3, "K, S and N")
        yield* collectLater(c)
        assert.equal((yield* expectFailure(c.readSnapshot(id, objects.O!.sha256), SnapshotBlobError, "only the pruned branch held it")).reason, "missing")
        for (const name of ["K", "S", "N"]) yield* readsBack(c, id, objects[name]!, `${name} is kept`)
        const again = yield* c.pruneBranches({ olderThanMs: 0, sessionId: id })
        assert.deepEqual(again.sessions.map((session) => session.pruned.map((branch) => branch.tip)), [], "nothing more to prune")
      }))

    test("du by branch follows a manifest's chunks to the files they list: a branch owns those only its capture names", (c, p) =>
      Effect.gen(function*() {
        const id = p + "listed"
        const files = ["a.ts", "b.ts", "shared.ts"].map((path) => ({ path, data: new TextEncoder().encode(`${p}:${path}`) }))
        const capture = manifestCapture(files, [])
        // 1 prompt; 2 prompt, 3 the capture (the branch left behind); 4 back to 1; 5 prompt (current).
        yield* c.append(id, [prompt("start"), prompt("the listed way"), capture.event, new LeafMoved({ from: 3, to: 1, reason: "restore" }), prompt("another way")])
        // Another session holds shared.ts too: no branch of the first owns it.
        yield* c.append(p + "other", [prompt("other"), snapshot("shared.ts", files[2]!.data)])
        const usage = yield* c.du({ branches: true })
        const branches = usage.sessions.find((session) => session.id === id)!.branches!
        const chunks = capture.chunks.length
        assert.deepEqual(
          branches.map((branch) => [branch.tip, branch.current, branch.referenced.objects, branch.own.objects]),
          [[3, false, chunks + 3, chunks + 2], [5, true, 0, 0]],
          "the left branch references its chunks and the three files, and owns all but shared.ts"
        )
        const session = usage.sessions.find((entry) => entry.id === id)!
        assert.deepEqual([session.referenced.objects, session.shared.objects], [chunks + 3, 1])
        assert.equal(branches[0]!.own.bytes, session.own.bytes, "what pruning the branch frees is what the session alone holds")
      }))

    test("labelled branches stay unless keepLabeled is false; branches active within olderThanMs stay", (c, p) =>
      Effect.gen(function*() {
        const labeled = p + "labeled"
        yield* withOldBranch(c, labeled, -2 * HOUR, [new BranchLabeled({ seq: 4, label: "keep me" })])
        const head = yield* c.head(labeled)
        const kept = yield* c.pruneBranches({ olderThanMs: HOUR, sessionId: labeled })
        assert.deepEqual(kept.sessions.map((session) => [session.seq, session.pruned.length, session.kept.map((branch) => [branch.tip, branch.reason])]), [
          [undefined, 0, [[5, "labeled"]]]
        ])
        assert.equal(yield* c.head(labeled), head, "nothing appended")
        const unlabeled = yield* c.pruneBranches({ olderThanMs: HOUR, sessionId: labeled, keepLabeled: false })
        assert.deepEqual(unlabeled.sessions[0]!.pruned.map((branch) => branch.tip), [5])

        const recent = p + "recent"
        yield* withOldBranch(c, recent, 0)
        const young = yield* c.pruneBranches({ olderThanMs: HOUR, sessionId: recent })
        assert.deepEqual(young.sessions[0]!.kept.map((branch) => [branch.tip, branch.reason]), [[5, "recent"]])
        assert.equal(young.sessions[0]!.seq, undefined)
        const any = yield* c.pruneBranches({ olderThanMs: 0, sessionId: recent })
        assert.deepEqual(any.sessions[0]!.pruned.map((branch) => branch.tip), [5], "olderThanMs: 0 takes any branch left behind")
      }))

    test("the current path is never pruned, wherever the leaf sits; every session of the store at once", (c, p) =>
      Effect.gen(function*() {
        const inside = p + "inside"
        const objects = yield* withOldBranch(c, inside, LONG_AGO, [], LONG_AGO)
        // Back to just before the second prompt, nothing sent since: both branches are left behind.
        yield* shiftedBy(LONG_AGO)(c.append(inside, [new LeafMoved({ from: 9, to: 2, reason: "restore" })]))
        const other = p + "other"
        yield* withOldBranch(c, other, LONG_AGO)
        // Run long ago too: only this group's sessions are that old.
        const report = yield* shiftedBy(LONG_AGO / 2)(c.pruneBranches({ olderThanMs: HOUR }))
        const mine = report.sessions.filter((session) => session.sessionId.startsWith(p)).sort((a, b) => (a.sessionId < b.sessionId ? -1 : 1))
        assert.deepEqual(mine.map((session) => [session.sessionId, session.pruned.map(({ nodes, tip }) => ({ tip, nodes }))]), [
          [inside, [{ tip: 5, nodes: [{ from: 3, to: 5 }] }, { tip: 9, nodes: [{ from: 7, to: 9 }] }]],
          [other, [{ tip: 5, nodes: [{ from: 3, to: 5 }] }]]
        ])
        const tree = yield* treeOf(c, inside)
        assert.equal(tree.leaf, 2)
        assert.deepEqual(tree.checkpoints.map((checkpoint) => checkpoint.seq), [1])
        assert.deepEqual(tree.branches.map((branch) => [branch.leaf, branch.current, branch.pruned === true]), [[2, true, false], [5, false, true], [9, false, true]])
        yield* collectLater(c)
        yield* readsBack(c, inside, objects.K!, "the current path's object is kept")
        for (const name of ["O", "N"]) yield* expectFailure(c.readSnapshot(inside, objects[name]!.sha256), SnapshotBlobError, `${name} was only on pruned branches`)
      }))

    test("a branch a fork shares is kept; a fork made from before a pruning keeps what it still sees", (c, p) =>
      Effect.gen(function*() {
        const source = p + "source"
        const objects = yield* withOldBranch(c, source, -2 * HOUR)
        // A fork of the first 6 events: it shares the old branch, and may switch to it.
        yield* c.append(p + "fork", [new SessionForked({ from: source, at: 6 })], 0)
        const kept = yield* c.pruneBranches({ olderThanMs: HOUR, sessionId: source })
        assert.deepEqual(kept.sessions[0]!.kept.map((branch) => [branch.tip, branch.reason]), [[5, "forked"]])
        assert.equal(kept.sessions[0]!.seq, undefined)

        // Pruned first, then forked from a point before the pruning (as a fork decided meanwhile would be).
        const late = p + "late"
        const lateObjects = yield* withOldBranch(c, late, -2 * HOUR)
        const pruned = yield* c.pruneBranches({ olderThanMs: HOUR, sessionId: late })
        assert.deepEqual(pruned.sessions[0]!.pruned.map((branch) => branch.tip), [5])
        yield* c.append(p + "late-fork", [new SessionForked({ from: late, at: 9 })], 0)
        const forkTree = yield* treeOf(c, p + "late-fork")
        assert.deepEqual(forkTree.branches.map((branch) => [branch.leaf, branch.pruned === true]), [[5, false], [9, false]], "the fork does not share the pruning")
        // A fork made after it shares the pruning.
        yield* c.append(p + "after-fork", [new SessionForked({ from: late, at: 10 })], 0)
        assert.equal((yield* treeOf(c, p + "after-fork")).branches.find((branch) => branch.leaf === 5)!.pruned, true)
        yield* collectLater(c)
        yield* readsBack(c, source, objects.O!, "the forked source's old branch keeps its object")
        yield* readsBack(c, late, lateObjects.O!, "the fork from before the pruning still sees the branch: its object is kept")
      }))

    test("an append made while a pruning is decided is not lost: the session is read again, or skipped with a report", (c, p) =>
      Effect.gen(function*() {
        const id = p + "race"
        yield* withOldBranch(c, id, -2 * HOUR)
        // Someone switches to the old branch between the pruning's read and its append.
        let raced = false
        const racing: PrunableStore = {
          list: () => c.list(),
          read: (sessionId) => c.read(sessionId),
          append: (sessionId, events, expectedHead) =>
            raced
              ? c.append(sessionId, events, expectedHead)
              : Effect.zipRight(
                Effect.suspend(() => {
                  raced = true
                  // Made an hour ago: the branch it leaves is as old as the pruning asks.
                  return shiftedBy(-HOUR)(c.append(sessionId, [new LeafMoved({ from: 9, to: 5, reason: "switch" })]))
                }),
                c.append(sessionId, events, expectedHead)
              )
        }
        const report = yield* pruneBranches(racing, { olderThanMs: 0, sessionId: id })
        const events = yield* readAll(c, id)
        assert.deepEqual(events.slice(9).map((stored) => stored.event._tag), ["LeafMoved", "BranchesPruned"], "the switch is in the log, then the pruning")
        assert.deepEqual(report.sessions.map((session) => [session.seq, session.pruned.map(({ nodes, tip }) => ({ tip, nodes }))]), [
          [11, [{ tip: 9, nodes: [{ from: 7, to: 9 }] }]]
        ], "planned again: the branch switched to is current, the one left is pruned")
        const tree = yield* treeOf(c, id)
        assert.equal(tree.leaf, 5)
        assert.deepEqual(tree.branches.map((branch) => [branch.leaf, branch.current, branch.pruned === true]), [[5, true, false], [9, false, true]])

        // Appended to before every attempt: skipped, with each of the others' appends kept.
        const busy = p + "busy"
        yield* withOldBranch(c, busy, -2 * HOUR)
        const always: PrunableStore = {
          ...racing,
          append: (sessionId, events, expectedHead) =>
            Effect.zipRight(c.append(sessionId, [new BranchLabeled({ seq: 1, label: "" })]), c.append(sessionId, events, expectedHead))
        }
        const skipped = yield* pruneBranches(always, { olderThanMs: 0, sessionId: busy })
        assert.deepEqual(skipped.skipped.map((entry) => [entry.sessionId, entry.reason]), [[busy, "conflict"]])
        assert.deepEqual(skipped.sessions, [])
        const busyEvents = yield* readAll(c, busy)
        assert.equal(busyEvents.length, 9 + MAX_ATTEMPTS)
        assert.equal(busyEvents.some((stored) => stored.event._tag === "BranchesPruned"), false)
      }))
  })
}
