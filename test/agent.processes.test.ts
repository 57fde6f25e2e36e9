/**
 * A process that dies mid-turn (SIGKILL, real files) leaves a log that a new process resumes
 * cleanly: open tool calls are closed with error results and a repair note, the repair is
 * not a checkpoint, the model sees what happened, and restore still works.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { fileCheckpointer, type LiteAgentResult, RuntimeMessage, ToolResult } from "../src/index.js"
import { INTERRUPTED_TOOL_RESULT } from "../src/agent/repairs.js"
import { live, makeTempDir, removeTempDirs, startWorker } from "./support/processes.js"

afterEach(() => {
  for (const child of live) child.kill("SIGKILL")
})
afterAll(removeTempDirs)

const run = (config: Record<string, unknown>) => startWorker("agent-turn.ts", [JSON.stringify(config)])

const resume = async (dir: string, workdir: string, sessionId: string): Promise<LiteAgentResult> => {
  const worker = run({ mode: "resume", dir, workdir, sessionId, prompt: "continue" })
  const line = await worker.waitForLine((candidate) => candidate.startsWith("result "))
  await worker.closed
  return JSON.parse(line.slice("result ".length)) as LiteAgentResult
}

describe("an agent process killed mid-turn", () => {
  it("during a tool call: the next process closes the call, the model is told, restore still works", async () => {
    const dir = makeTempDir("agent-log")
    const workdir = makeTempDir("agent-work")
    const sessionId = "crash-in-tool"
    const worker = run({ mode: "tool", dir, workdir, sessionId, prompt: "write a.txt and run the long command" })
    await worker.waitForLine((line) => line === "tool_start shell")
    // bash has started: its pid file appears; then the agent process dies without warning.
    const pidFile = join(workdir, "bash.pid")
    while (!existsSync(pidFile) || readFileSync(pidFile, "utf8").trim() === "") await new Promise((r) => setTimeout(r, 10))
    worker.child.kill("SIGKILL")
    await worker.closed
    // The command was in its own process group: stop it, as an operator would.
    process.kill(-Number(readFileSync(pidFile, "utf8").trim()), "SIGKILL")

    const checkpointer = fileCheckpointer({ dir })
    try {
      const before = await checkpointer.read(sessionId)
      expect(before.map((stored) => stored.event._tag)).toEqual([
        "SessionMetadata",
        "WorkspaceCaptured",
        "UserMessage",
        "AssistantMessage",
        "FileSnapshot",
        "FileChange",
        "WorkspaceCaptured",
        "ToolResult"
      ])

      const result = await resume(dir, workdir, sessionId)
      expect(result.text).toBe("recovered")
      const after = await checkpointer.read(sessionId)
      const added = after.slice(before.length).map((stored) => stored.event)
      // The killed command's own changes (its pid file) are seen by the next checkpoint's capture:
      // after a crash nobody can say whose they are, so they count as made outside the session.
      expect(added.map((event) => event._tag)).toEqual([
        "ToolResult",
        "RuntimeMessage",
        "WorkspaceCaptured",
        "UserMessage",
        "AssistantMessage"
      ])
      const [closed, note] = added
      expect(closed).toBeInstanceOf(ToolResult)
      expect(closed instanceof ToolResult && [closed.toolName, closed.isError, closed.content]).toEqual([
        "shell",
        true,
        INTERRUPTED_TOOL_RESULT
      ])
      expect(note instanceof RuntimeMessage && note.kind).toBe("repair")

      // Two checkpoints: the crashed prompt and "continue"; the repair is not one.
      const { createLiteAgent } = await import("../src/index.js")
      const { scripted } = await import("../src/provider.js")
      const agent = createLiteAgent({ model: scripted([]), workdir, checkpointer, sessionId })
      try {
        const checkpoints = await agent.listCheckpoints(sessionId)
        expect(checkpoints.map((checkpoint) => checkpoint.prompt)).toEqual(["write a.txt and run the long command", "continue"])
        // The write finished before the crash, so restore can undo it; the pid file the killed command
        // wrote is refused as an outside change unless the caller includes it.
        const refused = await agent.restore(sessionId, checkpoints[0]!.seq, { dryRun: true })
        expect(refused.refusals).toEqual([expect.objectContaining({ path: "bash.pid", reason: "modified_externally" })])
        const restored = await agent.restore(sessionId, checkpoints[0]!.seq, { includeUserEdits: true })
        expect(restored.restoredFiles).toEqual(["a.txt", "bash.pid"])
        expect(restored.commandsNotUndone).toEqual([])
        expect(existsSync(join(workdir, "a.txt"))).toBe(false)
        expect(existsSync(join(workdir, "bash.pid"))).toBe(false)
        // Back to just before the first prompt: the metadata and the capture taken before it.
        expect((await checkpointer.read(sessionId)).at(-1)?.event).toMatchObject({ _tag: "LeafMoved", to: 2, reason: "restore" })
        expect(await agent.listCheckpoints(sessionId)).toEqual([])
      } finally {
        await agent.close()
      }
    } finally {
      await checkpointer.close()
    }
  })

  it("during the model call: the unanswered prompt gets a repair note and the session goes on", async () => {
    const dir = makeTempDir("agent-log")
    const workdir = makeTempDir("agent-work")
    const sessionId = "crash-in-model"
    const worker = run({ mode: "model", dir, workdir, sessionId, prompt: "first question" })
    await worker.waitForLine((line) => line === "calling model")
    worker.child.kill("SIGKILL")
    await worker.closed

    const checkpointer = fileCheckpointer({ dir })
    try {
      expect((await checkpointer.read(sessionId)).map((stored) => stored.event._tag)).toEqual(["SessionMetadata", "WorkspaceCaptured", "UserMessage"])
      const result = await resume(dir, workdir, sessionId)
      expect(result.text).toBe("recovered")
      const events = (await checkpointer.read(sessionId)).map((stored) => stored.event)
      expect(events.map((event) => event._tag)).toEqual([
        "SessionMetadata",
        "WorkspaceCaptured",
        "UserMessage",
        "RuntimeMessage",
        "WorkspaceCaptured",
        "UserMessage",
        "AssistantMessage"
      ])
      expect(events[3] instanceof RuntimeMessage && events[3].kind).toBe("repair")
    } finally {
      await checkpointer.close()
    }
  })
})

describe("an agent process killed during a workspace capture", () => {
  it("leaves a session whose next turn captures consistently: a restore then puts the workspace back exactly", async () => {
    // Killed at three moments of its first capture (the whole tree read, hashed and stored): early, midway, late.
    for (const delayMs of [20, 150, 400]) {
      const dir = makeTempDir("capture-kill-log")
      const workdir = makeTempDir("capture-kill-work")
      for (let i = 0; i < 3000; i++) {
        const sub = join(workdir, "src", `d${Math.floor(i / 100)}`)
        if (i % 100 === 0) mkdirSync(sub, { recursive: true })
        writeFileSync(join(sub, `f${i}.txt`), `file ${i} `.repeat(200))
      }
      const sessionId = `capture-kill-${delayMs}`
      const worker = run({ mode: "capture", dir, workdir, sessionId, prompt: "look" })
      await worker.waitForLine((line) => line === "sending")
      await new Promise((resolve) => setTimeout(resolve, delayMs))
      worker.child.kill("SIGKILL")
      await worker.closed

      const { createLiteAgent } = await import("../src/index.js")
      const { scripted } = await import("../src/provider.js")
      const checkpointer = fileCheckpointer({ dir })
      const command = "sed -i 's/file/FILE/' src/d0/f0.txt && rm -rf src/d1 && mkdir -p gen && echo new > gen/n.txt"
      const agent = createLiteAgent({
        model: scripted([{ toolCalls: [{ name: "shell", input: { command } }] }, { text: "changed" }]),
        workdir,
        checkpointer,
        sessionId
      })
      try {
        const before = readFileSync(join(workdir, "src", "d0", "f0.txt"), "utf8")
        await agent.send("change things")
        const checkpoint = (await agent.listCheckpoints(sessionId)).at(-1)!
        const result = await agent.restore(sessionId, checkpoint.seq)
        expect(result.refusals, `killed after ${delayMs} ms`).toEqual([])
        expect(result.notCovered, `killed after ${delayMs} ms`).toEqual([])
        expect(readFileSync(join(workdir, "src", "d0", "f0.txt"), "utf8")).toBe(before)
        expect(readdirSync(join(workdir, "src", "d1"))).toHaveLength(100)
        expect(existsSync(join(workdir, "gen"))).toBe(false)
      } finally {
        await agent.close()
        await checkpointer.close()
      }
    }
  })
})
