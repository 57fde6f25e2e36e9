/**
 * Undo and redo along a session's history of moves, on real directories and every backend: a
 * restore undone brings the conversation and the files back; a redo goes forward again; a turn
 * taken after a restore is a branch of its own that an undo leaves and a redo returns to; edits
 * made outside since are refused per file with nothing changed; nothing is ever deleted.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { RestoreRefusedError, Session, type StoredEvent, TimeTravel } from "../src/core.js"
import { BACKENDS, diskState, failureOf, freshWorkdir, logOf, runTimeTravel as run, turn, twoPrompts } from "./support/agentSim.js"

const prompts = Effect.map(Effect.flatMap(TimeTravel.TimeTravel, (timeTravel) => timeTravel.listCheckpoints("s")), (list) =>
  list.map((checkpoint) => checkpoint.prompt))

/** Every event of `before` is still there, in place. */
const expectNothingDeleted = (before: ReadonlyArray<StoredEvent>, after: ReadonlyArray<StoredEvent>) =>
  expect(after.slice(0, before.length)).toEqual(before)

describe("undo and redo", () => {
  for (const backend of BACKENDS) {
    it(`${backend}: a restore undone and redone, the conversation and the files with it; the log only grows`, async () => {
      const workdir = freshWorkdir()
      await run(backend, workdir, Effect.gen(function*() {
        const timeTravel = yield* TimeTravel.TimeTravel
        const { second } = yield* twoPrompts
        const atTip = diskState(workdir)
        const log = yield* logOf("s")
        yield* timeTravel.restore("s", second)
        const restored = diskState(workdir)
        expect(Object.keys(restored).sort()).toEqual(["a.txt", "src/b.txt"])
        expect(yield* prompts).toEqual(["create files"])

        // The dry run names every file the undo would change, and changes nothing.
        const dry = yield* timeTravel.undo("s", { dryRun: true })
        expect(dry.plan.map((file) => [file.path, file.action])).toEqual([["a.txt", "write"], ["c.txt", "write"]])
        expect(diskState(workdir)).toEqual(restored)

        const undone = yield* timeTravel.undo("s")
        expect(undone).toMatchObject({ conversationRestored: true, restoredFiles: ["a.txt", "c.txt"], refusals: [] })
        expect(diskState(workdir)).toEqual(atTip)
        expect(yield* prompts).toEqual(["create files", "edit them"])

        const redone = yield* timeTravel.redo("s")
        expect(redone.restoredFiles).toEqual(["a.txt", "c.txt"])
        expect(diskState(workdir)).toEqual(restored)
        expect(yield* prompts).toEqual(["create files"])

        // And back again: an undo after a redo reverses the redo.
        yield* timeTravel.undo("s")
        expect(diskState(workdir)).toEqual(atTip)
        const after = yield* logOf("s")
        expectNothingDeleted(log, after)
        expect(after.filter((stored) => stored.event._tag === "LeafMoved").map((stored) => stored.event)).toEqual([
          expect.objectContaining({ reason: "restore", to: second - 1 }),
          expect.objectContaining({ reason: "undo", to: log.length }),
          expect.objectContaining({ reason: "redo", to: second - 1 }),
          expect.objectContaining({ reason: "undo", to: log.length })
        ])
        expect(Session.interruptedRestore(Session.fold(after))).toBeUndefined()
      }))
    })
  }

  it("a turn taken after a restore is a branch: an undo leaves it (its files undone too), a redo returns to it", async () => {
    const workdir = freshWorkdir()
    await run("file", workdir, Effect.gen(function*() {
      const timeTravel = yield* TimeTravel.TimeTravel
      const { second } = yield* twoPrompts
      const atTip = diskState(workdir)
      yield* timeTravel.restore("s", second)
      yield* turn("s", "another way", [
        { name: "edit_file", input: { path: "a.txt", old_string: "alpha", new_string: "omega" } },
        { name: "write_file", input: { path: "d.txt", content: "delta" } }
      ])
      const onNewBranch = diskState(workdir)
      expect(yield* prompts).toEqual(["create files", "another way"])

      yield* timeTravel.undo("s")
      expect(diskState(workdir)).toEqual(atTip)
      expect(yield* prompts).toEqual(["create files", "edit them"])

      yield* timeTravel.redo("s")
      expect(diskState(workdir)).toEqual(onNewBranch)
      expect(yield* prompts).toEqual(["create files", "another way"])
    }))
  })

  it("an edit made outside since the restore is refused per file, and nothing changes", async () => {
    const workdir = freshWorkdir()
    await run("sqlite", workdir, Effect.gen(function*() {
      const timeTravel = yield* TimeTravel.TimeTravel
      const { first } = yield* twoPrompts
      yield* timeTravel.restore("s", first)
      expect(diskState(workdir)).toEqual({})
      writeFileSync(join(workdir, "c.txt"), "mine")
      const disk = diskState(workdir)
      const log = yield* logOf("s")
      const error = yield* failureOf(timeTravel.undo("s"))
      expect(error).toBeInstanceOf(RestoreRefusedError)
      expect((error as RestoreRefusedError).refusals.map((refusal) => [refusal.path, refusal.reason])).toEqual([["c.txt", "modified_externally"]])
      expect(diskState(workdir)).toEqual(disk)
      expect(yield* logOf("s")).toEqual(log)
      expect(yield* prompts).toEqual([])
    }))
  })

  it("repeated undos walk the history of moves back, redos forward; nothing to undo or redo is refused", async () => {
    const workdir = freshWorkdir()
    await run("memory", workdir, Effect.gen(function*() {
      const timeTravel = yield* TimeTravel.TimeTravel
      const { first, second } = yield* twoPrompts
      const reasons = (error: unknown) => (error as RestoreRefusedError).refusals.map((refusal) => refusal.reason)
      expect(reasons(yield* failureOf(timeTravel.undo("s")))).toEqual(["nothing_to_undo"])
      expect(reasons(yield* failureOf(timeTravel.redo("s")))).toEqual(["nothing_to_redo"])
      const atTip = diskState(workdir)
      yield* timeTravel.restore("s", second)
      const atFirst = diskState(workdir)
      yield* timeTravel.restore("s", first)
      expect(diskState(workdir)).toEqual({})

      yield* timeTravel.undo("s")
      expect(yield* prompts).toEqual(["create files"])
      expect(diskState(workdir)).toEqual(atFirst)
      yield* timeTravel.undo("s")
      expect(yield* prompts).toEqual(["create files", "edit them"])
      expect(diskState(workdir)).toEqual(atTip)
      expect(reasons(yield* failureOf(timeTravel.undo("s")))).toEqual(["nothing_to_undo"])

      yield* timeTravel.redo("s")
      expect(diskState(workdir)).toEqual(atFirst)
      yield* timeTravel.redo("s")
      expect(diskState(workdir)).toEqual({})
      expect(yield* prompts).toEqual([])
      expect(reasons(yield* failureOf(timeTravel.redo("s")))).toEqual(["nothing_to_redo"])

      // A restore after an undo empties what redo can do.
      yield* timeTravel.undo("s")
      yield* timeTravel.restore("s", first)
      expect(reasons(yield* failureOf(timeTravel.redo("s")))).toEqual(["nothing_to_redo"])
      const badOption = yield* failureOf(timeTravel.undo("s", { bogus: true } as TimeTravel.MoveOptions))
      expect(badOption).toMatchObject({ _tag: "ConfigurationError" })
    }))
  })

  it("the tree: every branch's checkpoints, the current one, labels; a switch to another branch, undone like a restore", async () => {
    const workdir = freshWorkdir()
    await run("file", workdir, Effect.gen(function*() {
      const timeTravel = yield* TimeTravel.TimeTravel
      const { first, second } = yield* twoPrompts
      const atOldTip = diskState(workdir)
      const oldTip = (yield* timeTravel.tree("s")).leaf
      yield* timeTravel.restore("s", second)
      const third = yield* turn("s", "another way", [{ name: "write_file", input: { path: "d.txt", content: "delta" } }])
      const onNewBranch = diskState(workdir)

      const tree = yield* timeTravel.tree("s")
      const newTip = tree.leaf
      expect(tree.checkpoints.map(({ children, current, parent, prompt, seq }) => ({ seq, prompt, parent, children, current }))).toEqual([
        { seq: first, prompt: "create files", parent: null, children: [second, third], current: true },
        { seq: second, prompt: "edit them", parent: first, children: [], current: false },
        { seq: third, prompt: "another way", parent: first, children: [], current: true }
      ])
      expect(tree.branches).toEqual([
        { leaf: oldTip, checkpoint: second, current: false },
        { leaf: newTip, checkpoint: third, current: true }
      ])
      expect(tree.undo).toMatchObject({ from: oldTip, to: second - 1 })
      expect(tree.redo).toBeUndefined()

      yield* timeTravel.label("s", oldTip, "the first idea")
      yield* timeTravel.label("s", first, "start")
      const labelled = yield* timeTravel.tree("s")
      expect(labelled.branches.find((branch) => branch.leaf === oldTip)?.label).toBe("the first idea")
      expect(labelled.checkpoints.find((checkpoint) => checkpoint.seq === first)?.label).toBe("start")
      yield* timeTravel.label("s", first, "")
      expect((yield* timeTravel.tree("s")).checkpoints.find((checkpoint) => checkpoint.seq === first)?.label).toBeUndefined()

      // Switch to the first idea: its conversation and its files.
      yield* timeTravel.switchBranch("s", oldTip)
      expect(diskState(workdir)).toEqual(atOldTip)
      expect(yield* prompts).toEqual(["create files", "edit them"])
      const switched = yield* timeTravel.tree("s")
      expect(switched.branches.map((branch) => [branch.leaf, branch.current])).toEqual([[oldTip, true], [newTip, false]])
      // And back, by undoing the switch.
      yield* timeTravel.undo("s")
      expect(diskState(workdir)).toEqual(onNewBranch)
      expect(yield* prompts).toEqual(["create files", "another way"])

      const reasons = (error: unknown) => (error as RestoreRefusedError).refusals.map((refusal) => refusal.reason)
      expect(reasons(yield* failureOf(timeTravel.switchBranch("s", first)))).toEqual(["not_a_branch"])
      expect(reasons(yield* failureOf(timeTravel.switchBranch("s", newTip)))).toEqual(["not_a_branch"])
      expect(yield* failureOf(timeTravel.label("s", newTip + 100, "x"))).toMatchObject({ _tag: "InvalidSeqError" })
      expect(yield* failureOf(timeTravel.label("s", first, "x".repeat(201)))).toMatchObject({ _tag: "ConfigurationError" })
    }))
  })

  it("a restore to a checkpoint of another branch moves there, conversation and files; one of the two alone is refused", async () => {
    const workdir = freshWorkdir()
    await run("file", workdir, Effect.gen(function*() {
      const timeTravel = yield* TimeTravel.TimeTravel
      const { second } = yield* twoPrompts
      const afterSecond = diskState(workdir)
      const third = yield* turn("s", "and a third", [{ name: "write_file", input: { path: "e.txt", content: "epsilon" } }])
      yield* timeTravel.restore("s", second)
      yield* turn("s", "another way", [{ name: "write_file", input: { path: "d.txt", content: "delta" } }])
      const onNewBranch = diskState(workdir)
      const log = yield* logOf("s")
      expect((yield* timeTravel.tree("s")).checkpoints.find((checkpoint) => checkpoint.seq === third)?.current).toBe(false)

      const reasons = (error: unknown) => (error as RestoreRefusedError).refusals.map((refusal) => refusal.reason)
      for (const partial of [{ files: false }, { conversation: false }]) {
        expect(reasons(yield* failureOf(timeTravel.restore("s", third, partial)))).toEqual(["other_branch"])
      }
      const dry = yield* timeTravel.restore("s", third, { dryRun: true })
      expect(dry.refusals).toEqual([])
      expect(yield* logOf("s")).toEqual(log)
      expect(diskState(workdir)).toEqual(onNewBranch)

      // Just before "and a third" on the branch left behind: after "edit them", without d.txt.
      const restored = yield* timeTravel.restore("s", third)
      expect(restored).toMatchObject({ conversationRestored: true, refusals: [] })
      expect(restored.restoredFiles).toContain("d.txt")
      expect(diskState(workdir)).toEqual(afterSecond)
      expect(yield* prompts).toEqual(["create files", "edit them"])
      expect((yield* logOf("s")).at(-1)?.event).toMatchObject({ _tag: "LeafMoved", reason: "switch", to: third - 1 })
      // Undone like a switch: back on the new branch.
      yield* timeTravel.undo("s")
      expect(diskState(workdir)).toEqual(onNewBranch)
      expect(yield* prompts).toEqual(["create files", "another way"])
    }))
  })
})
