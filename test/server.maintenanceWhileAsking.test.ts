/**
 * A detached turn that waits for a permission answer does not hold up the maintenance of other
 * sessions of `lite-agent serve` (here with `--permission-timeout 0`: the question waits without
 * limit): while it waits, another session is restored, undone, redone, forked and its fork
 * deleted; the waiting session's own restore and delete are still 409 `run_in_flight`. What the
 * other session's restores changed in the shared workdir meanwhile is recorded in the waiting
 * session as the user's edit (a checkpoint capture), not as the work of its next tool call.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { live, makeTempDir, removeTempDirs, startServe } from "./support/processes.js"
import { connectSse, messagesUntil, request, type SseMessage, storedEvent } from "./support/sse.js"

const TOKEN = "maintenance-while-asking-token-0123"

let url: string
let workdir: string

beforeAll(async () => {
  workdir = makeTempDir("serve-maintenance-while-asking")
  const turns = join(makeTempDir("serve-maintenance-while-asking-turns"), "turns.json")
  writeFileSync(turns, JSON.stringify([
    // Session "other": two turns that write b.txt (write_file is allowed without asking).
    { toolCalls: [{ name: "write_file", input: { path: "b.txt", content: "one\n" } }] },
    { text: "Wrote one." },
    { toolCalls: [{ name: "write_file", input: { path: "b.txt", content: "two\n" } }] },
    { text: "Wrote two." },
    // Session "asking": a shell call it asks about, then a write it may make.
    { toolCalls: [{ name: "shell", input: { command: "echo asked > asked.txt" } }] },
    { toolCalls: [{ name: "write_file", input: { path: "a.txt", content: "from the asking session\n" } }] },
    { text: "Done without the shell." }
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
    `file:${makeTempDir("serve-maintenance-while-asking-sessions")}`,
    "--allowed-tools",
    "write_file",
    "--permission-timeout",
    "0"
  ]))
})
afterAll(() => {
  for (const child of live) child.kill("SIGKILL")
  removeTempDirs()
})

interface StoredEventJson {
  readonly _tag: string
  readonly toolUseId?: string
  readonly cause?: { readonly _tag: string; readonly toolUseId?: string }
  readonly changes?: ReadonlyArray<{ readonly path: string }>
  readonly content?: ReadonlyArray<{ readonly type: string; readonly id?: string; readonly name?: string; readonly text?: string }>
}

/** A turn run to its end (its stream drained, so the session is free again). */
const runTurn = async (sessionId: string, text: string) => {
  const turn = await connectSse(`${url}/sessions/${sessionId}/messages`, { token: TOKEN, method: "POST", body: { text } })
  expect(turn.status).toBe(200)
  const events: Array<SseMessage> = []
  for await (const message of turn.messages) events.push(message)
  expect(events.at(-1)?.event).toBe("result")
}

const post = (path: string, body?: unknown) => request(`${url}${path}`, { token: TOKEN, method: "POST", ...(body === undefined ? {} : { body }) })
const checkpointSeqs = async (sessionId: string) =>
  ((await request(`${url}/sessions/${sessionId}/checkpoints`, { token: TOKEN })).json as { checkpoints: Array<{ seq: number }> }).checkpoints
    .map((checkpoint) => checkpoint.seq)
const fileText = (path: string) => readFileSync(path, "utf8")

