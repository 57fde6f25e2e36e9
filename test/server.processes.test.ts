/**
 * `lite-agent serve` in real processes: an agent's turn, its compaction (and one cancelled by
 * the client going away) streamed over HTTP with the scripted model; a busy agent (maintenance
 * while a turn runs) and a refused restore as 409; bad bodies as 400 with nothing changed; and two server processes
 * over one SQLite database and over one PostgreSQL database — what goes in through one
 * streams out of the other, a restore as the move of its leaf; a session whose restore a crash cut short
 * (reported, a turn refused, undone over HTTP).
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { sessionWithInterruptedRestore } from "./support/interruptedRestore.js"
import { live, makeTempDir, removeTempDirs, startServe, type Worker } from "./support/processes.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"
import { RestoreRefusedError } from "../src/index.js"
import { answer, refusal } from "./support/sessionClient.js"
import { connectSse, request, type SseMessage } from "./support/sse.js"

const TOKEN = "processes-token-0123456789"

let postgres: PostgresServer
beforeAll(async () => {
  postgres = await startPostgres()
})
afterAll(() => {
  for (const child of live) child.kill("SIGKILL")
  postgres?.destroy()
  removeTempDirs()
})

interface Served {
  readonly worker: Worker
  readonly url: string
}

/**
 * `lite-agent serve` with these arguments, once it says where it listens. Nobody answers
 * permission questions here: every tool runs (test/server.permissions.test.ts asks).
 */
const serve = async (args: ReadonlyArray<string>): Promise<Served> => {
  return startServe(["--port", "0", "--token", TOKEN, "--permission-mode", "bypassPermissions", ...args])
}

const turnsFile = (dir: string, turns: unknown) => {
  const file = join(dir, "turns.json")
  writeFileSync(file, JSON.stringify(turns))
  return file
}

/** Every message of an SSE response until the server ends it. */
const allMessages = async (messages: AsyncIterable<SseMessage>) => {
  const all: Array<SseMessage> = []
  for await (const message of messages) all.push(message)
  return all
}

