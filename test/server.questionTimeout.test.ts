/**
 * A permission question nobody answers: `lite-agent serve --permission-timeout <seconds>` denies
 * it once that time has passed, saying so; the model reads the denial and the turn goes on, its
 * followers see the question end as they see an answered one (the `PermissionDecided` event),
 * and the session's maintenance is free again. A timeout that cannot be one is refused: exit 2 at
 * the command line, `ConfigurationError` from `PermissionRequests.make` and `.layer`.
 */
import { existsSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect, Either, Exit, Layer } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ConfigurationError } from "../src/index.js"
import { PermissionRequests } from "../src/server.js"
import { live, makeTempDir, removeTempDirs, startServe, startWorker } from "./support/processes.js"
import { connectSse, messagesUntil, request, type SseMessage, storedEvent } from "./support/sse.js"

const TOKEN = "question-timeout-token-0123456789"

let url: string
let workdir: string

beforeAll(async () => {
  workdir = makeTempDir("serve-question-timeout")
  const turns = join(makeTempDir("serve-question-timeout-turns"), "turns.json")
  writeFileSync(turns, JSON.stringify([
    { toolCalls: [{ name: "shell", input: { command: "echo expired > expired.txt" } }] },
    { text: "Nobody said yes, so I did not run it." },
    { toolCalls: [{ name: "shell", input: { command: "echo detached > detached.txt" } }] },
    { text: "Moving on without it." }
  ]))
  ;({ url } = await startServe([
    "--port",
    "0",
    "--token",
    TOKEN,
    "--model",
    `scripted:${turns}`,
    "--workdir",
    workdir,
    "--checkpointer",
    `file:${makeTempDir("serve-question-timeout-sessions")}`,
    // The smallest the command takes: the tests wait for the denial's event, never for a time.
    "--permission-timeout",
    "1"
  ]))
})
afterAll(() => {
  for (const child of live) child.kill("SIGKILL")
  removeTempDirs()
})



const isEvent = (tag: string) => (message: SseMessage) => storedEvent(message)?._tag === tag

const answerQuestion = (sessionId: string, requestId: string, body: unknown) =>
  request(`${url}/sessions/${sessionId}/permissions/${requestId}`, { token: TOKEN, method: "POST", body })

const EXPIRED = "nobody answered within 1 second"

describe("a permission question nobody answers", () => {
  it("is denied after --permission-timeout, saying so; the turn goes on and the session's maintenance is free", async () => {
    const turn = await connectSse(`${url}/sessions/expiring/messages`, { token: TOKEN, method: "POST", body: { text: "run it" } })
    expect(turn.status).toBe(200)
    const messages = turn.messages[Symbol.asyncIterator]()
    const upToQuestion = await messagesUntil(messages, (message) => message.event === "permission_request")
    const question = JSON.parse(upToQuestion.at(-1)!.data) as { requestId: string; name: string }
    expect(question.name).toBe("shell")

    const rest = await messagesUntil(messages, (message) => message.event === "result")
    const decided = rest.find((message) => message.event === "session_event" && message.data.includes('"PermissionDecided"'))
    expect(JSON.parse(decided!.data)).toMatchObject({
      event: { _tag: "PermissionDecided", behavior: "deny", decidedBy: "callback", message: EXPIRED }
    })
    const toolEnd = rest.find((message) => message.event === "tool_end")
    expect(JSON.parse(toolEnd!.data)).toMatchObject({ isError: true, output: `permission denied: ${EXPIRED}; the tool did not run` })
    // The model read the denial and answered: the turn went on.
    const result = JSON.parse(rest.at(-1)!.data) as { result: { text: string; steps: number } }
    expect(result.result).toMatchObject({ text: "Nobody said yes, so I did not run it.", steps: 2 })
    expect(existsSync(join(workdir, "expired.txt"))).toBe(false)
    for (let next = await messages.next(); next.done !== true; next = await messages.next()) {
      // Drained: the stream ends once the turn has released the session.
    }

    // Too late to answer it: it is no longer waiting.
    const late = await answerQuestion("expiring", question.requestId, { behavior: "allow" })
    expect(late).toMatchObject({ status: 404, json: { error: "PermissionRequestNotFound" } })
    expect((late.json as { message: string }).message).toContain("denied when nobody answered in time")
    // The session's maintenance, which the question held up while it waited, runs.
    expect(await request(`${url}/sessions/expiring`, { token: TOKEN, method: "DELETE" })).toMatchObject({ status: 204 })
  })

  it("in a detached turn: followers see the question, then its end; one connecting after is not shown it", async () => {
    const follower = await connectSse(`${url}/sessions/unattended/events`, { token: TOKEN })
    expect(follower.status).toBe(200)
    const started = await request(`${url}/sessions/unattended/messages?detach=true`, { token: TOKEN, method: "POST", body: { text: "run it" } })
    expect(started).toEqual({ status: 202, json: { sessionId: "unattended", detached: true } })
    const events = follower.messages[Symbol.asyncIterator]()
    const upToQuestion = await messagesUntil(events, (message) => message.event === "permission_request")
    const question = JSON.parse(upToQuestion.at(-1)!.data) as { requestId: string }

    const upToDecision = await messagesUntil(events, isEvent("PermissionDecided"))
    expect(storedEvent(upToDecision.at(-1)!)).toMatchObject({
      toolUseId: question.requestId,
      behavior: "deny",
      decidedBy: "callback",
      message: EXPIRED
    })
    const upToAnswer = await messagesUntil(events, (message) => isEvent("AssistantMessage")(message) && message.data.includes("Moving on"))
    expect(upToAnswer.some((message) => storedEvent(message)?._tag === "ToolResult" && message.data.includes(EXPIRED))).toBe(true)
    follower.abort()
    expect(existsSync(join(workdir, "detached.txt"))).toBe(false)

    // Pending questions are shown to a new follower first, before the log: this one sees none.
    const after = await connectSse(`${url}/sessions/unattended/events`, { token: TOKEN })
    const replayed = await messagesUntil(after.messages[Symbol.asyncIterator](), isEvent("PermissionDecided"))
    after.abort()
    expect(replayed.filter((message) => message.event === "permission_request")).toEqual([])
  })
})

