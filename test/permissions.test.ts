/**
 * Permissions: every mode, the allowed/disallowed lists, `canUseTool` answering with a value, a
 * promise or an Effect, remembered decisions (across a restart), a denial that stops the turn,
 * a callback that throws or answers nonsense, bad options — and in each case what the log
 * records (`PermissionDecided` before the result), what the model is told, and what ran.
 */
import { existsSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import {
  type AgentEvent,
  type CanUseTool,
  ConfigurationError,
  createLiteAgent,
  type LiteAgentOptions,
  memoryCheckpointer,
  type PermissionDecided,
  type PromiseCheckpointer,
  ToolResult
} from "../src/index.js"
import { scripted, type ScriptedTurn } from "../src/provider.js"
import { tempDir } from "./support/agent.js"

const opened: Array<{ close(): Promise<void> }> = []
afterEach(async () => {
  for (const thing of opened.splice(0).reverse()) await thing.close()
})

const shell = (command: string) => ({ name: "shell", input: { command } })
const write = (path: string, content: string) => ({ name: "write_file", input: { path, content } })
const read = (path: string) => ({ name: "read_file", input: { path } })

/** A turn that writes a file, runs a command that leaves a marker, reads the file — then says done. */
const threeCalls: ReadonlyArray<ScriptedTurn> = [
  { toolCalls: [write("notes.txt", "hello\n"), shell("echo ran > marker"), read("notes.txt")] },
  { text: "done" }
]

const setup = (options: Partial<LiteAgentOptions>, turns: ReadonlyArray<ScriptedTurn> = threeCalls, store?: PromiseCheckpointer) => {
  const workdir = options.workdir ?? tempDir("permissions")
  const checkpointer = store ?? memoryCheckpointer()
  const model = scripted(turns)
  const agent = createLiteAgent({ model, workdir, checkpointer, ...options })
  opened.push(agent)
  if (store === undefined) opened.push(checkpointer)
  return { agent, checkpointer, model, workdir }
}

const decisions = async (checkpointer: PromiseCheckpointer, sessionId: string) =>
  (await checkpointer.read(sessionId)).map((stored) => stored.event).filter((event): event is PermissionDecided =>
    event._tag === "PermissionDecided"
  ).map(({ behavior, decidedBy, mode, toolName, ...rest }) => ({ toolName, behavior, decidedBy, mode, ...rest }))

const results = async (checkpointer: PromiseCheckpointer, sessionId: string) =>
  (await checkpointer.read(sessionId)).map((stored) => stored.event).filter((event): event is ToolResult => event._tag === "ToolResult")
    .map((result) => ({ tool: result.toolName, isError: result.isError, content: result.content }))

describe("permission modes", () => {
  it("no canUseTool and no mode: bypassPermissions — everything runs, nothing is asked or logged", async () => {
    const { agent, checkpointer, workdir } = setup({})
    const result = await agent.send("go")
    expect(result.toolCalls.map((call) => call.isError)).toEqual([false, false, false])
    expect(existsSync(join(workdir, "marker"))).toBe(true)
    expect(await decisions(checkpointer, agent.sessionId)).toEqual([])
  })

  it("default without canUseTool: writes and shell are refused (nothing runs), reads run; the model is told why", async () => {
    const { agent, checkpointer, workdir } = setup({ permissionMode: "default" })
    const result = await agent.send("go")
    expect(existsSync(join(workdir, "notes.txt"))).toBe(false)
    expect(existsSync(join(workdir, "marker"))).toBe(false)
    expect(result.toolCalls.map((call) => [call.name, call.isError])).toEqual([["write_file", true], ["shell", true], ["read_file", true]])
    expect(result.toolCalls[0]!.output).toBe(
      `permission denied: "write_file" needs permission in default mode and there is no canUseTool to ask; the tool did not run`
    )
    // The read ran (and failed: the file was never written): no decision for it.
    expect(result.toolCalls[2]!.output).toMatch(/notes\.txt/)
    expect(await decisions(checkpointer, agent.sessionId)).toEqual([
      expect.objectContaining({ toolName: "write_file", behavior: "deny", decidedBy: "mode", mode: "default" }),
      expect.objectContaining({ toolName: "shell", behavior: "deny", decidedBy: "mode", mode: "default" })
    ])
    expect(result.text).toBe("done")
  })

  it("default with canUseTool: asked for writes and shell (not reads) with the call's input and context; its answers decide", async () => {
    const asked: Array<{ name: string; input: unknown; mode: string; toolUseId: string; aborted: boolean }> = []
    const canUseTool: CanUseTool = (name, input, context) => {
      asked.push({ name, input, mode: context.mode, toolUseId: context.toolUseId, aborted: context.signal.aborted })
      return name === "shell" ? { behavior: "deny", message: "no commands today" } : { behavior: "allow" }
    }
    const { agent, checkpointer, workdir } = setup({ canUseTool })
    const events: Array<AgentEvent> = []
    for await (const event of agent.run("go")) events.push(event)
    expect(asked.map(({ name, input, mode, aborted }) => ({ name, input, mode, aborted }))).toEqual([
      { name: "write_file", input: { path: "notes.txt", content: "hello\n" }, mode: "default", aborted: false },
      { name: "shell", input: { command: "echo ran > marker" }, mode: "default", aborted: false }
    ])
    expect(existsSync(join(workdir, "notes.txt"))).toBe(true)
    expect(existsSync(join(workdir, "marker"))).toBe(false)
    expect(await results(checkpointer, agent.sessionId)).toEqual([
      { tool: "write_file", isError: false, content: "wrote notes.txt (6 bytes)" },
      { tool: "shell", isError: true, content: "permission denied: no commands today; the tool did not run" },
      { tool: "read_file", isError: false, content: "hello\n" }
    ])
    expect(await decisions(checkpointer, agent.sessionId)).toEqual([
      expect.objectContaining({ toolName: "write_file", behavior: "allow", decidedBy: "callback", mode: "default" }),
      expect.objectContaining({ toolName: "shell", behavior: "deny", decidedBy: "callback", message: "no commands today" })
    ])
    // Each question is announced before it is asked, and the decision lands before the call's result.
    const kinds = events.flatMap((event) =>
      event.type === "permission_request"
        ? [`ask ${event.name}`]
        : event.type === "session_event" && (event.event._tag === "PermissionDecided" || event.event._tag === "ToolResult")
        ? [`${event.event._tag} ${event.event.toolName}`]
        : []
    )
    expect(kinds).toEqual([
      "ask write_file",
      "PermissionDecided write_file",
      "ToolResult write_file",
      "ask shell",
      "PermissionDecided shell",
      "ToolResult shell",
      "ToolResult read_file"
    ])
    expect(asked.map((question) => question.toolUseId)).toEqual(
      events.flatMap((event) => event.type === "permission_request" ? [event.toolUseId] : [])
    )
  })

  it("acceptEdits: the file tools run without asking; shell is asked about", async () => {
    const asked: Array<string> = []
    const { agent, checkpointer, workdir } = setup({
      permissionMode: "acceptEdits",
      canUseTool: async (name) => {
        asked.push(name)
        return { behavior: "allow" }
      }
    })
    await agent.send("go")
    expect(asked).toEqual(["shell"])
    expect(existsSync(join(workdir, "notes.txt"))).toBe(true)
    expect(existsSync(join(workdir, "marker"))).toBe(true)
    expect(await decisions(checkpointer, agent.sessionId)).toEqual([
      expect.objectContaining({ toolName: "write_file", behavior: "allow", decidedBy: "mode", mode: "acceptEdits" }),
      expect.objectContaining({ toolName: "shell", behavior: "allow", decidedBy: "callback", mode: "acceptEdits" })
    ])
  })

  it("bypassPermissions with a canUseTool: it is never asked; nothing is logged", async () => {
    const asked: Array<string> = []
    const { agent, checkpointer, workdir } = setup({
      permissionMode: "bypassPermissions",
      canUseTool: (name) => {
        asked.push(name)
        return { behavior: "deny" }
      }
    })
    await agent.send("go")
    expect(asked).toEqual([])
    expect(existsSync(join(workdir, "marker"))).toBe(true)
    expect(await decisions(checkpointer, agent.sessionId)).toEqual([])
  })

  it("plan: read-only tools only, even when canUseTool would allow; the model is told to describe the change", async () => {
    const asked: Array<string> = []
    const workdir = tempDir("permissions-plan")
    const { agent, checkpointer } = setup({
      workdir,
      permissionMode: "plan",
      allowedTools: ["shell"],
      canUseTool: (name) => {
        asked.push(name)
        return { behavior: "allow" }
      }
    }, [{ toolCalls: [write("notes.txt", "x"), shell("echo ran > marker"), { name: "list_files", input: {} }] }, { text: "planned" }])
    const result = await agent.send("plan it")
    expect(asked).toEqual([])
    expect(existsSync(join(workdir, "notes.txt"))).toBe(false)
    expect(existsSync(join(workdir, "marker"))).toBe(false)
    expect(result.toolCalls.map((call) => call.isError)).toEqual([true, true, false])
    expect(result.toolCalls[0]!.output).toContain("plan mode: only read_file and list_files run")
    expect((await decisions(checkpointer, agent.sessionId)).map((decision) => [decision.toolName, decision.behavior, decision.decidedBy]))
      .toEqual([["write_file", "deny", "mode"], ["shell", "deny", "mode"]])
  })
})

describe("rules and answers", () => {
  it("allowedTools runs a tool without asking; disallowedTools refuses one in any mode, reads included", async () => {
    const asked: Array<string> = []
    const { agent, checkpointer, workdir } = setup({
      allowedTools: ["shell"],
      disallowedTools: ["read_file"],
      canUseTool: (name) => {
        asked.push(name)
        return { behavior: "allow" }
      }
    })
    const result = await agent.send("go")
    expect(asked).toEqual(["write_file"])
    expect(existsSync(join(workdir, "marker"))).toBe(true)
    expect(result.toolCalls[2]!.output).toBe(`permission denied: the tool "read_file" is disallowed in this session; the tool did not run`)
    expect((await decisions(checkpointer, agent.sessionId)).map((decision) => [decision.toolName, decision.behavior, decision.decidedBy]))
      .toEqual([["write_file", "allow", "callback"], ["shell", "allow", "rule"], ["read_file", "deny", "rule"]])

    const bypass = setup({ permissionMode: "bypassPermissions", disallowedTools: ["shell"] })
    await bypass.agent.send("go")
    expect(existsSync(join(bypass.workdir, "marker"))).toBe(false)
    expect(existsSync(join(bypass.workdir, "notes.txt"))).toBe(true)
  })

  it("rules by pattern: shell(git status*) allows that command alone (one joined to another is asked), write_file(src/**) a path; shell(rm *) denies within a line", async () => {
    const asked: Array<string> = []
    const calls: ReadonlyArray<ScriptedTurn> = [
      {
        toolCalls: [
          shell("git status --short > status.txt"),
          shell("git status && echo joined > joined.txt"),
          write("src/deep/a.ts", "a\n"),
          write("notes.md", "n\n"),
          shell("make -n || rm -rf nothing-here")
        ]
      },
      { text: "done" }
    ]
    const { agent, checkpointer, workdir } = setup({
      allowedTools: ["shell(git status*)", "write_file(src/**)"],
      disallowedTools: ["shell(rm *)"],
      canUseTool: (name, input) => {
        asked.push(`${name} ${JSON.stringify(input)}`)
        return { behavior: "deny", message: "not now" }
      }
    }, calls)
    const result = await agent.send("go")
    // The redirection makes "git status --short > status.txt" a command the rule does not cover: asked.
    expect(asked).toEqual([
      `shell {"command":"git status --short > status.txt"}`,
      `shell {"command":"git status && echo joined > joined.txt"}`,
      `write_file {"path":"notes.md","content":"n\\n"}`
    ])
    expect(existsSync(join(workdir, "src/deep/a.ts"))).toBe(true)
    expect(existsSync(join(workdir, "joined.txt"))).toBe(false)
    expect(result.toolCalls[4]!.output).toBe("permission denied: shell(rm *) is disallowed in this session; the tool did not run")
    expect((await decisions(checkpointer, agent.sessionId)).map((decision) => [decision.toolName, decision.behavior, decision.decidedBy]))
      .toEqual([["shell", "deny", "callback"], ["shell", "deny", "callback"], ["write_file", "allow", "rule"], ["write_file", "deny", "callback"], ["shell", "deny", "rule"]])
    // A plain command the rule names runs without a question.
    const plain = setup({ allowedTools: ["shell(echo *)"], canUseTool: (name) => {
      asked.push(`second ${name}`)
      return { behavior: "deny" }
    } }, [{ toolCalls: [shell("echo plain")] }, { text: "ok" }])
    expect((await plain.agent.send("go")).toolCalls[0]!.output).toContain("plain")
    expect(asked.filter((entry) => entry.startsWith("second"))).toEqual([])
  })

  it("an \"always\" for one of the file tools that write covers them all; shell is still asked", async () => {
    const asked: Array<string> = []
    const calls: ReadonlyArray<ScriptedTurn> = [
      { toolCalls: [write("a.txt", "a\n"), { name: "edit_file", input: { path: "a.txt", old_string: "a", new_string: "b" } }, { name: "delete_file", input: { path: "a.txt" } }, shell("echo hi")] },
      { text: "done" }
    ]
    const { agent, checkpointer } = setup({
      canUseTool: (name) => {
        asked.push(name)
        return { behavior: "allow", remember: name === "write_file" }
      }
    }, calls)
    await agent.send("go")
    expect(asked).toEqual(["write_file", "shell"])
    expect((await decisions(checkpointer, agent.sessionId)).map((decision) => [decision.toolName, decision.decidedBy]))
      .toEqual([["write_file", "callback"], ["edit_file", "remembered"], ["delete_file", "remembered"], ["shell", "callback"]])
  })

  it("allow-and-remember (answered as an Effect): the tool is not asked about again — also by another agent resuming the session", async () => {
    const asked: Array<string> = []
    const canUseTool: CanUseTool = (name) => {
      asked.push(name)
      return Effect.succeed({ behavior: "allow", remember: name === "shell" })
    }
    const checkpointer = memoryCheckpointer()
    opened.push(checkpointer)
    const twoCommands: ReadonlyArray<ScriptedTurn> = [{ toolCalls: [shell("echo 1 >> marker"), shell("echo 2 >> marker")] }, { text: "ok" }]
    const first = setup({ canUseTool }, twoCommands, checkpointer)
    await first.agent.send("twice")
    expect(asked).toEqual(["shell"])
    const second = setup({ canUseTool, sessionId: first.agent.sessionId, workdir: first.workdir }, twoCommands, checkpointer)
    await second.agent.send("twice more")
    expect(asked).toEqual(["shell"])
    expect((await decisions(checkpointer, first.agent.sessionId)).map((decision) => [decision.decidedBy, decision.remember]))
      .toEqual([["callback", true], ["remembered", undefined], ["remembered", undefined], ["remembered", undefined]])
  })

  it("a denial with interrupt stops the turn: the calls after it do not run and no model call follows", async () => {
    const { agent, checkpointer, model, workdir } = setup({
      canUseTool: () => Promise.resolve({ behavior: "deny", message: "stop right there", interrupt: true })
    }, [{ toolCalls: [shell("echo 1 > marker"), write("notes.txt", "x")] }, { text: "never said" }])
    const result = await agent.send("go")
    expect(result.stopReason).toBe("permission_denied")
    expect(result.steps).toBe(1)
    expect(model.remaining()).toBe(1)
    expect(existsSync(join(workdir, "marker"))).toBe(false)
    expect(existsSync(join(workdir, "notes.txt"))).toBe(false)
    expect(await results(checkpointer, agent.sessionId)).toEqual([
      { tool: "shell", isError: true, content: "permission denied: stop right there; the tool did not run" },
      { tool: "write_file", isError: true, content: "not run: the turn was stopped when an earlier tool call was denied" }
    ])
    expect(await decisions(checkpointer, agent.sessionId)).toEqual([
      expect.objectContaining({ toolName: "shell", behavior: "deny", decidedBy: "callback", interrupt: true })
    ])
    // The session goes on: the next turn's prompt holds a result for every call.
    const next = setup({ sessionId: agent.sessionId, workdir }, [{ text: "fine" }], checkpointer)
    expect((await next.agent.send("carry on")).text).toBe("fine")
  })

  it("a canUseTool that throws, rejects or answers nonsense denies, saying so; nothing runs", async () => {
    const answers: ReadonlyArray<CanUseTool> = [
      () => {
        throw new Error("callback broke")
      },
      () => Promise.reject(new Error("callback rejected")),
      () => ({ behavior: "maybe" } as unknown as ReturnType<CanUseTool>)
    ]
    const expected = ["canUseTool failed: callback broke", "canUseTool failed: callback rejected", "canUseTool answered something that is not a decision"]
    for (const [index, canUseTool] of answers.entries()) {
      const { agent, workdir } = setup({ canUseTool }, [{ toolCalls: [shell("echo ran > marker")] }, { text: "ok" }])
      const result = await agent.send("go")
      expect(result.toolCalls[0]!.output).toContain(expected[index])
      expect(existsSync(join(workdir, "marker"))).toBe(false)
    }
  })

  it("a question pending when the agent closes is aborted (its signal fires) and the command never runs", async () => {
    let signal: AbortSignal | undefined
    let asked!: () => void
    const questionAsked = new Promise<void>((resolve) => asked = resolve)
    const { agent, workdir } = setup({
      canUseTool: (_name, _input, context) => {
        signal = context.signal
        asked()
        return new Promise(() => {})
      }
    }, [{ toolCalls: [shell("echo ran > marker")] }, { text: "ok" }])
    const turn = agent.send("go").catch((error: unknown) => error)
    await questionAsked
    expect(signal?.aborted).toBe(false)
    await agent.close()
    expect(await turn).toMatchObject({ _tag: "AgentClosedError" })
    expect(signal?.aborted).toBe(true)
    expect(existsSync(join(workdir, "marker"))).toBe(false)
  })

  it("bad permission options are a ConfigurationError naming the option", () => {
    const workdir = tempDir("permissions-options")
    const model = scripted([])
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ permissionMode: "yolo" }, "permissionMode", `one of "default", "acceptEdits", "bypassPermissions", "plan"`],
      [{ allowedTools: ["bash"] }, "allowedTools", `no tool "bash"; the tools are read_file`],
      [{ allowedTools: ["shell()"] }, "allowedTools", "the pattern in parentheses is empty"],
      [{ allowedTools: ["shell(git"] }, "allowedTools", "is not a rule"],
      [{ disallowedTools: "shell" }, "disallowedTools", "an array of tool rules"],
      [{ canUseTool: true }, "canUseTool", "a function"]
    ]
    for (const [options, option, detail] of cases) {
      let error: unknown
      try {
        createLiteAgent({ model, workdir, checkpointer: memoryCheckpointer(), ...options } as LiteAgentOptions)
      } catch (caught) {
        error = caught
      }
      expect(error, option).toBeInstanceOf(ConfigurationError)
      expect(error, option).toMatchObject({ option: expect.stringContaining(option) })
      expect((error as ConfigurationError).detail, option).toContain(detail)
    }
  })

  it("what the user changed while a question waited is theirs: a restore refuses to undo it, and undoes the tool's write", async () => {
    const workdir = tempDir("permissions-user-edit")
    writeFileSync(join(workdir, "mine.txt"), "before\n")
    const { agent } = setup({
      workdir,
      canUseTool: (name) => {
        // The user edits a file while the question is on the screen, then allows the write.
        if (name === "write_file") writeFileSync(join(workdir, "mine.txt"), "edited while asked\n")
        return { behavior: "allow" }
      }
    }, [{ toolCalls: [write("notes.txt", "hello\n")] }, { text: "wrote it" }])
    await agent.send("write notes")
    const [checkpoint] = await agent.listCheckpoints(agent.sessionId)
    const plan = await agent.restore(agent.sessionId, checkpoint!.seq, { dryRun: true })
    expect(plan.refusals).toEqual([expect.objectContaining({ path: "mine.txt", reason: "modified_externally" })])
    expect(plan.plan.filter((file) => file.refusal === undefined).map((file) => [file.path, file.action])).toEqual([["notes.txt", "delete"]])
  })
})