describe("lite-agent serve with an agent (scripted model)", () => {
  let server: Served
  let workdir: string
  beforeAll(async () => {
    workdir = makeTempDir("serve-agent")
    const longAnswer = "a long answer with plenty of words in it. ".repeat(40)
    const turns = [
      { toolCalls: [{ name: "write_file", input: { path: "hello.txt", content: "hi\n" } }] },
      { text: "Wrote hello.txt." },
      { text: `Second: ${longAnswer}` },
      { text: "slow answer", delayMs: 1500 },
      { text: "summary: hello.txt was written, then a second prompt was answered" },
      { text: "a summary nobody waits for", delayMs: 4000 }
    ]
    server = await serve([
      "--checkpointer",
      `sqlite:${join(workdir, "sessions.db")}`,
      "--model",
      `scripted:${turnsFile(workdir, turns)}`,
      "--workdir",
      workdir
    ])
  })
  afterAll(() => server?.worker.child.kill("SIGTERM"))

  it("a turn streams its agent events over SSE; a busy agent is 409; bad bodies are 400 and change nothing", async () => {
    const first = await connectSse(`${server.url}/sessions/work/messages`, { token: TOKEN, method: "POST", body: { text: "write hello" } })
    expect(first.status).toBe(200)
    const events = await allMessages(first.messages)
    // The answer's text streams in pieces before its message.
    const deltas = events.filter((message) => message.event === "text_delta")
    expect(deltas.map((message) => (JSON.parse(message.data) as { delta: string }).delta).join("")).toBe("Wrote hello.txt.")
    // Metadata, the checkpoint's workspace capture, the prompt, the tool call; the file tool's
    // snapshot and change, the capture of what it wrote, its result; the answer.
    expect(events.filter((message) => message.event !== "text_delta").map((message) => message.event)).toEqual([
      "session_event",
      "session_event",
      "session_event",
      "session_event",
      "tool_start",
      "session_event",
      "session_event",
      "session_event",
      "session_event",
      "tool_end",
      "session_event",
      "result"
    ])
    const result = JSON.parse(events.at(-1)!.data) as { result: { text: string; head: number } }
    expect(result.result).toMatchObject({ text: "Wrote hello.txt.", head: 9 })

    const second = await connectSse(`${server.url}/sessions/work/messages`, { token: TOKEN, method: "POST", body: { text: "again" } })
    expect((await allMessages(second.messages)).at(-1)?.event).toBe("result")

    // While a turn runs, maintenance (deleting a session) is refused before anything changes.
    const slow = await connectSse(`${server.url}/sessions/busy/messages`, { token: TOKEN, method: "POST", body: { text: "slow one" } })
    const refused = await request(`${server.url}/sessions/busy`, { token: TOKEN, method: "DELETE" })
    expect(refused).toMatchObject({ status: 409, json: { error: "AgentBusyError", reason: "run_in_flight" } })
    expect((await allMessages(slow.messages)).at(-1)?.event).toBe("result")
    expect(await answer(server.url, TOKEN, (client) => client.sessions.get({ path: { id: "busy" } }))).toMatchObject({ head: 4 })

    for (const [body, what] of [
      [{ rawBody: "{not json" }, "not JSON"],
      [{ body: { text: "" } }, "expected a non-empty string"],
      [{ body: { text: "hi", extra: 1 } }, "unknown option"],
      [{ body: {} }, "is required"],
      [{ rawBody: JSON.stringify({ text: "x".repeat(2 * 1024 * 1024) }) }, "too large"]
    ] as const) {
      const response = await request(`${server.url}/sessions/work/messages`, { token: TOKEN, method: "POST", ...body })
      expect(response.status, what).toBe(what === "too large" ? 413 : 400)
      expect(JSON.stringify(response.json), what).toContain(what)
    }
    // A body with no declared length (chunked) that grows past the limit: its 413 too, not a reset.
    const chunks = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 40; i++) controller.enqueue(new Uint8Array(64 * 1024).fill(120))
        controller.close()
      }
    })
    const chunked = await fetch(`${server.url}/sessions/work/messages`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: chunks,
      duplex: "half"
    } as RequestInit & { readonly duplex: "half" })
    expect(chunked.status).toBe(413)
    expect(await chunked.text()).toContain("PayloadTooLarge")
    expect(await answer(server.url, TOKEN, (client) => client.sessions.get({ path: { id: "work" } }))).toMatchObject({ head: 12 })
  })

  it("a compaction streams its events; one whose client goes away is cancelled and writes nothing", async () => {
    const compaction = await connectSse(`${server.url}/sessions/work/compact`, {
      token: TOKEN,
      method: "POST",
      body: { instructions: "keep it short", keepRecentTokens: 1 }
    })
    expect(compaction.status).toBe(200)
    const events = await allMessages(compaction.messages)
    const stages = events.map((message) => JSON.parse(message.data) as { type: string; phase?: string; stage?: string })
    expect(stages.every((event) => event.type === "compaction")).toBe(true)
    expect(stages.at(-1)).toMatchObject({ phase: "done" })
    const { head } = await answer(server.url, TOKEN, (client) => client.sessions.get({ path: { id: "work" } }))
    expect(head).toBe(13)

    // The next summary takes 4 s; the client leaves after 1 s: the compaction is cancelled.
    const abandoned = await connectSse(`${server.url}/sessions/work/compact`, { token: TOKEN, method: "POST", body: { keepRecentTokens: 1 } })
    await sleep(1000)
    abandoned.abort()
    await sleep(4500)
    expect(await answer(server.url, TOKEN, (client) => client.sessions.get({ path: { id: "work" } }))).toMatchObject({ head: 13 })
  })

  it("a restore that would overwrite an outside edit is 409 with each file's reason, and changes nothing", async () => {
    writeFileSync(join(workdir, "hello.txt"), "edited outside the agent\n")
    const checkpoints = await answer(server.url, TOKEN, (client) => client.sessions.checkpoints({ path: { id: "work" } }))
    const first = checkpoints.checkpoints[0]!
    expect(first.files).toEqual(["hello.txt"])
    // The wire format of a 409 with the error's own fields, pinned with a raw request.
    const refused = await request(`${server.url}/sessions/work/restore`, { token: TOKEN, method: "POST", body: { seq: first.seq } })
    expect(refused).toMatchObject({
      status: 409,
      json: { error: "RestoreRefusedError", refusals: [{ reason: "modified_externally", path: "hello.txt" }] }
    })
    // The typed client gets the same refusal as the agent's own error.
    const typed = await refusal(server.url, TOKEN, (client) => client.agent.restore({ path: { id: "work" }, payload: { seq: first.seq } }))
    expect(typed).toBeInstanceOf(RestoreRefusedError)
    expect(typed).toMatchObject({ refusals: [{ reason: "modified_externally", path: "hello.txt" }] })
    expect(await answer(server.url, TOKEN, (client) => client.sessions.get({ path: { id: "work" } }))).toMatchObject({ head: 13 })
    const dryRun = await answer(server.url, TOKEN, (client) =>
      client.agent.restore({ path: { id: "work" }, payload: { seq: first.seq, files: false, dryRun: true } }))
    expect(dryRun).toMatchObject({ dryRun: true, refusals: [] })
    expect(await request(`${server.url}/sessions/work/restore`, { token: TOKEN, method: "POST", body: { seq: -1 } })).toMatchObject({ status: 400 })
  })
})

