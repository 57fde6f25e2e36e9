/**
 * Forks: a session whose first event is a `SessionForked { from, at }` reads as the first `at`
 * events of `from` followed by its own — sharing them and their objects, never copying — and
 * nothing may take what a fork shares.
 */
import assert from "node:assert/strict"
import { Effect, Queue, Stream } from "effect"
import { Checkpointer, type CheckpointerService, type FollowItem } from "../core/Checkpointer.js"
import { CheckpointConflictError, InvalidEventError, InvalidSeqError, SessionForkedError, SnapshotBlobError } from "../core/errors.js"
import { FileSnapshot, type SessionEvent, SessionForked, type StoredEvent, UserMessage } from "../core/events.js"
import { DEFAULT_GRACE_MS } from "../core/internal/objectCollection.js"
import { sha256Hex } from "../core/internal/sha256.js"
import { expectFailure, readAll, shiftedBy } from "./helpers.js"
import { type ConformanceSuite, uniquePrefix } from "./runner.js"

/** Past every grace period. */
const LATER_MS = 2 * DEFAULT_GRACE_MS

const prompts = (...texts: ReadonlyArray<string>) => texts.map((text) => new UserMessage({ content: text }))
const described = (stored: StoredEvent) =>
  `${stored.seq}:${
    stored.event._tag === "UserMessage"
      ? String(stored.event.content)
      : stored.event._tag === "SessionForked"
      ? `forked ${stored.event.at}`
      : stored.event._tag === "ForkMade"
      ? `ForkMade`
      : stored.event._tag
  }`
const BYTES = new TextEncoder().encode("shared by the fork, stored once\n")
const HASH = sha256Hex(BYTES)
const snapshot = new FileSnapshot({
  toolUseId: "toolu_f",
  path: "a.txt",
  state: { _tag: "content", data: BYTES, mode: 0o644, size: BYTES.length, sha256: HASH }
})
/** The same file named by its hash only: its blob must already be stored. */
const reference = new FileSnapshot({
  toolUseId: "toolu_g",
  path: "a.txt",
  state: { _tag: "stored", sha256: HASH, mode: 0o644, size: BYTES.length }
})

/** A source with five events and a fork of its first three. */
const sourceAndFork = (c: CheckpointerService, p: string, extra: ReadonlyArray<SessionEvent> = []) =>
  Effect.gen(function*() {
    const source = p + "source"
    const fork = p + "fork"
    yield* c.append(source, [...prompts("s1", "s2"), ...extra, ...prompts("s3", "s4", "s5")].slice(0, 5))
    assert.equal(yield* c.append(fork, [new SessionForked({ from: source, at: 3 })], 0), 4)
    return { source, fork }
  })