/** `lite-agent serve <args>` that should not start: its exit code and what it said. */
const refusedServe = async (args: ReadonlyArray<string>) => {
  const worker = startWorker("../../src/cli/main.ts", ["serve", "--port", "0", "--checkpointer", `file:${makeTempDir("serve-refused")}`, ...args])
  const { code } = await worker.closed
  return { code, said: worker.lines.join("\n") + worker.stderr() }
}

describe("a timeout that cannot be one is refused", () => {
  it.each([
    [["--permission-timeout", "-1"], "--permission-timeout takes a number of seconds from 1 to 2147483, or 0 to wait without limit; got -1"],
    [["--permission-timeout", "2147484"], "--permission-timeout takes a number of seconds from 1 to 2147483, or 0 to wait without limit; got 2147484"],
    [["--permission-timeout", "soon"], '--permission-timeout takes an integer, got "soon"'],
    [["--permission-timeout"], "--permission-timeout needs a value"]
  ])("lite-agent serve %j exits 2 saying why", async (args, message) => {
    const refused = await refusedServe(args)
    expect(refused.code).toBe(2)
    expect(refused.said).toContain(message)
  })

  it.each([
    ["0", 0],
    ["-5", -5],
    ["1.5", 1.5],
    ["NaN", Number.NaN],
    ["2 ** 31", 2 ** 31],
    ['"300"', "300"],
    ["null", null]
  ])("PermissionRequests.make({ timeoutMs: %s }) throws ConfigurationError", (_shown, timeoutMs) => {
    // As a JavaScript caller might pass it: the types would refuse most of these.
    const made = Either.try(() => PermissionRequests.make({ timeoutMs } as never))
    const error = Either.isLeft(made) ? made.left : undefined
    expect(error).toBeInstanceOf(ConfigurationError)
    expect(error).toMatchObject({ option: "timeoutMs" })
    expect(String(error)).toContain("a positive integer of milliseconds up to 2147483647, or Infinity to wait without limit")
  })

  it("PermissionRequests.layer fails with ConfigurationError for an unknown option or a bad timeout", async () => {
    const built = (options: object) =>
      Effect.runPromiseExit(Effect.scoped(Layer.build(PermissionRequests.layer(options as never))))
    const misspelt = await built({ timeout: 1000 })
    expect(Exit.isFailure(misspelt) && misspelt.cause).toMatchObject({ error: { _tag: "ConfigurationError", option: "timeout" } })
    const zero = await built({ timeoutMs: 0 })
    expect(Exit.isFailure(zero) && zero.cause).toMatchObject({ error: { _tag: "ConfigurationError", option: "timeoutMs" } })
    expect(Exit.isSuccess(await built({ timeoutMs: Infinity }))).toBe(true)
  })
})

describe("PermissionRequests on its own", () => {
  const ask = (requests: PermissionRequests.PermissionRequestsService, toolUseId: string, signal = new AbortController().signal) => {
    const answer = requests.canUseTool("shell", { command: "true" }, { sessionId: "s", toolUseId, workdir: process.cwd(), mode: "default", signal })
    if (Effect.isEffect(answer)) throw new Error("the registry answers with a promise")
    return Promise.resolve(answer)
  }

  it("denies a question nobody answers in time; it is then no longer pending and cannot be answered", async () => {
    const requests = PermissionRequests.make({ timeoutMs: 20 })
    const asked = ask(requests, "toolu_1")
    expect(requests.pending("s").map((question) => question.requestId)).toEqual(["toolu_1"])
    expect(await asked).toEqual({ behavior: "deny", message: "nobody answered within 20 ms" })
    expect(requests.pending("s")).toEqual([])
    expect(requests.answer("s", "toolu_1", { behavior: "allow" })).toBe(false)
  })

  it("an answer or an interruption before the time settles it as given; Infinity never expires", async () => {
    const requests = PermissionRequests.make({ timeoutMs: PermissionRequests.MAX_TIMEOUT_MS })
    const answered = ask(requests, "toolu_2")
    expect(requests.answer("s", "toolu_2", { behavior: "allow", remember: true })).toBe(true)
    expect(await answered).toEqual({ behavior: "allow", remember: true })

    const unlimited = PermissionRequests.make({ timeoutMs: Infinity })
    const stop = new AbortController()
    const interrupted = ask(unlimited, "toolu_3", stop.signal)
    stop.abort()
    expect(await interrupted).toMatchObject({ behavior: "deny", interrupt: true })
    expect(unlimited.pending("s")).toEqual([])
  })

  it("says a wait as people do", () => {
    expect(PermissionRequests.describeWait(PermissionRequests.DEFAULT_TIMEOUT_MS)).toBe("5 minutes")
    expect(PermissionRequests.describeWait(60_000)).toBe("1 minute")
    expect(PermissionRequests.describeWait(90_000)).toBe("90 seconds")
    expect(PermissionRequests.describeWait(1500)).toBe("1500 ms")
  })
})
