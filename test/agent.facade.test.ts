/**
 * Every method of the promise facade, on each backend, with the scripted model and a real
 * workdir: send, sessionId, resume, clear, listSessions, deleteSession, listCheckpoints,
 * restore, subscribe, run, query, close — and `compact` absent until it is real.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import {
  type AgentEvent,
  AgentClosedError,
  ConfigurationError,
  createLiteAgent,
  InvalidSessionIdError,
  type PromiseCheckpointer,
  query,
  RestoreRefusedError,
  SessionsDisabledError
} from "../src/index.js"
import { scripted } from "../src/provider.js"
import { BACKENDS } from "./support/agentSim.js"
import { promiseCheckpointer, promptLines, tempDir } from "./support/agent.js"

const opened: Array<{ close(): Promise<void> }> = []
afterEach(async () => {
  for (const thing of opened.splice(0)) await thing.close()
})
const track = <T extends { close(): Promise<void> }>(thing: T): T => {
  opened.push(thing)
  return thing
}

const write = (path: string, content: string) => ({ name: "write_file", input: { path, content } })
const edit = (path: string, old_string: string, new_string: string) => ({ name: "edit_file", input: { path, old_string, new_string } })

describe.each(BACKENDS)("createLiteAgent on the %s backend", (backend) => {
  const setup = (turns: Parameters<typeof scripted>[0]) => {
    const workdir = tempDir("agent-work")
    const checkpointer = track(promiseCheckpointer(backend))
    const model = scripted(turns)
    const agent = track(createLiteAgent({ model, workdir, checkpointer }))
    return { workdir, checkpointer, model, agent }
  }

  it("send runs the tool loop and persists every event it announces", async () => {
    const { agent, checkpointer, model, workdir } = setup([
      { text: "Writing.", toolCalls: [write("notes.md", "# Notes\n"), { name: "shell", input: { command: "cat notes.md" } }] },
      { text: "Created notes.md." }
    ])
    const seen: Array<AgentEvent> = []
    const unsubscribe = agent.subscribe((event) => seen.push(event))
    const result = await agent.send("Create notes.md")
    unsubscribe()

    expect(result.sessionId).toBe(agent.sessionId)
    expect(result.text).toBe("Created notes.md.")
    expect(result.steps).toBe(2)
    expect(result.stopReason).toBe("stop")
    expect(result.toolCalls.map((call) => [call.name, call.isError, call.output])).toEqual([
      ["write_file", false, "wrote notes.md (8 bytes)"],
      ["shell", false, "# Notes\n[exit code 0]"]
    ])
    expect(result.usage.inputTokens).toBeGreaterThan(0)
    expect(result.usage.outputTokens).toBeGreaterThan(0)
    expect(readFileSync(join(workdir, "notes.md"), "utf8")).toBe("# Notes\n")

    const stored = await checkpointer.read(result.sessionId)
    expect(result.head).toBe(stored.length)
    expect(stored.map((event) => event.event._tag)).toEqual([
      "SessionMetadata",
      // The checkpoint's workspace capture, right before the prompt (the session's first: the whole workdir).
      "WorkspaceCaptured",
      "UserMessage",
      "AssistantMessage",
      "FileSnapshot",
      "FileChange",
      // What write_file left, captured with its bytes; `cat` changed nothing, so nothing is captured after it.
      "WorkspaceCaptured",
      "ToolResult",
      "ToolResult",
      "AssistantMessage"
    ])
    // Every persisted event was announced once, in order, with its stored seq.
    const announced = seen.flatMap((event) => (event.type === "session_event" ? [event.seq] : []))
    expect(announced).toEqual(stored.map((event) => event.seq))
    expect(seen.filter((event) => event.type === "tool_start").length).toBe(2)
    expect(seen.filter((event) => event.type === "tool_end").length).toBe(2)
    expect(seen.at(-1)).toEqual({ type: "result", result })
    // The second model call saw the first one's tool results.
    expect(promptLines(model.calls()[1]!.prompt)).toEqual([
      "user: Create notes.md",
      "assistant: Writing.",
      `assistant calls write_file({"path":"notes.md","content":"# Notes\\n"})`,
      `assistant calls shell({"command":"cat notes.md"})`,
      "tool(write_file): wrote notes.md (8 bytes)",
      "tool(shell): # Notes\n[exit code 0]"
    ])
  })

  it("keeps context across sends, lists checkpoints, restores files and conversation", async () => {
    const { agent, checkpointer, model, workdir } = setup([
      { toolCalls: [write("app.ts", "v1\n")] },
      { text: "v1 written" },
      { toolCalls: [edit("app.ts", "v1", "v2"), write("extra.ts", "x\n")] },
      { text: "v2" },
      { toolCalls: [{ name: "delete_file", input: { path: "app.ts" } }] },
      { text: "deleted" },
      { text: "after restore" }
    ])
    await agent.send("one")
    await agent.send("two")
    await agent.send("three")
    expect(existsSync(join(workdir, "app.ts"))).toBe(false)
    // The third call saw the first two turns.
    expect(promptLines(model.calls()[4]!.prompt).filter((line) => line.startsWith("user:"))).toEqual([
      "user: one",
      "user: two",
      "user: three"
    ])

    const checkpoints = await agent.listCheckpoints(agent.sessionId)
    expect(checkpoints.map((checkpoint) => [checkpoint.prompt, checkpoint.files])).toEqual([
      ["one", ["app.ts", "extra.ts"]],
      ["two", ["app.ts", "extra.ts"]],
      ["three", ["app.ts"]]
    ])
    const sessionId = agent.sessionId
    const other = agent.clear()
    expect(other).not.toBe(sessionId)

    const progress: Array<string> = []
    agent.subscribe((event) => {
      if (event.type === "checkpoint_restore") progress.push(event.phase)
    })
    const result = await agent.restore(sessionId, checkpoints[1]!.seq)
    expect(result.restoredFiles.slice().sort()).toEqual(["app.ts", "extra.ts"])
    expect(result.conversationRestored).toBe(true)
    expect(progress[0]).toBe("start")
    expect(progress.at(-1)).toBe("done")
    // restore makes the restored session current
    expect(agent.sessionId).toBe(sessionId)
    expect(readFileSync(join(workdir, "app.ts"), "utf8")).toBe("v1\n")
    expect(existsSync(join(workdir, "extra.ts"))).toBe(false)
    expect((await checkpointer.read(sessionId)).at(-1)?.event).toMatchObject({ _tag: "LeafMoved", to: checkpoints[1]!.seq - 1 })
    expect((await agent.listCheckpoints(sessionId)).map((checkpoint) => checkpoint.prompt)).toEqual(["one"])

    const next = await agent.send("again")
    expect(next.text).toBe("after restore")
    expect(promptLines(model.calls()[6]!.prompt).filter((line) => line.startsWith("user:"))).toEqual([
      "user: one",
      "user: again"
    ])
  })

  it("restore refuses when a file was edited outside the agent, and changes nothing", async () => {
    const { agent, workdir } = setup([{ toolCalls: [write("a.txt", "agent\n")] }, { text: "ok" }])
    await agent.send("write a")
    writeFileSync(join(workdir, "a.txt"), "someone else\n")
    const [checkpoint] = await agent.listCheckpoints(agent.sessionId)
    const error = await agent.restore(agent.sessionId, checkpoint!.seq).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(RestoreRefusedError)
    expect((error as RestoreRefusedError).refusals.map((refusal) => refusal.reason)).toEqual(["modified_externally"])
    expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe("someone else\n")
    expect((await agent.listCheckpoints(agent.sessionId)).length).toBe(1)
  })

  it("resume, clear, listSessions and deleteSession manage sessions", async () => {
    const { agent, checkpointer } = setup([{ text: "first" }, { text: "second" }, { text: "third" }])
    const first = agent.sessionId
    await agent.send("hello")
    const second = agent.clear()
    expect(agent.sessionId).toBe(second)
    await new Promise((resolve) => setTimeout(resolve, 20))
    await agent.send("hello again")
    const sessions = await agent.listSessions()
    expect(sessions.map((session) => session.id)).toEqual([second, first])

    agent.resume(first)
    expect(agent.sessionId).toBe(first)
    // The old transcript was kept by clear: resuming continues it.
    const result = await agent.send("back")
    expect(result.sessionId).toBe(first)
    expect((await checkpointer.read(first)).filter((event) => event.event._tag === "UserMessage").length).toBe(2)

    agent.resume("never-seen-before")
    expect(await agent.listCheckpoints("never-seen-before")).toEqual([])
    expect(() => agent.resume("../escape")).toThrow(InvalidSessionIdError)
    expect(agent.sessionId).toBe("never-seen-before")

    await agent.deleteSession(second)
    expect((await agent.listSessions()).map((session) => session.id)).toEqual([first])
    expect(await checkpointer.head(second)).toBe(0)
  })

  it("run yields the turn's events; query does the same one-shot with the checkpointer given", async () => {
    const { agent } = setup([{ toolCalls: [write("r.txt", "r")] }, { text: "ran" }])
    const types: Array<string> = []
    for await (const event of agent.run("go")) types.push(event.type === "session_event" ? event.event._tag : event.type)
    expect(types).toEqual([
      "SessionMetadata",
      "WorkspaceCaptured",
      "UserMessage",
      "AssistantMessage",
      "tool_start",
      "FileSnapshot",
      "FileChange",
      "WorkspaceCaptured",
      "ToolResult",
      "tool_end",
      "text_delta",
      "AssistantMessage",
      "result"
    ])

    const checkpointer: PromiseCheckpointer = track(promiseCheckpointer(backend))
    const workdir = tempDir("query-work")
    const events: Array<AgentEvent> = []
    for await (
      const event of query({
        prompt: "make q.txt",
        options: { model: scripted([{ toolCalls: [write("q.txt", "q")] }, { text: "made" }]), workdir, checkpointer, sessionId: "q1" }
      })
    ) events.push(event)
    const last = events.at(-1)
    expect(last?.type === "result" && last.result.text).toBe("made")
    expect(readFileSync(join(workdir, "q.txt"), "utf8")).toBe("q")
    // query closed its agent but not the caller's checkpointer: the session is there (its two captures included).
    expect((await checkpointer.read("q1")).length).toBe(9)
  })
})

describe("createLiteAgent options", () => {
  it("sessions: false persists nothing and refuses the session methods", async () => {
    const home = tempDir("home")
    const previous = process.env.LITE_AGENT_HOME
    process.env.LITE_AGENT_HOME = home
    try {
      const workdir = tempDir("ephemeral")
      const model = scripted([{ text: "one" }, { text: "two" }])
      const agent = track(createLiteAgent({ model, workdir, sessions: false }))
      expect((await agent.send("remember 42")).text).toBe("one")
      expect((await agent.send("what was it?")).text).toBe("two")
      // The conversation lives in memory for this agent's lifetime.
      expect(promptLines(model.calls()[1]!.prompt)).toContain("user: remember 42")
      for (const call of [() => agent.listSessions(), () => agent.deleteSession("x"), () => agent.listCheckpoints("x"), () => agent.restore("x", 1)]) {
        await expect(call()).rejects.toBeInstanceOf(SessionsDisabledError)
      }
      expect(() => agent.resume("x")).toThrow(SessionsDisabledError)
      expect(() => agent.clear()).toThrow(SessionsDisabledError)
      expect(existsSync(join(home, "sessions"))).toBe(false)
    } finally {
      if (previous === undefined) delete process.env.LITE_AGENT_HOME
      else process.env.LITE_AGENT_HOME = previous
    }
  })

  it("uses the default file checkpointer under LITE_AGENT_HOME when none is given", async () => {
    const home = tempDir("home")
    const previous = process.env.LITE_AGENT_HOME
    process.env.LITE_AGENT_HOME = home
    try {
      const agent = track(createLiteAgent({ model: scripted([{ text: "hi" }]), workdir: tempDir("w"), sessionId: "default-one" }))
      await agent.send("hello")
      expect(existsSync(join(home, "sessions"))).toBe(true)
      expect((await agent.listSessions()).map((session) => session.id)).toEqual(["default-one"])
    } finally {
      if (previous === undefined) delete process.env.LITE_AGENT_HOME
      else process.env.LITE_AGENT_HOME = previous
    }
  })

  it("rejects bad options with ConfigurationError and a closed agent with AgentClosedError", async () => {
    const model = scripted([])
    expect(() => createLiteAgent({ model, sessions: false, checkpointer: promiseCheckpointer("memory") })).toThrow(ConfigurationError)
    expect(() => createLiteAgent({ model, maxSteps: 0 })).toThrow(ConfigurationError)
    expect(() => createLiteAgent({ model, bashTimeoutMs: -1 })).toThrow(ConfigurationError)
    // The same checks the layers run when built (test/options.test.ts), here at once.
    expect(() => createLiteAgent({ model, systemPrompt: 42 as unknown as string })).toThrow(ConfigurationError)
    expect(() => createLiteAgent({ model, snapshotMaxBytes: -1 })).toThrow(ConfigurationError)
    expect(() => createLiteAgent({ model, workdir: "" })).toThrow(ConfigurationError)
    expect(() => createLiteAgent({ model, sessionId: "a/b" })).toThrow(InvalidSessionIdError)
    const agent = createLiteAgent({ model, sessions: false, workdir: tempDir("closed") })
    await agent.close()
    await expect(agent.send("hi")).rejects.toBeInstanceOf(AgentClosedError)
  })
})
