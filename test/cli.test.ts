/**
 * The `lite-agent` command in real processes: print mode in its three output formats with a
 * scripted model, sessions continued by id or as the most recent, the file, SQLite and
 * PostgreSQL backends, a failing turn (exit 1, the error on stderr) and command lines that cannot run
 * (exit 2, a message that says why).
 */
import { execFile } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { type AddressInfo, createServer } from "node:net"
import { join, resolve } from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { postgresCheckpointer } from "../src/checkpoint-postgres.js"
import { fileCheckpointer, type LiteAgentResult } from "../src/index.js"
import { tempDir } from "./support/agent.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"
import { nodeArgs } from "./support/processes.js"

const root = resolve(import.meta.dirname, "..")
const main = join(root, "src", "cli", "main.ts")

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/**
 * `lite-agent <args>` with no terminal. Print mode without a terminal needs a permission mode:
 * these runs are unattended, so `--permission-mode bypassPermissions` is added when `-p` is
 * given without one (`asGiven` runs the arguments exactly as they are).
 */
const cli = async (given: ReadonlyArray<string>, env: NodeJS.ProcessEnv = {}, stdin = "", asGiven = false): Promise<Run> => {
  const args = !asGiven && given.includes("-p") && !given.includes("--permission-mode")
    ? [...given, "--permission-mode", "bypassPermissions"]
    : given
  const environment: NodeJS.ProcessEnv = { ...process.env, LITE_AGENT_HOME: tempDir("cli-home"), ...env }
  delete environment.ANTHROPIC_API_KEY
  if (env.ANTHROPIC_API_KEY !== undefined) environment.ANTHROPIC_API_KEY = env.ANTHROPIC_API_KEY
  const running = promisify(execFile)(process.execPath, [...nodeArgs(main), ...args], { cwd: root, env: environment, timeout: 120_000 })
  running.child.stdin?.end(stdin)
  return running.then(
    ({ stderr, stdout }) => ({ code: 0, stdout, stderr }),
    (error: { code?: number; stdout?: string; stderr?: string }) => ({ code: error.code ?? -1, stdout: error.stdout ?? "", stderr: error.stderr ?? "" })
  )
}

const turnsFile = (turns: unknown) => {
  const file = join(tempDir("cli-turns"), "turns.json")
  writeFileSync(file, JSON.stringify(turns))
  return file
}

const WRITE_HELLO = [{ toolCalls: [{ name: "write_file", input: { path: "hello.txt", content: "hi\n" } }] }, { text: "Wrote hello.txt." }]

