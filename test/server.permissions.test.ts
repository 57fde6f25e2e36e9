/**
 * `lite-agent serve` asking before tool calls (its default mode): a turn's permission question
 * is an SSE event on the turn's stream and on the session's `/events`, answered by
 * `POST /sessions/:id/permissions/:requestId`; a detached turn (`?detach=true`, 202) runs on
 * without its client; unknown questions are 404 and bad answers 400, changing nothing.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { goneWithin, live, makeTempDir, pidWrittenTo, removeTempDirs, startServe } from "./support/processes.js"
import { connectSse, request, type SseMessage } from "./support/sse.js"

const TOKEN = "permissions-token-0123456789"

let url: string
let workdir: string

beforeAll(async () => {
  workdir = makeTempDir("serve-permissions")
  const turns = join(workdir, "..", `${Date.now()}-turns.json`)
  writeFileSync(turns, JSON.stringify([
    { toolCalls: [{ name: "shell", input: { command: "echo denied > denied.txt" } }] },
    { text: "It was not allowed." },
    { toolCalls: [{ name: "shell", input: { command: "echo allowed > allowed.txt" } }] },
    { text: "Ran it." },
    { toolCalls: [{ name: "edit_file", input: { path: "notes.md", old_string: "old line", new_string: "new line" } }] },
    { text: "Left it." },
    { toolCalls: [{ name: "shell", input: { command: "echo $$ > leaving.pid; exec sleep 60" } }] },
    { text: "never said: the client left" }
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
    `file:${makeTempDir("serve-permissions-sessions")}`
  ]))
})
afterAll(() => {
  for (const child of live) child.kill("SIGKILL")
  removeTempDirs()
})

/** Messages of a stream until (and with) the first one `until` accepts. */
const messagesUntil = async (messages: AsyncIterator<SseMessage>, until: (message: SseMessage) => boolean) => {
  const seen: Array<SseMessage> = []
  for (;;) {
    const next = await messages.next()
    if (next.done === true) return seen
    seen.push(next.value)
    if (until(next.value)) return seen
  }
}

const answerQuestion = (sessionId: string, requestId: string, body: unknown) =>
  request(`${url}/sessions/${sessionId}/permissions/${requestId}`, { token: TOKEN, method: "POST", body })

