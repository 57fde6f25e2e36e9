/**
 * Compaction in real processes on real files, SIGKILLed part-way: the log is left exactly as it
 * was, or with the whole `Compaction` event after it — never anything in between — and a new
 * process compacts and carries on.
 */
import { cpSync } from "node:fs"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { fileCheckpointer, type StoredEvent } from "../src/index.js"
import { live, makeTempDir, removeTempDirs, startWorker } from "./support/processes.js"

afterEach(() => {
  for (const child of live) child.kill("SIGKILL")
})
afterAll(removeTempDirs)

const sessionId = "compacted"
const run = (config: Record<string, unknown>) => startWorker("compactor.ts", [JSON.stringify(config)])

const readLog = async (dir: string): Promise<Array<StoredEvent>> => {
  const checkpointer = fileCheckpointer({ dir })
  try {
    return await checkpointer.read(sessionId)
  } finally {
    await checkpointer.close()
  }
}

const setUp = async () => {
  const dir = makeTempDir("compact-log")
  const workdir = makeTempDir("compact-work")
  const setup = run({ mode: "setup", dir, workdir, sessionId })
  await setup.waitForLine((line) => line === "ready")
  await setup.closed
  return { dir, workdir, log: await readLog(dir) }
}

describe("a process killed while compacting", () => {
  it("during the model call: the log is unchanged, and a new process compacts and carries on", async () => {
    const { dir, log, workdir } = await setUp()
    const worker = run({ mode: "compact", dir, workdir, sessionId, delayMs: 60_000 })
    await worker.waitForLine((line) => line === "compaction progress summarize")
    worker.child.kill("SIGKILL")
    expect((await worker.closed).signal).toBe("SIGKILL")
    expect(await readLog(dir)).toEqual(log)

    const next = run({ mode: "continue", dir, workdir, sessionId })
    const line = await next.waitForLine((candidate) => candidate.startsWith("result "))
    await next.closed
    expect(JSON.parse(line.slice("result ".length))).toMatchObject({ text: "carried on" })
    const after = await readLog(dir)
    expect(after.slice(0, log.length)).toEqual(log)
    expect(after.slice(log.length).map((stored) => stored.event._tag)).toEqual(["Compaction", "WorkspaceCaptured", "UserMessage", "AssistantMessage"])
  })

  it("at random moments: the log is unchanged or has the whole Compaction event after it", async () => {
    const { dir: original, log, workdir } = await setUp()
    for (const delay of [0, 5, 15, 30, 60, 120]) {
      const dir = makeTempDir("compact-log-copy")
      cpSync(original, dir, { recursive: true })
      const worker = run({ mode: "compact", dir, workdir, sessionId })
      await worker.waitForLine((line) => line === "compacting")
      await new Promise((resolve) => setTimeout(resolve, delay))
      worker.child.kill("SIGKILL")
      await worker.closed
      const after = await readLog(dir)
      expect(after.slice(0, log.length)).toEqual(log)
      const added = after.slice(log.length)
      expect(added.length).toBeLessThanOrEqual(1)
      if (added.length === 1) {
        expect(added[0]!.event).toMatchObject({ _tag: "Compaction", summary: expect.stringContaining("SUMMARY: four files written.") })
      }
      // Either way, the session goes on in a new process.
      const next = run({ mode: "continue", dir, workdir, sessionId })
      await next.waitForLine((candidate) => candidate.startsWith("result "))
      await next.closed
    }
  })
})