export const forkTests = <E>({ layer, options, runner, test, timeoutMs }: ConformanceSuite<E>): void => {
  runner.describe("forks", () => {
    test("a fork reads as its source's first events followed by its own, at its own seqs", (c, p) =>
      Effect.gen(function*() {
        const { fork, source } = yield* sourceAndFork(c, p)
        assert.equal(yield* c.head(fork), 4)
        assert.deepEqual((yield* readAll(c, fork)).map(described), ["1:s1", "2:s2", "3:s3", "4:forked 3"])
        assert.equal(yield* c.append(fork, prompts("f5", "f6"), 4), 6)
        assert.deepEqual((yield* readAll(c, fork, 2)).map(described), ["3:s3", "4:forked 3", "5:f5", "6:f6"])
        assert.deepEqual((yield* readAll(c, fork, 5)).map(described), ["6:f6"])
        assert.equal((yield* c.version(fork)).head, 6)
        assert.equal((yield* c.stats(fork)).events, 6)
        // The source names its fork, and goes on; what it appends later is not the fork's.
        yield* c.append(source, prompts("s7"), 6)
        assert.deepEqual((yield* readAll(c, source)).map(described), ["1:s1", "2:s2", "3:s3", "4:s4", "5:s5", "6:ForkMade", "7:s7"])
        assert.equal((yield* readAll(c, fork)).length, 6)
        // Expected heads are the fork's as read.
        const conflict = yield* expectFailure(c.append(fork, prompts("stale"), 4), CheckpointConflictError, "a stale head")
        assert.deepEqual([conflict.expected, conflict.actual], [4, 6])
        yield* expectFailure(c.append(fork, prompts("below"), 2), CheckpointConflictError, "a head inside the shared events")
        assert.equal(yield* c.head(fork), 6, "nothing stored by the refused appends")
      }))

    test("a fork's first event is checked against the session it names, storing nothing when refused", (c, p) =>
      Effect.gen(function*() {
        const source = p + "source"
        yield* c.append(source, prompts("a", "b"))
        const refused = (id: string, events: ReadonlyArray<SessionEvent>, what: string) =>
          Effect.zipRight(expectFailure(c.append(id, events), InvalidEventError, what), Effect.map(c.head(id), (head) => assert.equal(head, 0, what)))
        yield* refused(p + "f1", [new SessionForked({ from: source, at: 3 })], "more events than the source holds")
        yield* refused(p + "f2", [new SessionForked({ from: p + "nobody", at: 1 })], "a source that does not exist")
        yield* refused(p + "f3", [new SessionForked({ from: "not a valid id/", at: 1 })], "a source that is no session id")
        yield* refused(p + "f4", [...prompts("x"), new SessionForked({ from: source, at: 1 })], "a SessionForked after another event")
        yield* expectFailure(c.append(source, [new SessionForked({ from: source, at: 1 })]), InvalidEventError, "a fork of itself")
        yield* expectFailure(c.append(source, [new SessionForked({ from: p + "other", at: 0 })]), InvalidEventError, "into a session that exists")
        const conflict = yield* expectFailure(
          c.append(source, [new SessionForked({ from: p + "other", at: 0 })], 2),
          InvalidEventError,
          "into a session that exists, even at its head"
        )
        assert.match(conflict.detail, /session/)
        assert.equal(yield* c.head(source), 2, "a refused fork is not named by its source")
        // A fork of all of it, and a fork of a fork.
        assert.equal(yield* c.append(p + "whole", [new SessionForked({ from: source, at: 2 })]), 3)
        yield* c.append(p + "whole", prompts("w"))
        assert.equal(yield* c.append(p + "deeper", [new SessionForked({ from: p + "whole", at: 4 })]), 5)
        assert.deepEqual((yield* readAll(c, p + "deeper")).map(described), ["1:a", "2:b", "3:forked 2", "4:w", "5:forked 4"])
      }))

    test("a fork reads its source's objects, and its events may name them", (c, p) =>
      Effect.gen(function*() {
        const { fork, source } = yield* sourceAndFork(c, p, [snapshot])
        assert.deepEqual(Array.from(yield* c.readSnapshot(fork, HASH)), Array.from(BYTES))
        yield* c.append(fork, [reference])
        assert.deepEqual((yield* c.listSnapshots(fork)).map((object) => object.sha256), [HASH], "one object, named by both")
        assert.equal((yield* c.stats(fork)).snapshots, 1)
        assert.equal((yield* c.listSnapshots(source)).length, 1)
        // A reference to a blob neither store holds is still refused.
        const unknown = new FileSnapshot({ toolUseId: "t", path: "b", state: { _tag: "stored", sha256: "0".repeat(64), mode: 0o644, size: 1 } })
        yield* expectFailure(c.append(fork, [unknown]), InvalidEventError, "a blob no store holds")
      }))

    test("what forks share cannot be deleted or cut; the rest can", (c, p) =>
      Effect.gen(function*() {
        const { fork, source } = yield* sourceAndFork(c, p)
        const deleted = yield* expectFailure(c.delete(source), SessionForkedError, "deleting a forked session")
        assert.deepEqual(deleted.forks, [{ sessionId: fork, at: 3 }])
        assert.match(deleted.message, /delete the forks first/)
        yield* expectFailure(c.truncate(source, 2), SessionForkedError, "cutting shared events")
        yield* expectFailure(c.truncate(source, 5), SessionForkedError, "cutting the record that names the fork")
        assert.equal(yield* c.head(source), 6)
        yield* c.append(source, prompts("s7"))
        assert.equal(yield* c.truncate(source, 6), 6, "events the fork does not share can go")
        assert.equal((yield* readAll(c, fork)).length, 4)
        yield* expectFailure(c.truncate(fork, 3), InvalidSeqError, "cutting a fork to its shared events")
        yield* c.append(fork, prompts("f5", "f6"))
        assert.equal(yield* c.truncate(fork, 5), 5)
        assert.deepEqual((yield* readAll(c, fork)).map(described), ["1:s1", "2:s2", "3:s3", "4:forked 3", "5:f5"])
        yield* c.delete(fork)
        assert.equal(yield* c.head(fork), 0)
        yield* c.delete(source)
        assert.equal(yield* c.head(source), 0)
      }))

    test("gc keeps the objects a fork's own events name, and those it shares", (c, p) =>
      Effect.gen(function*() {
        const source = p + "source"
        const fork = p + "fork"
        const [cut, shared] = ["cut", "shared"].map((name) => new TextEncoder().encode(`${p}:${name}`))
        const snapshotOf = (bytes: Uint8Array) =>
          new FileSnapshot({ toolUseId: "t", path: "a", state: { _tag: "content", data: bytes, mode: 0o644, size: bytes.length, sha256: sha256Hex(bytes) } })
        yield* c.append(source, [...prompts("s1"), snapshotOf(shared!), snapshotOf(cut!)])
        // The source no longer names `cut` itself; its fork names it, and shares `shared`.
        yield* c.truncate(source, 2)
        yield* c.append(fork, [
          new SessionForked({ from: source, at: 2 }),
          new FileSnapshot({ toolUseId: "t", path: "b", state: { _tag: "stored", sha256: sha256Hex(cut!), mode: 0o644, size: cut!.length } })
        ])
        yield* shiftedBy(LATER_MS)(c.gc())
        assert.deepEqual(Array.from(yield* c.readSnapshot(fork, sha256Hex(cut!))), Array.from(cut!))
        assert.deepEqual(Array.from(yield* c.readSnapshot(fork, sha256Hex(shared!))), Array.from(shared!))
        yield* c.delete(fork)
        yield* shiftedBy(LATER_MS)(c.gc())
        yield* expectFailure(c.readSnapshot(source, sha256Hex(cut!)), SnapshotBlobError, "no log names it now")
        assert.deepEqual(Array.from(yield* c.readSnapshot(source, sha256Hex(shared!))), Array.from(shared!))
      }))

    test("a follower of a fork gets the shared events, then its own as they land", (c, p) =>
      Effect.gen(function*() {
        const { fork } = yield* sourceAndFork(c, p)
        const items = yield* Queue.unbounded<FollowItem>()
        yield* Effect.forkScoped(Stream.runForEach(c.follow(fork, { sinceSeq: 1 }), (item) => Queue.offer(items, item)))
        const next = (n: number) =>
          Effect.forEach(Array.from({ length: n }), () => Queue.take(items)).pipe(
            Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error("follow: timed out") }),
            Effect.map((taken) => taken.map((item) => (item.type === "event" ? described(item.stored) : `reset ${item.head}`)))
          )
        assert.deepEqual(yield* next(3), ["2:s2", "3:s3", "4:forked 3"])
        yield* c.append(fork, prompts("f5"), 4)
        assert.deepEqual(yield* next(1), ["5:f5"])
      }))

    if (options.reopen) {
      runner.it(
        "a fork survives closing and reopening",
        () =>
          Effect.runPromise(Effect.gen(function*() {
            const p = uniquePrefix("fork-reopen")
            yield* Effect.scoped(Effect.flatMap(Checkpointer, (c) => sourceAndFork(c, p, [snapshot])).pipe(Effect.provide(layer)))
            yield* Effect.scoped(Effect.flatMap(Checkpointer, (c) =>
              Effect.gen(function*() {
                assert.equal(yield* c.head(p + "fork"), 4)
                assert.deepEqual((yield* readAll(c, p + "fork")).map(described), ["1:s1", "2:s2", "3:FileSnapshot", "4:forked 3"])
                assert.equal(yield* c.append(p + "fork", prompts("after reopen"), 4), 5)
                assert.deepEqual(Array.from(yield* c.readSnapshot(p + "fork", HASH)), Array.from(BYTES))
                yield* expectFailure(c.delete(p + "source"), SessionForkedError, "deleting a forked session after a reopen")
              })).pipe(Effect.provide(layer)))
          })),
        timeoutMs
      )
    }
  })
}