describe("lite-agent serve asks before tool calls", () => {
  it("the question is an event of the turn's stream; a denial is answered over HTTP and the command never runs", async () => {
    const turn = await connectSse(`${url}/sessions/asked/messages`, { token: TOKEN, method: "POST", body: { text: "run it" } })
    expect(turn.status).toBe(200)
    const messages = turn.messages[Symbol.asyncIterator]()
    const upToQuestion = await messagesUntil(messages, (message) => message.event === "permission_request")
    const question = JSON.parse(upToQuestion.at(-1)!.data) as { requestId: string; toolUseId: string; name: string; input: unknown }
    expect(question).toMatchObject({ name: "shell", input: { command: "echo denied > denied.txt" }, mode: "default" })
    expect(question.requestId).toBe(question.toolUseId)

    // Bad answers change nothing: the question still waits.
    expect(await answerQuestion("asked", question.toolUseId, { behavior: "maybe" })).toMatchObject({ status: 400 })
    expect(await answerQuestion("asked", "toolu_nosuch", { behavior: "allow" })).toMatchObject({
      status: 404,
      json: { error: "PermissionRequestNotFound" }
    })
    expect(await answerQuestion("asked", question.toolUseId, { behavior: "deny", message: "not on this machine" })).toMatchObject({ status: 204 })
    // Answered once: a second answer finds nothing waiting.
    expect(await answerQuestion("asked", question.toolUseId, { behavior: "allow" })).toMatchObject({ status: 404 })

    const rest = await messagesUntil(messages, (message) => message.event === "result")
    const result = JSON.parse(rest.at(-1)!.data) as { result: { text: string; toolCalls: Array<{ output: string }> } }
    expect(result.result.text).toBe("It was not allowed.")
    expect(result.result.toolCalls[0]!.output).toBe("permission denied: not on this machine; the tool did not run")
    expect(existsSync(join(workdir, "denied.txt"))).toBe(false)
    const decided = rest.find((message) => message.event === "session_event" && message.data.includes("PermissionDecided"))
    expect(JSON.parse(decided!.data)).toMatchObject({ event: { _tag: "PermissionDecided", behavior: "deny", decidedBy: "callback" } })
  })

  it("a detached turn (202) runs on without its client; a follower of /events sees its question and answers it", async () => {
    const follower = await connectSse(`${url}/sessions/detached/events`, { token: TOKEN })
    expect(follower.status).toBe(200)
    const started = await request(`${url}/sessions/detached/messages?detach=true`, { token: TOKEN, method: "POST", body: { text: "run it" } })
    expect(started).toEqual({ status: 202, json: { sessionId: "detached", detached: true } })
    const events = follower.messages[Symbol.asyncIterator]()
    const upToQuestion = await messagesUntil(events, (message) => message.event === "permission_request")
    const question = JSON.parse(upToQuestion.at(-1)!.data) as { requestId: string; toolUseId: string; name: string }
    expect(question.requestId).toBe(question.toolUseId)
    expect(question.name).toBe("shell")
    // A follower that connects while the question waits is shown it too.
    const late = await connectSse(`${url}/sessions/detached/events`, { token: TOKEN })
    const lateQuestion = await messagesUntil(late.messages[Symbol.asyncIterator](), (message) => message.event === "permission_request")
    expect(JSON.parse(lateQuestion.at(-1)!.data)).toMatchObject({ requestId: question.requestId })
    late.abort()

    expect(await answerQuestion("detached", question.requestId, { behavior: "allow", remember: true })).toMatchObject({ status: 204 })
    const rest = await messagesUntil(events, (message) => message.data.includes('"AssistantMessage"') && message.data.includes("Ran it."))
    expect(rest.some((message) => message.data.includes('"PermissionDecided"') && message.data.includes('"remember":true'))).toBe(true)
    expect(readFileSync(join(workdir, "allowed.txt"), "utf8")).toBe("allowed\n")
    follower.abort()

    expect(await request(`${url}/sessions/detached/messages?detach=maybe`, { token: TOKEN, method: "POST", body: { text: "x" } }))
      .toMatchObject({ status: 400 })
  })

  it("an edit's question carries the diff it would make, read as it is asked", async () => {
    writeFileSync(join(workdir, "notes.md"), "# notes\nold line\n")
    const turn = await connectSse(`${url}/sessions/edited/messages`, { token: TOKEN, method: "POST", body: { text: "edit the notes" } })
    const messages = turn.messages[Symbol.asyncIterator]()
    const upToQuestion = await messagesUntil(messages, (message) => message.event === "permission_request")
    const question = JSON.parse(upToQuestion.at(-1)!.data) as { toolUseId: string; name: string; diff?: Array<string> }
    expect(question.name).toBe("edit_file")
    expect(question.diff).toEqual(["--- a/notes.md", "+++ b/notes.md", "@@ -1,2 +1,2 @@", " # notes", "-old line", "+new line"])
    expect(await answerQuestion("edited", question.toolUseId, { behavior: "deny", message: "the user denied edit_file: keep it" })).toMatchObject({ status: 204 })
    const rest = await messagesUntil(messages, (message) => message.event === "result")
    expect(JSON.parse(rest.at(-1)!.data)).toMatchObject({ result: { toolCalls: [{ output: "permission denied: the user denied edit_file: keep it; the tool did not run" }] } })
    expect(readFileSync(join(workdir, "notes.md"), "utf8")).toBe("# notes\nold line\n")
  })

  it("without detach, a client that leaves cancels its turn: the running command is killed", async () => {
    const turn = await connectSse(`${url}/sessions/leaving/messages`, { token: TOKEN, method: "POST", body: { text: "run long" } })
    const messages = turn.messages[Symbol.asyncIterator]()
    const upToQuestion = await messagesUntil(messages, (message) => message.event === "permission_request")
    const question = JSON.parse(upToQuestion.at(-1)!.data) as { requestId: string }
    expect(await answerQuestion("leaving", question.requestId, { behavior: "allow" })).toMatchObject({ status: 204 })
    await messagesUntil(messages, (message) => message.event === "tool_start")
    const pid = await pidWrittenTo(join(workdir, "leaving.pid"))
    turn.abort()
    expect(await goneWithin(pid, 30_000)).toBe(true)
  })
})