describe("lite-agent serve over a session whose restore a crash cut short", () => {
  it("reports it with the checkpoints, refuses a turn (409), and undoes it on request", async () => {
    const workdir = makeTempDir("serve-interrupted-work")
    const file = join(makeTempDir("serve-interrupted-db"), "sessions.db")
    const paths = ["a.txt", "b.txt", "c.txt"]
    // Killed before its second file: a.txt is back at "one", b.txt and c.txt still "two".
    const seq = await sessionWithInterruptedRestore({ backend: "sqlite", location: file, workdir, sessionId: "work" }, paths, "operation:2")

    const server = await serve(["--checkpointer", `sqlite:${file}`, "--model", `scripted:${turnsFile(workdir, [{ text: "back at work" }])}`, "--workdir", workdir])
    try {
      const listed = await answer(server.url, TOKEN, (client) => client.sessions.checkpoints({ path: { id: "work" } }))
      expect(listed).toMatchObject({ interruptedRestore: { checkpoint: seq, conversation: true, files: paths } })
      const refused = await request(`${server.url}/sessions/work/messages`, { token: TOKEN, method: "POST", body: { text: "go on" } })
      expect(refused).toMatchObject({ status: 409, json: { error: "RestoreInterruptedError", checkpoint: seq } })
      const undone = await answer(server.url, TOKEN, (client) => client.agent.undoRestore({ path: { id: "work" } }))
      expect(undone).toMatchObject({ resumed: true, restoredFiles: ["a.txt"] })
      for (const path of paths) expect(readFileSync(join(workdir, path), "utf8")).toBe(`two ${path}\n`)
      expect(await answer(server.url, TOKEN, (client) => client.sessions.checkpoints({ path: { id: "work" } }))).toMatchObject({
        interruptedRestore: null
      })
      const again = await connectSse(`${server.url}/sessions/work/messages`, { token: TOKEN, method: "POST", body: { text: "go on" } })
      expect((await allMessages(again.messages)).at(-1)?.event).toBe("result")
    } finally {
      server.worker.child.kill("SIGTERM")
      await server.worker.closed
    }
  })
})

