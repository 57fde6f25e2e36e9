/**
 * Fork: a new session from just before a checkpoint (or from the tip), with the conversation up
 * to there and the workspace as it was there — in the same workdir (a restore of the fork, which
 * an undo takes back) or written into a directory of its own — sharing the source's events and
 * blobs, on real directories and every backend; refused, creating nothing, as a restore is.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { Checkpointer, ConfigurationError, RestoreRefusedError, SessionForkedError, TimeTravel } from "../src/core.js"
import { BACKENDS, diskState, failureOf, freshWorkdir, logOf, runTimeTravel as run, turn, twoPrompts } from "./support/agentSim.js"

const promptsOf = (sessionId: string) =>
  Effect.map(Effect.flatMap(TimeTravel.TimeTravel, (timeTravel) => timeTravel.listCheckpoints(sessionId)), (list) =>
    list.map((checkpoint) => checkpoint.prompt))

const newDirectory = () => join(mkdtempSync(join(tmpdir(), "lite-agent-fork-")), "fork")

describe("fork", () => {
  for (const backend of BACKENDS) {
    it(`${backend}: a fork in the same workdir starts just before a checkpoint, shares the source's events, and its undo returns to the source's tip`, async () => {
      const workdir = freshWorkdir()
      await run(backend, workdir, Effect.gen(function*() {
        const timeTravel = yield* TimeTravel.TimeTravel
        const checkpointer = yield* Checkpointer
        const { second } = yield* twoPrompts
        const atTip = diskState(workdir)
        const sourceLog = yield* logOf("s")

        const forked = yield* timeTravel.fork("s", second, { id: "f" })
        expect(forked).toMatchObject({
          sessionId: "f",
          forkedFrom: { session: "s", at: sourceLog.length },
          leaf: second - 1,
          workdir,
          conversationRestored: true,
          restoredFiles: ["a.txt", "c.txt"],
          refusals: []
        })
        expect(Object.keys(diskState(workdir)).sort()).toEqual(["a.txt", "src/b.txt"])
        expect(yield* promptsOf("f")).toEqual(["create files"])
        // The source is as it was — one event added, naming its fork — its checkpoints all there.
        const named = yield* logOf("s")
        expect(named.slice(0, sourceLog.length)).toEqual(sourceLog)
        expect(named.slice(sourceLog.length).map((stored) => stored.event)).toEqual([expect.objectContaining({ _tag: "ForkMade", fork: "f", at: sourceLog.length })])
        expect(yield* promptsOf("s")).toEqual(["create files", "edit them"])
        // The fork reads the source's events as its own first ones, and their objects: the store's, never copied.
        const forkLog = yield* logOf("f")
        expect(forkLog.slice(0, sourceLog.length)).toEqual(sourceLog)
        expect(forkLog[sourceLog.length]?.event).toMatchObject({ _tag: "SessionForked", from: "s", at: sourceLog.length })
        const sourceObjects = (yield* checkpointer.listSnapshots("s")).map((object) => object.sha256)
        const forkObjects = new Set((yield* checkpointer.listSnapshots("f")).map((object) => object.sha256))
        expect(sourceObjects.length).toBeGreaterThan(0)
        expect(sourceObjects.filter((sha256) => !forkObjects.has(sha256))).toEqual([])
        expect((yield* timeTravel.tree("f")).forkedFrom).toEqual({ session: "s", at: sourceLog.length })
        expect((yield* timeTravel.tree("s")).forkedFrom).toBeUndefined()

        // The fork's undo goes back to where the source was: conversation and files.
        yield* timeTravel.undo("f")
        expect(diskState(workdir)).toEqual(atTip)
        expect(yield* promptsOf("f")).toEqual(["create files", "edit them"])
        yield* timeTravel.redo("f")
        expect((yield* checkpointer.listSnapshots("f")).length).toBeGreaterThanOrEqual(sourceObjects.length)
        // What the fork does next is its own.
        yield* turn("f", "another way", [{ name: "write_file", input: { path: "d.txt", content: "delta" } }])
        expect(yield* promptsOf("f")).toEqual(["create files", "another way"])
        expect(yield* logOf("s")).toEqual(named)
        expect((yield* timeTravel.tree("s")).forks).toEqual([{ session: "f", at: sourceLog.length }])
        // The source cannot go while the fork shares its events.
        const refused = yield* failureOf(checkpointer.delete("s"))
        expect(refused).toBeInstanceOf(SessionForkedError)
        expect(yield* logOf("s")).toEqual(named)
      }))
    })
  }

  it("a fork into a directory of its own writes the files as they were there, and leaves the workdir alone", async () => {
    const workdir = freshWorkdir()
    await run("file", workdir, Effect.gen(function*() {
      const timeTravel = yield* TimeTravel.TimeTravel
      const { second } = yield* twoPrompts
      const atTip = diskState(workdir)
      yield* timeTravel.restore("s", second)
      const atFirst = diskState(workdir)
      yield* timeTravel.undo("s")

      const elsewhere = newDirectory()
      const forked = yield* timeTravel.fork("s", second, { workdir: elsewhere })
      expect(forked).toMatchObject({ workdir: elsewhere, leaf: second - 1, restoredFiles: ["a.txt", "src/b.txt"] })
      expect(diskState(elsewhere)).toEqual(atFirst)
      expect(diskState(workdir)).toEqual(atTip)
      expect(yield* promptsOf(forked.sessionId)).toEqual(["create files"])
      // No staging directory is left beside it.
      expect(Object.keys(diskState(join(elsewhere, "..")))).toEqual(Object.keys(atFirst).map((path) => `fork/${path}`))

      // From the tip, into an empty directory that already exists.
      const empty = newDirectory()
      mkdirSync(empty)
      const tip = yield* timeTravel.fork("s", undefined, { workdir: empty })
      expect(diskState(empty)).toEqual(atTip)
      expect(tip.conversationRestored).toBe(false)
      expect(yield* promptsOf(tip.sessionId)).toEqual(["create files", "edit them"])
    }))
  })

  it("a fork is refused, creating nothing and changing nothing, as a restore would be — and for a directory in use", async () => {
    const workdir = freshWorkdir()
    await run("file", workdir, Effect.gen(function*() {
      const timeTravel = yield* TimeTravel.TimeTravel
      const checkpointer = yield* Checkpointer
      const { first, second } = yield* twoPrompts
      writeFileSync(join(workdir, "c.txt"), "edited outside")
      const before = diskState(workdir)
      const refused = yield* failureOf(timeTravel.fork("s", second, { id: "f1" }))
      expect(refused).toBeInstanceOf(RestoreRefusedError)
      expect((refused as RestoreRefusedError).refusals).toEqual([expect.objectContaining({ path: "c.txt", reason: "modified_externally" })])
      expect(yield* checkpointer.head("f1")).toBe(0)
      expect(diskState(workdir)).toEqual(before)

      const notACheckpoint = yield* failureOf(timeTravel.fork("s", first + 1, { id: "f2" }))
      expect((notACheckpoint as RestoreRefusedError).refusals[0]?.reason).toBe("not_a_checkpoint")
      // A dry run says what it would do and creates nothing.
      const dry = yield* timeTravel.fork("s", first, { id: "f3", dryRun: true, workdir: newDirectory() })
      expect(dry).toMatchObject({ dryRun: true, sessionId: "f3", conversationRestored: true })
      expect(yield* checkpointer.head("f3")).toBe(0)

      const full = newDirectory()
      mkdirSync(full)
      writeFileSync(join(full, "mine.txt"), "not empty")
      expect(yield* failureOf(timeTravel.fork("s", first, { id: "f4", workdir: full }))).toBeInstanceOf(ConfigurationError)
      expect(yield* failureOf(timeTravel.fork("s", first, { id: "f5", workdir: join(workdir, "sub") }))).toBeInstanceOf(ConfigurationError)
      expect(yield* failureOf(timeTravel.fork("s", first, { id: "s" }))).toBeInstanceOf(ConfigurationError)
      for (const id of ["f2", "f4", "f5"]) expect(yield* checkpointer.head(id)).toBe(0)
    }))
  })

  it("a fork from a checkpoint on another branch, and from the tip of a session, in the same workdir", async () => {
    const workdir = freshWorkdir()
    await run("sqlite", workdir, Effect.gen(function*() {
      const timeTravel = yield* TimeTravel.TimeTravel
      const { second } = yield* twoPrompts
      const atTip = diskState(workdir)
      // A branch: back to before the second prompt, and another way from there.
      yield* timeTravel.restore("s", second)
      const other = yield* turn("s", "other way", [{ name: "write_file", input: { path: "o.txt", content: "other" } }])
      const third = yield* turn("s", "and on", [{ name: "write_file", input: { path: "o.txt", content: "on" } }])
      expect(other).toBeGreaterThan(second)
      // `second` is on the branch the restore left: the fork switches to it.
      const forked = yield* timeTravel.fork("s", second, { id: "g" })
      expect(forked.leaf).toBe(second - 1)
      expect(yield* promptsOf("g")).toEqual(["create files"])
      expect(Object.keys(diskState(workdir)).sort()).toEqual(["a.txt", "src/b.txt"])
      yield* timeTravel.undo("g")
      expect(diskState(workdir).o?.data).toBeUndefined()
      expect(Buffer.from(diskState(workdir)["o.txt"]!.data, "base64").toString()).toBe("on")
      // From the tip: the same conversation and files, nothing moved.
      const tip = yield* timeTravel.fork("s", undefined, { id: "h" })
      expect(tip).toMatchObject({ restoredFiles: [], conversationRestored: false })
      expect(yield* promptsOf("h")).toEqual(["create files", "other way", "and on"])
      expect(third).toBeGreaterThan(other)
      expect(atTip["c.txt"]).toBeDefined()
    }))
  })
})