describe("lite-agent -p (print mode)", () => {
  it("text: prints the answer; the tools ran in --workdir and the session is in --checkpointer", async () => {
    const workdir = tempDir("cli-work")
    const sessions = tempDir("cli-sessions")
    const run = await cli(["-p", "write hello", "--model", `scripted:${turnsFile(WRITE_HELLO)}`, "--checkpointer", `file:${sessions}`, "--workdir", workdir])
    expect(run).toMatchObject({ code: 0, stdout: "Wrote hello.txt.\n", stderr: "" })
    expect(readFileSync(join(workdir, "hello.txt"), "utf8")).toBe("hi\n")
    const checkpointer = fileCheckpointer({ dir: sessions })
    try {
      const [session] = await checkpointer.list()
      const log = await checkpointer.read(session!.id)
      expect(log.map((stored) => stored.event._tag)).toContain("FileChange")
    } finally {
      await checkpointer.close()
    }
  })

  it("json: the whole result; --session continues that session and --continue the most recent one", async () => {
    const workdir = tempDir("cli-work")
    const db = join(tempDir("cli-db"), "sessions.db")
    const common = ["--checkpointer", `sqlite:${db}`, "--workdir", workdir, "--output-format", "json"]
    const first = await cli(["-p", "write hello", "--model", `scripted:${turnsFile(WRITE_HELLO)}`, ...common])
    expect(first.code).toBe(0)
    const result = JSON.parse(first.stdout) as LiteAgentResult
    expect(result).toMatchObject({ text: "Wrote hello.txt.", steps: 2, toolCalls: [{ name: "write_file", isError: false }] })

    const second = await cli(["-p", "again", "--session", result.sessionId, "--model", `scripted:${turnsFile([{ text: "second" }])}`, ...common])
    // The checkpoint's workspace capture, the prompt, the answer.
    expect(JSON.parse(second.stdout)).toMatchObject({ sessionId: result.sessionId, text: "second", head: result.head + 3 })
    // With --capture tools, no capture: the prompt and the answer.
    const third = await cli(["-p", "and again", "--continue", "--capture", "tools", "--model", `scripted:${turnsFile([{ text: "third" }])}`, ...common])
    expect(JSON.parse(third.stdout)).toMatchObject({ sessionId: result.sessionId, text: "third", head: result.head + 5 })
  })

  it("--session and --resume name a session that exists: an unknown id is refused with the closest, and nothing is written", async () => {
    const workdir = tempDir("cli-work")
    const sessions = tempDir("cli-sessions")
    const common = ["--checkpointer", `file:${sessions}`, "--workdir", workdir, "--output-format", "json"]
    const first = JSON.parse((await cli(["-p", "write hello", "--model", `scripted:${turnsFile(WRITE_HELLO)}`, ...common])).stdout) as LiteAgentResult
    const ids = async () => {
      const checkpointer = fileCheckpointer({ dir: sessions })
      try {
        return (await checkpointer.list()).map((session) => session.id)
      } finally {
        await checkpointer.close()
      }
    }
    // One character off: refused (exit 2), the real id offered, no session made.
    const typo = `${first.sessionId.slice(0, -1)}${first.sessionId.endsWith("0") ? "1" : "0"}`
    const refused = await cli(["-p", "again", "--session", typo, "--model", `scripted:${turnsFile([{ text: "never" }])}`, ...common])
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain(`--session ${typo}: no session ${typo} in this store; the closest: ${first.sessionId}`)
    expect(refused.stdout).toBe("")
    expect(await ids()).toEqual([first.sessionId])
    const unlike = await cli(["-p", "again", "--session", "zzzz", "--model", `scripted:${turnsFile([{ text: "never" }])}`, ...common])
    expect(unlike.code).toBe(2)
    expect(unlike.stderr).toContain("--session zzzz: no session zzzz in this store (without --session, a new session starts)")
    // --resume takes the start of an id; alone it is a picker, which -p has not.
    const resumed = await cli(["-p", "again", "--resume", first.sessionId.slice(0, 8), "--model", `scripted:${turnsFile([{ text: "resumed" }])}`, ...common])
    expect(JSON.parse(resumed.stdout)).toMatchObject({ sessionId: first.sessionId, text: "resumed" })
    const bare = await cli(["-p", "again", "--resume", "--model", `scripted:${turnsFile([{ text: "never" }])}`, ...common])
    expect(bare.code).toBe(2)
    expect(bare.stderr).toContain("--resume without an id opens a picker, in the terminal")
    const both = await cli(["-p", "again", "--resume", "x", "--session", first.sessionId, ...common])
    expect(both.code).toBe(2)
    expect(both.stderr).toContain("--session and --resume cannot be used together")
    expect(await ids()).toEqual([first.sessionId])
  })

  it("without -p, lines piped in are one prompt each, in order, with no cursor escapes written; /exit stops there", async () => {
    const sessions = tempDir("cli-sessions")
    const run = await cli(
      ["--model", `scripted:${turnsFile([{ text: "Answered the first." }, { text: "Answered the second." }, { text: "never" }])}`, "--checkpointer", `file:${sessions}`, "--workdir", tempDir("cli-work"), "--permission-mode", "plan"],
      {},
      "the first prompt\nthe second prompt\n/exit\nnot run\n"
    )
    expect(run.code).toBe(0)
    expect(run.stdout).toContain("Answered the first.")
    expect(run.stdout).toContain("Answered the second.")
    expect(run.stdout).not.toContain("never")
    expect(run.stdout).not.toMatch(/\u001b/)
    const checkpointer = fileCheckpointer({ dir: sessions })
    try {
      const [session] = await checkpointer.list()
      const prompts = (await checkpointer.read(session!.id)).flatMap(({ event }) => (event._tag === "UserMessage" ? [event.content] : []))
      expect(prompts).toEqual(["the first prompt", "the second prompt"])
    } finally {
      await checkpointer.close()
    }
  })

  it("stream-json: one JSON object per event per line, the result last", async () => {
    const run = await cli([
      "-p",
      "write hello",
      "--model",
      `scripted:${turnsFile(WRITE_HELLO)}`,
      "--checkpointer",
      `file:${tempDir("cli-sessions")}`,
      "--workdir",
      tempDir("cli-work"),
      "--output-format",
      "stream-json"
    ])
    expect(run.code).toBe(0)
    const events = run.stdout.trimEnd().split("\n").map((line) =>
      JSON.parse(line) as { type: string; event?: { _tag: string }; delta?: string }
    )
    // The answer streams in pieces (text_delta) before its whole message.
    const deltas = events.filter((event) => event.type === "text_delta")
    expect(deltas.map((event) => event.delta).join("")).toBe("Wrote hello.txt.")
    const textDeltas = deltas.map(() => "text_delta")
    expect(events.map((event) => event.type === "session_event" ? event.event!._tag : event.type)).toEqual([
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
      ...textDeltas,
      "AssistantMessage",
      "result"
    ])
  })

  it("-p without a terminal needs --permission-mode; with one, what it would ask is refused and the lists decide", async () => {
    const workdir = tempDir("cli-work")
    const sessions = tempDir("cli-sessions")
    const turns = [
      { toolCalls: [{ name: "shell", input: { command: "echo ran > marker" } }, { name: "write_file", input: { path: "w.txt", content: "w" } }] },
      { text: "tried" }
    ]
    const base = ["-p", "go", "--checkpointer", `file:${sessions}`, "--workdir", workdir]
    const refused = await cli([...base, "--model", `scripted:${turnsFile(turns)}`], {}, "", true)
    expect(refused.code).toBe(2)
    expect(refused.stderr).toContain("-p without a terminal cannot ask before a tool runs: give --permission-mode")

    const asked = await cli([...base, "--model", `scripted:${turnsFile(turns)}`, "--permission-mode", "default", "--output-format", "json"])
    expect(asked.code).toBe(0)
    const denied = JSON.parse(asked.stdout) as LiteAgentResult
    expect(denied.toolCalls.map((call) => call.output)).toEqual([
      `permission denied: "shell" needs permission in default mode and there is no canUseTool to ask; the tool did not run`,
      `permission denied: "write_file" needs permission in default mode and there is no canUseTool to ask; the tool did not run`
    ])
    expect(() => readFileSync(join(workdir, "marker"))).toThrow()

    const listed = await cli([
      ...base,
      "--model",
      `scripted:${turnsFile(turns)}`,
      "--permission-mode",
      "acceptEdits",
      "--disallowed-tools",
      "write_file",
      "--allowed-tools",
      "shell",
      "--output-format",
      "json"
    ])
    const ran = JSON.parse(listed.stdout) as LiteAgentResult
    expect(ran.toolCalls.map((call) => call.isError)).toEqual([false, true])
    expect(readFileSync(join(workdir, "marker"), "utf8")).toBe("ran\n")
    expect(ran.toolCalls[1]!.output).toContain(`the tool "write_file" is disallowed`)
  })

  it("a failed turn exits 1 with the error on stderr", async () => {
    const run = await cli(["-p", "hi", "--model", `scripted:${turnsFile([])}`, "--checkpointer", `file:${tempDir("cli-sessions")}`, "--workdir", tempDir("cli-work")])
    expect(run.code).toBe(1)
    expect(run.stdout).toBe("")
    expect(run.stderr).toContain("lite-agent: ModelError:")
    expect(run.stderr).toContain("all 0 turns were used")
  })

  // Concurrent: each is a process that starts, refuses and exits.
  it.concurrent.each([
    [["--bogus"], "lite-agent has no option --bogus (lite-agent --help lists them)"],
    [["stray"], 'lite-agent takes no argument "stray"'],
    [["-p", "hi", "--model"], "--model needs a value"],
    [["-p", "hi", "-p", "again"], "-p is given twice"],
    [["-p", "hi", "--max-steps", "two"], '--max-steps takes an integer, got "two"'],
    [["-p", "hi", "--continue=yes"], "--continue takes no value"],
    [["-p", "hi", "--model", "gpt"], 'expected anthropic or scripted:<turns.json>'],
    [["-p", "hi"], "set ANTHROPIC_API_KEY"],
    [["-p", "hi", "--model", "scripted:/nonexistent/turns.json"], "no such file"],
    [["-p", "hi", "--model", "scripted:"], "needs a file"],
    [["-p", "hi", "--checkpointer", "s3:bucket"], "expected file:<dir>, sqlite:<file> or postgres:<url>"],
    [["-p", "hi", "--checkpointer", "postgres:not a url"], "--checkpointer postgres:<url>: is not a URL"],
    [["-p", "hi", "--session", "a", "--continue"], "cannot be used together"],
    [["-p", "hi", "--session", "../../etc"], '--session "../../etc" is not a session id'],
    [["-p", "hi", "--session", "a/b"], '--session "a/b" is not a session id'],
    [["-p", "hi", "--session", ""], '--session "" is not a session id'],
    [["-p", "hi", "--workdir", "/nonexistent/lite-agent"], "--workdir: /nonexistent/lite-agent does not exist"],
    [["serve", "--workdir", "/nonexistent/lite-agent"], "--workdir: /nonexistent/lite-agent does not exist"],
    [["-p", "-"], "-p -: stdin held no prompt"],
    [["-p", "hi", "--max-steps", "0"], "--max-steps must be a positive integer"],
    [["-p", "hi", "--output-format", "xml"], '--output-format takes one of text, json, stream-json, got "xml"'],
    [["-p", "hi", "--capture=none"], '--capture takes one of all, tools, got "none"'],
    [["-p", "hi", "--permission-mode", "yolo"], '--permission-mode takes one of default, acceptEdits, bypassPermissions, plan, got "yolo"'],
    [["-p", "hi", "--allowed-tools", "bash"], `--allowed-tools: no tool "bash"; the tools are read_file`],
    [["-p", "hi", "--disallowed-tools", "shell,nope"], `--disallowed-tools: no tool "nope"`],
    [["-p", "hi", "--allowed-tools", "shell(git"], `--allowed-tools: "shell(git" is not a rule`],
    // Node's recursive mkdir never returns under /proc: the store's directory is made one level at a time.
    [["-p", "hi", "--model", `scripted:${join(root, "examples", "cli", "hello.json")}`, "--checkpointer", "file:/proc/nope"], "--checkpointer file:/proc/nope cannot be used: /proc/nope: ENOENT"],
    [["serve", "--bogus"], "lite-agent serve has no option --bogus (lite-agent serve --help lists them)"],
    [["serve", "--port", "http"], '--port takes an integer, got "http"'],
    [["serve", "--host", "0.0.0.0"], "needs a token of your own"],
    [["serve", "--token", "short"], "at least 16 characters"]
  ])("%j exits 2 with a message", async (args, message) => {
    const run = await cli(args)
    expect(run.code).toBe(2)
    expect(run.stdout + run.stderr).toContain(message)
  })

  it("a default store that cannot be made says so, naming LITE_AGENT_HOME (not an option never given), in print mode and interactive", async () => {
    const hello = `scripted:${join(root, "examples", "cli", "hello.json")}`
    const env = { LITE_AGENT_HOME: "/dev/null/home" }
    for (const args of [["-p", "hi", "--model", hello], ["--model", hello, "--permission-mode", "plan"]]) {
      const run = await cli(args, env)
      expect(run.code, args.join(" ")).toBe(2)
      expect(run.stderr).toContain("the default session store ($LITE_AGENT_HOME/sessions) cannot be used: /dev/null/home/sessions: ENOTDIR")
      expect(run.stderr).toContain("set LITE_AGENT_HOME to a directory this process can write, or give --checkpointer")
      expect(run.stderr).not.toContain('option "dir"')
    }
  })

  it("--help lists every option with what it does, and serve; serve --help its own", async () => {
    const help = await cli(["--help"])
    expect(help.code).toBe(0)
    for (
      const text of [
        "serve",
        "--print",
        "--output-format",
        "--workdir",
        "--session",
        "--continue",
        "--checkpointer",
        "--model",
        "--capture",
        "--permission-mode",
        "--allowed-tools",
        "--disallowed-tools",
        "--no-color",
        "Exit codes"
      ]
    ) {
      expect(help.stdout).toContain(text)
    }
    expect(help.stdout).not.toContain("A user-defined piece of text")
    expect(help.stdout).not.toContain("--wizard")
    const serveHelp = await cli(["serve", "-h"])
    expect(serveHelp.code).toBe(0)
    for (const text of ["--host", "--port", "--token", "Also serve an agent", "--permission-timeout <seconds>"]) expect(serveHelp.stdout).toContain(text)
    expect(help.stdout).not.toContain("--permission-timeout")
    // After an option that takes a value, --help is that value.
    const asPrompt = await cli(["-p", "--help", "--model", `scripted:${turnsFile([{ text: "a prompt called --help" }])}`, "--checkpointer", `file:${tempDir("cli-help")}`])
    expect(asPrompt.stdout).toContain("a prompt called --help")
  })

  it("serve on a port in use exits 1 saying so", async () => {
    const taken = createServer()
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve))
    try {
      const port = (taken.address() as AddressInfo).port
      const run = await cli(["serve", "--port", String(port)])
      expect(run.code).toBe(1)
      expect(run.stderr).toContain("EADDRINUSE")
      expect(run.stderr).toContain(String(port))
    } finally {
      await new Promise((resolve) => taken.close(resolve))
    }
  })

  it("-p - reads the prompt from stdin", async () => {
    const sessions = tempDir("cli-stdin-sessions")
    const run = await cli(
      ["-p", "-", "--model", `scripted:${turnsFile([{ text: "read it" }])}`, "--checkpointer", `file:${sessions}`, "--output-format", "json"],
      {},
      "a prompt\nof two lines\n"
    )
    expect(run.code, run.stderr).toBe(0)
    const checkpointer = fileCheckpointer({ dir: sessions })
    try {
      const [session] = await checkpointer.list()
      const prompts = (await checkpointer.read(session!.id)).filter((stored) => stored.event._tag === "UserMessage")
      expect(prompts.map((stored) => stored.event._tag === "UserMessage" ? stored.event.content : "")).toEqual(["a prompt\nof two lines\n"])
    } finally {
      await checkpointer.close()
    }
  })

  it("a turns file that is not a valid script exits 2 naming the problem", async () => {
    const run = await cli(["-p", "hi", "--model", `scripted:${turnsFile([{ toolCalls: [{ input: {} }] }])}`])
    expect(run.code).toBe(2)
    expect(run.stderr).toContain("turns[0].toolCalls[0].name")
  })
})

