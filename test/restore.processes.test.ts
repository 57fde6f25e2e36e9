/**
 * A restore cut short by SIGKILL (test/workers/restorer.ts) at every kind of moment — its
 * intent logged but no file changed, half way through the files (a random one), every file done
 * but the log not cut, the log cut — on the file and SQLite backends; a temporary file of a write
 * cut short beside them. Afterwards, through the promise facade
 * of this (another) process: the interrupted restore is reported and `send` refuses; the same
 * restore finishes it, or `undoInterruptedRestore` puts every file back — leaving the workspace
 * and the log exactly as a restore without the crash would (or as they were before it). An
 * outside edit made after the crash is still refused.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { createLiteAgent, RestoreInterruptedError, RestoreRefusedError, type StoredEvent } from "../src/index.js"
import { expectMovedBack, expectUndoneIntent } from "./support/restoredLog.js"
import { scripted, type ScriptedTurn } from "../src/provider.js"
import { diskState, freshWorkdir } from "./support/agentSim.js"
import { type RestoreBackend, restoreKilledAt, storeAt } from "./support/interruptedRestore.js"
import { live, makeTempDir, removeTempDirs } from "./support/processes.js"

afterAll(() => {
  for (const child of live) child.kill("SIGKILL")
  removeTempDirs()
})

const FILES = 24
/** 64 KiB of text that differs per file and version. */
const contentOf = (index: number, version: string) => `${version} of file ${index}\n`.repeat(65_536 / 20).slice(0, 65_536)
const name = (index: number) => `src/f${String(index).padStart(2, "0")}.txt`

const agentOn = (backend: RestoreBackend, location: string, workdir: string, turns: ReadonlyArray<ScriptedTurn> = []) =>
  // Files of 64 KiB in tool inputs would make the conversation big enough to compact: not here.
  createLiteAgent({ model: scripted(turns), workdir, checkpointer: storeAt(backend, location), sessionId: "s", autoCompact: false })

const logOf = async (backend: RestoreBackend, location: string): Promise<Array<StoredEvent>> => {
  const store = storeAt(backend, location)
  try {
    return await store.read("s")
  } finally {
    await store.close()
  }
}

/**
 * A session of two prompts: the first writes FILES files, the second rewrites them all and adds
 * four. Returns the second prompt's seq (the checkpoint restored to), the disk after the first
 * prompt (what the restore brings back) and after the second (what it starts from).
 */
const setUp = async (backend: RestoreBackend) => {
  const location = backend === "sqlite" ? join(makeTempDir("restore-db"), "sessions.db") : makeTempDir("restore-log")
  const workdir = freshWorkdir()
  const writes = (version: string, count: number) =>
    Array.from({ length: count }, (_, i) => ({ name: "write_file", input: { path: name(i), content: contentOf(i, version) } }))
  const agent = agentOn(backend, location, workdir, [
    { toolCalls: writes("one", FILES) },
    { text: "wrote them" },
    { toolCalls: [...writes("two", FILES), ...Array.from({ length: 4 }, (_, i) => ({ name: "write_file", input: { path: `new${i}.txt`, content: `new ${i}` } }))] },
    { text: "rewrote them" }
  ])
  try {
    await agent.send("write the files")
    const afterFirst = diskState(workdir)
    await agent.send("rewrite them")
    const checkpoints = await agent.listCheckpoints("s")
    return { location, workdir, seq: checkpoints[1]!.seq, afterFirst, afterSecond: diskState(workdir) }
  } finally {
    await agent.close()
  }
}

/** The session of `setUp`, its log, and its restore killed at `killAt` (with a write's temporary file left unless the restore got through). */
const crashed = async (backend: RestoreBackend, killAt: string) => {
  const session = await setUp(backend)
  const log = await logOf(backend, session.location)
  await restoreKilledAt({ backend, location: session.location, workdir: session.workdir, sessionId: "s" }, session.seq, killAt)
  if (killAt !== "after-move") plantWriteTemp(session.workdir)
  return { ...session, log }
}

/** Files the restore writes back, and the four new ones it deletes. */
const OPERATIONS = FILES + 4
/** Half way: a random file operation after the first (its number is in the test's name). */
const midWay = 2 + Math.floor(Math.random() * (OPERATIONS - 1))
const KILL_POINTS = ["operation:1", `operation:${midWay}`, "before-move", "after-move"] as const

