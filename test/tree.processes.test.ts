/**
 * The session tree across real processes: an undo SIGKILLed at every kind of moment (before its
 * first file, half way, before and after the move of the leaf), then finished by the same undo or
 * put back; and two processes moving the same session's leaf at once — one wins, the other gets a
 * conflict, never a mix of the two.
 */
import { readdirSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { createLiteAgent, RestoreInterruptedError, RestoreRefusedError } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { diskState, freshWorkdir } from "./support/agentSim.js"
import { type RestoreBackend, restoreKilledAt, storeAt } from "./support/interruptedRestore.js"
import { live, makeTempDir, removeTempDirs, startWorker } from "./support/processes.js"

afterAll(() => {
  for (const child of live) child.kill("SIGKILL")
  removeTempDirs()
})

const FILES = 6
const name = (index: number) => `src/f${index}.txt`

/**
 * A session of two prompts (the first writes FILES files, the second rewrites them and adds two),
 * restored to before the second: the disk before that restore and after it.
 */
const restoredSession = async (backend: RestoreBackend) => {
  const location = backend === "sqlite" ? join(makeTempDir("tree-db"), "sessions.db") : makeTempDir("tree-log")
  const workdir = freshWorkdir()
  const writes = (version: string, count: number) =>
    Array.from({ length: count }, (_, i) => ({ name: "write_file", input: { path: name(i), content: `${version} ${i}\n` } }))
  const agent = createLiteAgent({
    model: scripted([
      { toolCalls: writes("one", FILES) },
      { text: "wrote" },
      { toolCalls: [...writes("two", FILES), { name: "write_file", input: { path: "new.txt", content: "new" } }] },
      { text: "rewrote" }
    ]),
    workdir,
    checkpointer: storeAt(backend, location),
    sessionId: "s"
  })
  try {
    await agent.send("write")
    await agent.send("rewrite")
    const tip = diskState(workdir)
    const [first, second] = await agent.listCheckpoints("s")
    await agent.restore("s", second!.seq)
    return { location, workdir, tip, restored: diskState(workdir), first: first!.seq, second: second!.seq }
  } finally {
    await agent.close()
  }
}

const agentOn = (backend: RestoreBackend, location: string, workdir: string) =>
  createLiteAgent({ model: scripted([{ text: "carried on" }]), workdir, checkpointer: storeAt(backend, location), sessionId: "s" })

const prompts = async (agent: ReturnType<typeof agentOn>) => (await agent.listCheckpoints("s")).map((checkpoint) => checkpoint.prompt)

describe.each(["file", "sqlite"] as const)("the session tree across processes: %s", (backend) => {
  for (const killAt of ["after-fork", "operation:1", `operation:${2 + Math.floor(Math.random() * FILES)}`, "before-move"]) {
    it(`a fork in the workdir SIGKILLed at ${killAt}: the same fork again finishes it; the source is untouched`, async () => {
      const session = await restoredSession(backend)
      const agent = agentOn(backend, session.location, session.workdir)
      try {
        await agent.undo("s")
      } finally {
        await agent.close()
      }
      await restoreKilledAt({ backend, location: session.location, workdir: session.workdir, sessionId: "s" }, `fork:${session.second}:f`, killAt)
      const again = agentOn(backend, session.location, session.workdir)
      try {
        const forked = await again.fork("s", session.second, { id: "f" })
        expect(forked).toMatchObject({ sessionId: "f", resumed: true, leaf: session.second - 1 })
        expect(diskState(session.workdir)).toEqual(session.restored)
        expect((await again.listCheckpoints("f")).map((checkpoint) => checkpoint.prompt)).toEqual(["write"])
        expect(await again.interruptedRestore("f")).toBeUndefined()
        expect(await prompts(again)).toEqual(["write", "rewrite"])
        // The fork's undo returns to the source's tip.
        await again.undo("f")
        expect(diskState(session.workdir)).toEqual(session.tip)
      } finally {
        await again.close()
      }
    })
  }

  for (const killAt of ["before-fork", "after-fork"]) {
    it(`a fork into a directory SIGKILLed ${killAt.replace("-", " ")} is stored: the same fork again finishes it, nothing left beside it`, async () => {
      const session = await restoredSession(backend)
      const parent = makeTempDir("tree-fork")
      const directory = join(parent, "side")
      await restoreKilledAt(
        { backend, location: session.location, workdir: session.workdir, sessionId: "s" },
        `fork:${session.second}:g:${directory}`,
        killAt
      )
      const agent = agentOn(backend, session.location, session.workdir)
      try {
        expect(diskState(parent)).not.toEqual({})
        const forked = await agent.fork("s", session.second, { id: "g", workdir: directory })
        expect(forked.resumed).toBe(killAt === "after-fork")
        expect(diskState(directory)).toEqual(session.restored)
        expect(readdirSync(parent)).toEqual(["side"])
        expect((await agent.listCheckpoints("g")).map((checkpoint) => checkpoint.prompt)).toEqual(["write"])
        expect(diskState(session.workdir)).toEqual(session.restored)
      } finally {
        await agent.close()
      }
    })
  }

  for (const killAt of ["operation:1", `operation:${2 + Math.floor(Math.random() * FILES)}`, "before-move", "after-move"]) {
    it(`an undo SIGKILLed at ${killAt}: reported, turns refused; the same undo finishes it`, async () => {
      const session = await restoredSession(backend)
      await restoreKilledAt({ backend, location: session.location, workdir: session.workdir, sessionId: "s" }, "undo", killAt)
      const agent = agentOn(backend, session.location, session.workdir)
      try {
        if (killAt !== "after-move") {
          expect(await agent.interruptedRestore("s")).toMatchObject({ move: { reason: "undo" }, conversation: true })
          expect(await agent.send("go on").catch((error: unknown) => error)).toBeInstanceOf(RestoreInterruptedError)
          const finished = await agent.undo("s")
          expect(finished.resumed).toBe(true)
        }
        expect(diskState(session.workdir)).toEqual(session.tip)
        expect(await prompts(agent)).toEqual(["write", "rewrite"])
        expect(await agent.interruptedRestore("s")).toBeUndefined()
        expect((await agent.send("go on")).text).toBe("carried on")
      } finally {
        await agent.close()
      }
    })

    it(`an undo SIGKILLed at ${killAt}: undoInterruptedRestore puts its files back, the session as after the restore`, async () => {
      const session = await restoredSession(backend)
      await restoreKilledAt({ backend, location: session.location, workdir: session.workdir, sessionId: "s" }, "undo", killAt)
      const agent = agentOn(backend, session.location, session.workdir)
      try {
        if (killAt === "after-move") {
          // The undo is complete: nothing to put back.
          const error = await agent.undoInterruptedRestore("s").catch((caught: unknown) => caught)
          expect((error as RestoreRefusedError).refusals.map((refusal) => refusal.reason)).toEqual(["no_interrupted_restore"])
          expect(diskState(session.workdir)).toEqual(session.tip)
          return
        }
        await agent.undoInterruptedRestore("s")
        expect(diskState(session.workdir)).toEqual(session.restored)
        expect(await prompts(agent)).toEqual(["write"])
        // The undo can still be made, whole, afterwards.
        await agent.undo("s")
        expect(diskState(session.workdir)).toEqual(session.tip)
      } finally {
        await agent.close()
      }
    })
  }

  it("two processes moving the same session's leaf at once: one wins, the other gets a conflict and changes nothing", async () => {
    const session = await restoredSession(backend)
    const go = join(makeTempDir("tree-go"), "go")
    // Both plan from the same state and wait at their intent: an undo (back to the tip) and a restore to the first prompt.
    const undo = startWorker("restorer.ts", [backend, session.location, session.workdir, "s", "undo", `race:${go}`])
    const restore = startWorker("restorer.ts", [backend, session.location, session.workdir, "s", String(session.first), `race:${go}`])
    await Promise.all([undo.waitForLine((line) => line === "waiting"), restore.waitForLine((line) => line === "waiting")])
    writeFileSync(go, "")
    const outcomes = await Promise.all([undo, restore].map((worker) => worker.waitForLine((line) => line === "done" || line.startsWith("failed"))))
    await Promise.all([undo.closed, restore.closed])
    expect([...outcomes].sort()).toEqual(["done", "failed CheckpointConflictError"])
    const agent = agentOn(backend, session.location, session.workdir)
    try {
      expect(await agent.interruptedRestore("s")).toBeUndefined()
      if (outcomes[0] === "done") {
        expect(diskState(session.workdir)).toEqual(session.tip)
        expect(await prompts(agent)).toEqual(["write", "rewrite"])
      } else {
        expect(diskState(session.workdir)).toEqual({})
        expect(await prompts(agent)).toEqual([])
      }
    } finally {
      await agent.close()
    }
  })
})