describe.each(["sqlite", "postgres"] as const)("two lite-agent serve processes over one %s store", (backend) => {
  it("a turn through one streams out of the other; a restore through one is a move of the leaf on the other", async () => {
    const dir = makeTempDir(`serve-two-${backend}`)
    const store = backend === "sqlite" ? `sqlite:${join(dir, "sessions.db")}` : `postgres:${postgres.url}`
    const turns = [{ text: "first answer" }, { text: "second answer" }]
    const withAgent = await serve(["--checkpointer", store, "--model", `scripted:${turnsFile(dir, turns)}`, "--workdir", dir])
    const sessionsOnly = await serve(["--checkpointer", store])
    const session = `shared-${backend}`
    try {
      const first = await connectSse(`${withAgent.url}/sessions/${session}/messages`, { token: TOKEN, method: "POST", body: { text: "one" } })
      await allMessages(first.messages)
      const { head } = await answer(sessionsOnly.url, TOKEN, (client) => client.sessions.get({ path: { id: session } }))
      // Metadata, the checkpoint's workspace capture, the prompt, the answer.
      expect(head).toBe(4)

      const watcher = await connectSse(`${sessionsOnly.url}/sessions/${session}/events`, { token: TOKEN, lastEventId: String(head) })
      const seen: Array<string> = []
      // What the watcher has seen, as `seq:tag` or `reset id`; `until` resolves once `enough` holds.
      let until: { enough: () => boolean; resolve: () => void } | undefined
      const watching = (async () => {
        for await (const message of watcher.messages) {
          seen.push(message.event === "reset" ? `reset ${message.id}` : `${message.id}:${(JSON.parse(message.data) as { event: { _tag: string } }).event._tag}`)
          if (until?.enough() === true) until.resolve()
        }
      })()
      const seenUntil = (enough: () => boolean) =>
        enough() ? Promise.resolve() : new Promise<void>((resolve) => {
          until = { enough, resolve }
        })
      const second = await connectSse(`${withAgent.url}/sessions/${session}/messages`, { token: TOKEN, method: "POST", body: { text: "two" } })
      await allMessages(second.messages)
      // The turn's events reach the watcher before the restore: a truncate that came first would be
      // a reset that skips them, which is what following promises but not what this test checks.
      await seenUntil(() => seen.length >= 3)
      expect(seen).toEqual(["5:WorkspaceCaptured", "6:UserMessage", "7:AssistantMessage"])
      const restore = await answer(withAgent.url, TOKEN, (client) => client.agent.restore({ path: { id: session }, payload: { seq: 6 } }))
      expect(restore).toMatchObject({ conversationRestored: true })
      await seenUntil(() => seen.length >= 4)
      watcher.abort()
      await watching.catch(() => undefined)
      // Back to just before the second prompt (the capture taken before it): a move of the leaf,
      // never a silent mix of two branches; nothing is deleted, so nothing is sent again.
      expect(seen).toEqual(["5:WorkspaceCaptured", "6:UserMessage", "7:AssistantMessage", "8:LeafMoved"])
      const moved = await answer(sessionsOnly.url, TOKEN, (client) => client.sessions.checkpoints({ path: { id: session } }))
      expect(moved.checkpoints.map((checkpoint) => checkpoint.seq)).toEqual([3])
    } finally {
      withAgent.worker.child.kill("SIGTERM")
      sessionsOnly.worker.child.kill("SIGTERM")
      await Promise.all([withAgent.worker.closed, sessionsOnly.worker.closed])
    }
  })
})