describe("lite-agent -p on PostgreSQL (--checkpointer postgres:<url>)", () => {
  let server: PostgresServer
  beforeAll(async () => {
    server = await startPostgres()
  })
  afterAll(() => server?.destroy())

  it("stores the session in the database, and --continue picks it up from there", async () => {
    const workdir = tempDir("cli-work")
    const common = ["--checkpointer", `postgres:${server.url}`, "--workdir", workdir, "--output-format", "json"]
    const first = await cli(["-p", "write hello", "--model", `scripted:${turnsFile(WRITE_HELLO)}`, ...common])
    expect(first.code, first.stderr).toBe(0)
    const result = JSON.parse(first.stdout) as LiteAgentResult
    const again = await cli(["-p", "again", "--continue", "--model", `scripted:${turnsFile([{ text: "second" }])}`, ...common])
    expect(JSON.parse(again.stdout)).toMatchObject({ sessionId: result.sessionId, text: "second", head: result.head + 3 })
    const checkpointer = postgresCheckpointer({ url: server.url })
    try {
      expect((await checkpointer.list()).map((session) => session.id)).toEqual([result.sessionId])
      expect(await checkpointer.head(result.sessionId)).toBe(result.head + 3)
    } finally {
      await checkpointer.close()
    }
  })

  it("a URL that is not a postgres:// one exits 2 without echoing it (it may hold a password)", async () => {
    const run = await cli(["-p", "hi", "--model", `scripted:${turnsFile([{ text: "x" }])}`, "--checkpointer", "postgres:mysql://u:hunter2@db/x"])
    expect(run.code).toBe(2)
    expect(run.stderr).toContain("expected a postgres:// URL")
    expect(run.stdout + run.stderr).not.toContain("hunter2")
  })
})