/** What a write killed between writing its temporary file and renaming it leaves beside it. */
const plantWriteTemp = (workdir: string) => writeFileSync(join(workdir, "src", ".lite-agent-0123456789ab.tmp"), "half a file")

describe.each(["file", "sqlite"] as const)("a restore SIGKILLed part-way: %s", (backend) => {
  for (const killAt of KILL_POINTS) {
    it(`at ${killAt}: reported, turns refused; finished by the same restore, as if nothing had happened`, async () => {
      const { afterFirst, afterSecond, location, log, seq, workdir } = await crashed(backend, killAt)

      const agent = agentOn(backend, location, workdir, [{ text: "not asked" }])
      try {
        if (killAt === "after-move") {
          // Done but for the telling: nothing is pending, and the restore cannot run again (the checkpoint is no longer on the branch).
          expect(await agent.interruptedRestore("s")).toBeUndefined()
          await expect(agent.restore("s", seq)).rejects.toThrow(RestoreRefusedError)
        } else {
          expect(await agent.interruptedRestore("s")).toMatchObject({ checkpoint: seq, startedSeq: log.length + 1, conversation: true })
          const refused = await agent.send("carry on").catch((error: unknown) => error)
          expect(refused).toBeInstanceOf(RestoreInterruptedError)
          expect(diskState(workdir)).not.toEqual(killAt === "operation:1" ? afterFirst : afterSecond)
          const result = await agent.restore("s", seq)
          expect(result).toMatchObject({ resumed: true, conversationRestored: true })
        }
        expect(diskState(workdir)).toEqual(afterFirst)
        expectMovedBack(log, await logOf(backend, location), seq - 1)
        expect(await agent.interruptedRestore("s")).toBeUndefined()
      } finally {
        await agent.close()
      }
    })

    it(`at ${killAt}: undoInterruptedRestore puts every file back, the session as before the restore`, async () => {
      const { afterFirst, afterSecond, location, log, workdir } = await crashed(backend, killAt)

      const agent = agentOn(backend, location, workdir, [{ text: "carried on" }])
      try {
        if (killAt === "after-move") {
          // Nothing to undo: the restore is complete.
          const error = await agent.undoInterruptedRestore("s").catch((caught: unknown) => caught)
          expect(error).toBeInstanceOf(RestoreRefusedError)
          expect((error as RestoreRefusedError).refusals.map((refusal) => refusal.reason)).toEqual(["no_interrupted_restore"])
          expect(diskState(workdir)).toEqual(afterFirst)
          return
        }
        const result = await agent.undoInterruptedRestore("s")
        expect(result.resumed).toBe(true)
        expect(diskState(workdir)).toEqual(afterSecond)
        expectUndoneIntent(log, await logOf(backend, location))
        // The session works again.
        expect((await agent.send("carry on")).text).toBe("carried on")
      } finally {
        await agent.close()
      }
    })
  }

  it("an outside edit made after the crash is refused by the finish and the undo alike, and changes nothing", async () => {
    const { location, seq, workdir } = await setUp(backend)
    await restoreKilledAt({ backend, location, workdir, sessionId: "s" }, seq, `operation:${midWay}`)
    // Two files edited by hand, whether or not the restore had got to them.
    writeFileSync(join(workdir, name(0)), "edited after the crash")
    writeFileSync(join(workdir, name(FILES - 1)), "edited after the crash too")
    const disk = diskState(workdir)
    const log = await logOf(backend, location)
    const agent = agentOn(backend, location, workdir)
    try {
      for (const attempt of [() => agent.restore("s", seq), () => agent.undoInterruptedRestore("s")]) {
        const error = await attempt().catch((caught: unknown) => caught)
        expect(error).toBeInstanceOf(RestoreRefusedError)
        expect((error as RestoreRefusedError).refusals.map((refusal) => [refusal.path, refusal.reason])).toEqual([
          [name(0), "modified_externally"],
          [name(FILES - 1), "modified_externally"]
        ])
        expect(diskState(workdir)).toEqual(disk)
        expect(await logOf(backend, location)).toEqual(log)
      }
      expect(await agent.interruptedRestore("s")).toMatchObject({ checkpoint: seq })
    } finally {
      await agent.close()
    }
  })
})