describe("lite-agent serve over a workspace a shell command changed", () => {
  it("lists the command's changes at the checkpoint, plans their undoing (links and directories too) and restores them", async () => {
    const workdir = makeTempDir("serve-capture-work")
    writeFileSync(join(workdir, "kept.txt"), "kept\n")
    const command = "mkdir -p gen/deep && echo x > gen/deep/a.txt && ln -s kept.txt link && echo changed > kept.txt"
    const turns = [{ toolCalls: [{ name: "shell", input: { command } }] }, { text: "done" }]
    const server = await serve(["--checkpointer", `sqlite:${join(workdir, "sessions.db")}`, "--model", `scripted:${turnsFile(workdir, turns)}`, "--workdir", workdir])
    try {
      const turn = await connectSse(`${server.url}/sessions/work/messages`, { token: TOKEN, method: "POST", body: { text: "make things" } })
      expect((await allMessages(turn.messages)).at(-1)?.event).toBe("result")
      const { checkpoints } = await answer(server.url, TOKEN, (client) => client.sessions.checkpoints({ path: { id: "work" } }))
      // The store lives in the workdir but is never captured; the scripted turns file was there before.
      expect([...checkpoints[0]!.files].sort()).toEqual(["gen", "gen/deep", "gen/deep/a.txt", "kept.txt", "link"])
      expect(checkpoints[0]!.notCovered).toEqual([])
      const plan = await answer(server.url, TOKEN, (client) =>
        client.agent.restore({ path: { id: "work" }, payload: { seq: checkpoints[0]!.seq, dryRun: true } }))
      expect(plan.plan.map((file) => [file.path, file.action])).toEqual([
        ["gen", "delete"],
        ["gen/deep", "delete"],
        ["gen/deep/a.txt", "delete"],
        ["kept.txt", "write"],
        ["link", "delete"]
      ])
      expect(plan).toMatchObject({ refusals: [], commandsNotUndone: [], notCovered: [] })
      const restored = await answer(server.url, TOKEN, (client) => client.agent.restore({ path: { id: "work" }, payload: { seq: checkpoints[0]!.seq } }))
      expect(restored.conversationRestored).toBe(true)
      expect(readFileSync(join(workdir, "kept.txt"), "utf8")).toBe("kept\n")
      const listing = () => readdirSync(workdir).filter((name) => !name.startsWith("sessions.db")).sort()
      expect(listing()).toEqual(["kept.txt", "turns.json"])

      // Undone over HTTP (a dry run first), then redone: the command's effects come back and go again.
      const undoPlan = await answer(server.url, TOKEN, (client) => client.agent.undo({ path: { id: "work" }, payload: { dryRun: true } }))
      expect(undoPlan.plan.map((file) => file.path)).toEqual(["gen", "gen/deep", "gen/deep/a.txt", "kept.txt", "link"])
      expect(listing()).toEqual(["kept.txt", "turns.json"])
      const undone = await request(`${server.url}/sessions/work/undo`, { token: TOKEN, method: "POST" })
      expect(undone.status).toBe(200)
      expect(listing()).toEqual(["gen", "kept.txt", "link", "turns.json"])
      const back = await answer(server.url, TOKEN, (client) => client.sessions.checkpoints({ path: { id: "work" } }))
      expect(back.checkpoints.map((checkpoint) => checkpoint.seq)).toEqual([checkpoints[0]!.seq])
      await answer(server.url, TOKEN, (client) => client.agent.redo({ path: { id: "work" }, payload: {} }))
      expect(listing()).toEqual(["kept.txt", "turns.json"])
      const nothing = await request(`${server.url}/sessions/work/redo`, { token: TOKEN, method: "POST", body: {} })
      expect(nothing.status).toBe(409)
      expect(JSON.stringify(nothing.json)).toContain("nothing_to_redo")
      expect((await request(`${server.url}/sessions/work/undo`, { token: TOKEN, method: "POST", body: { dryRun: "yes" } })).status).toBe(400)

      // The tree: the branch the restore left, named, then switched to — its files with it.
      const tree = await answer(server.url, TOKEN, (client) => client.sessions.tree({ path: { id: "work" } }))
      expect(tree.branches.map((branch) => branch.current).sort()).toEqual([false, true])
      const left = tree.branches.find((branch) => !branch.current)!.leaf
      expect(tree.checkpoints.map((checkpoint) => [checkpoint.seq, checkpoint.current])).toEqual([[checkpoints[0]!.seq, false]])
      expect(tree.undo).toMatchObject({ from: left })
      const labelled = await request(`${server.url}/sessions/work/label`, { token: TOKEN, method: "POST", body: { seq: left, label: "made things" } })
      expect(labelled.status).toBe(204)
      expect((await request(`${server.url}/sessions/work/label`, { token: TOKEN, method: "POST", body: { seq: 0, label: "x" } })).status).toBe(400)
      const switched = await answer(server.url, TOKEN, (client) => client.agent.switch({ path: { id: "work" }, payload: { leaf: left } }))
      expect(switched.conversationRestored).toBe(true)
      expect(listing()).toEqual(["gen", "kept.txt", "link", "turns.json"])
      const now = await answer(server.url, TOKEN, (client) => client.sessions.tree({ path: { id: "work" } }))
      expect(now.branches.find((branch) => branch.current)).toMatchObject({ leaf: left, label: "made things" })
      const notABranch = await request(`${server.url}/sessions/work/switch`, { token: TOKEN, method: "POST", body: { leaf: left } })
      expect(notABranch.status).toBe(409)
      expect(JSON.stringify(notABranch.json)).toContain("not_a_branch")

      // A fork of the tip into a directory of its own: the command's files, link and directories written there.
      const elsewhere = join(makeTempDir("serve-fork"), "side")
      const forked = await answer(server.url, TOKEN, (client) => client.agent.fork({ path: { id: "work" }, payload: { id: "side", workdir: elsewhere } }))
      expect(forked).toMatchObject({ sessionId: "side", workdir: elsewhere, forkedFrom: { session: "work" } })
      expect(readdirSync(elsewhere).sort()).toEqual(["gen", "kept.txt", "link", "turns.json"])
      expect(readFileSync(join(elsewhere, "gen/deep/a.txt"), "utf8")).toBe("x\n")
      expect(listing()).toEqual(["gen", "kept.txt", "link", "turns.json"])
      const forkTree = await answer(server.url, TOKEN, (client) => client.sessions.tree({ path: { id: "side" } }))
      expect(forkTree.forkedFrom).toEqual(forked.forkedFrom)
      expect((await request(`${server.url}/sessions/work/fork`, { token: TOKEN, method: "POST", body: { seq: 0 } })).status).toBe(400)
      // The session a fork shares its events with cannot be deleted before the fork.
      const notDeleted = await request(`${server.url}/sessions/work`, { token: TOKEN, method: "DELETE" })
      expect(notDeleted.status).toBe(409)
      expect(JSON.stringify(notDeleted.json)).toContain("SessionForkedError")
    } finally {
      server.worker.child.kill("SIGTERM")
      await server.worker.closed
    }
  })
})