describe("a turn waiting for a permission answer", () => {
  it("does not hold up other sessions' maintenance; its own session's is refused until the turn is over", async () => {
    await runTurn("other", "write one")
    await runTurn("other", "write two")
    expect(fileText(join(workdir, "b.txt"))).toBe("two\n")

    const follower = await connectSse(`${url}/sessions/asking/events`, { token: TOKEN })
    const events = follower.messages[Symbol.asyncIterator]()
    const started = await post("/sessions/asking/messages?detach=true", { text: "run it" })
    expect(started).toMatchObject({ status: 202 })
    const upToQuestion = await messagesUntil(events, (message) => message.event === "permission_request")
    const question = JSON.parse(upToQuestion.at(-1)!.data) as { requestId: string; name: string }
    expect(question.name).toBe("shell")

    // The waiting session itself: still busy.
    const [askingCheckpoint] = await checkpointSeqs("asking")
    for (const refused of [await post("/sessions/asking/restore", { seq: askingCheckpoint }), await request(`${url}/sessions/asking`, { token: TOKEN, method: "DELETE" })]) {
      expect(refused).toMatchObject({ status: 409, json: { error: "AgentBusyError", reason: "run_in_flight", sessionId: "asking" } })
      expect((refused.json as { message: string }).message).toContain(`a turn of session "asking" is running, waiting for a permission answer or queued`)
    }

    // Every other session: restore, undo, redo, fork and delete run while the question waits.
    const [, secondCheckpoint] = await checkpointSeqs("other")
    const restored = await post("/sessions/other/restore", { seq: secondCheckpoint })
    expect(restored).toMatchObject({ status: 200, json: { restoredFiles: ["b.txt"], conversationRestored: true } })
    expect(fileText(join(workdir, "b.txt"))).toBe("one\n")
    expect(await post("/sessions/other/undo")).toMatchObject({ status: 200, json: { restoredFiles: ["b.txt"] } })
    expect(fileText(join(workdir, "b.txt"))).toBe("two\n")
    expect(await post("/sessions/other/redo")).toMatchObject({ status: 200, json: { restoredFiles: ["b.txt"] } })
    expect(fileText(join(workdir, "b.txt"))).toBe("one\n")
    const forkWorkdir = join(makeTempDir("serve-maintenance-while-asking-fork"), "fork")
    expect(await post("/sessions/other/fork", { id: "other-fork", workdir: forkWorkdir })).toMatchObject({
      status: 200,
      json: { sessionId: "other-fork", forkedFrom: { session: "other" } }
    })
    expect(fileText(join(forkWorkdir, "b.txt"))).toBe("one\n")
    expect(await request(`${url}/sessions/other-fork`, { token: TOKEN, method: "DELETE" })).toMatchObject({ status: 204 })

    // The question still waits (maintenance answered nothing): a new follower is shown it.
    const late = await connectSse(`${url}/sessions/asking/events`, { token: TOKEN })
    const shown = await messagesUntil(late.messages[Symbol.asyncIterator](), (message) => message.event === "permission_request")
    late.abort()
    expect(JSON.parse(shown.at(-1)!.data)).toMatchObject({ requestId: question.requestId })

    const denied = await post(`/sessions/asking/permissions/${question.requestId}`, { behavior: "deny", message: "not now" })
    expect(denied).toMatchObject({ status: 204 })
    const rest = await messagesUntil(events, (message) => message.data.includes("Done without the shell."))
    follower.abort()
    const logged = rest.map((message) => storedEvent<StoredEventJson>(message)).filter((event) => event !== undefined)

    // What the other session's restores left in the workdir while the question waited: the user's.
    const decision = logged.findIndex((event) => event._tag === "PermissionDecided")
    expect(logged[decision]).toMatchObject({ toolUseId: question.requestId, behavior: "deny", message: "not now" })
    expect(logged[decision - 1]).toMatchObject({ _tag: "WorkspaceCaptured", cause: { _tag: "checkpoint" }, changes: [{ path: "b.txt" }] })
    // The next call's own capture has its own change only.
    const write = logged.flatMap((event) => event.content ?? []).find((block) => block.type === "tool_use" && block.name === "write_file")
    const writeCapture = logged.find((event) => event._tag === "WorkspaceCaptured" && event.cause?.toolUseId === write?.id)
    expect(writeCapture?.changes?.map((change) => change.path)).toEqual(["a.txt"])
    expect(fileText(join(workdir, "a.txt"))).toBe("from the asking session\n")
    expect(fileText(join(workdir, "b.txt"))).toBe("one\n")
  })
})
