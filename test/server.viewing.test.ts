/**
 * The routes the viewer reads besides the tree: a branch's conversation (`?at=`) and the files a
 * checkpoint's turn changed, with their diffs — and what they say when there is no diff to show
 * (binary, over the cap, a link), or when the seq is not one they can answer for — and what the
 * store holds, whole and one session's share of it.
 */
import { mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createLiteAgent, fileCheckpointer, type LiteAgent, type PromiseCheckpointerWithIntegrity } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { type RunningSessionServer, serveSessions } from "../src/server.js"
import { request } from "./support/sse.js"

const TOKEN = "viewing-token-0123456789"

let dir: string
let checkpointer: PromiseCheckpointerWithIntegrity
let agent: LiteAgent
let server: RunningSessionServer
let tree: { checkpoints: Array<{ seq: number; prompt: string }> }

const seqOf = (prompt: string) => tree.checkpoints.find((checkpoint) => checkpoint.prompt === prompt)!.seq
const get = async (path: string) => request(`${server.url}${path}`, { token: TOKEN })

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "lite-agent-viewing-"))
  const workdir = join(dir, "work")
  mkdirSync(workdir)
  checkpointer = fileCheckpointer({ dir: join(dir, "sessions") })
  agent = createLiteAgent({
    model: scripted([
      { toolCalls: [{ name: "write_file", input: { path: "a.txt", content: "one\ntwo\nthree\n" } }] },
      { text: "wrote a.txt" },
      {
        toolCalls: [
          { name: "edit_file", input: { path: "a.txt", old_string: "two", new_string: "TWO" } },
          // What the file tools cannot write: a binary file, one over the diff's cap, a link.
          { name: "shell", input: { command: "printf 'a\\000b' > bin.dat && head -c 300000 /dev/zero | tr '\\000' x > big.txt && ln -s a.txt link" } }
        ]
      },
      { text: "changed things" },
      { text: "nothing this time" }
    ]),
    workdir,
    checkpointer,
    sessionId: "v"
  })
  await agent.send("first")
  await agent.send("second")
  await agent.send("third")
  // A turn of many large edits: 30 files of 2,000 lines, each diff the size of the LCS table's cap.
  const big = createLiteAgent({
    model: scripted([
      { toolCalls: [{ name: "shell", input: { command: "for i in $(seq 30); do seq 1 2000 > f$i.txt; done" } }] },
      { text: "made" },
      { toolCalls: [{ name: "shell", input: { command: "for i in $(seq 30); do seq 2 2 4000 > f$i.txt; done" } }] },
      { text: "changed" }
    ]),
    workdir: mkdtempSync(join(dir, "big-")),
    checkpointer,
    sessionId: "big"
  })
  await big.send("make")
  await big.send("change")
  await big.close()
  server = await serveSessions({ checkpointer, token: TOKEN })
  tree = (await get("/sessions/v/tree")).json as typeof tree
})

afterAll(async () => {
  await server?.close()
  await agent?.close()
  await checkpointer?.close()
  rmSync(dir, { recursive: true, force: true })
})

describe("GET /sessions/:id/checkpoints/:seq/changes", () => {
  it("a turn of many large diffs does not hold the event loop: other work runs between its files", async () => {
    const bigTree = (await get("/sessions/big/tree")).json as typeof tree
    const changed = bigTree.checkpoints.find((checkpoint) => checkpoint.prompt === "change")!.seq
    // A ticker on the event loop (the server runs in this process): how often it ran while the diffs were made.
    let ticks = 0
    let ticking = true
    const tick = () => {
      ticks++
      if (ticking) setImmediate(tick)
    }
    setImmediate(tick)
    const { json } = await get(`/sessions/big/checkpoints/${changed}/changes`).finally(() => {
      ticking = false
    })
    const files = (json as { files: Array<{ diff: Array<string> | null }> }).files
    expect(files).toHaveLength(30)
    expect(files.every((file) => file.diff !== null && file.diff.length > 2_000)).toBe(true)
    // At least once per file: the route gives the loop back between diffs.
    expect(ticks).toBeGreaterThanOrEqual(30)
  })

  it("a new file: a diff from /dev/null", async () => {
    const { json } = await get(`/sessions/v/checkpoints/${seqOf("first")}/changes`)
    expect(json).toEqual({
      seq: seqOf("first"),
      files: [{
        path: "a.txt",
        before: { kind: "absent" },
        after: { kind: "file", size: 14 },
        diff: ["--- /dev/null", "+++ b/a.txt", "@@ -0,0 +1,3 @@", "+one", "+two", "+three"],
        note: null
      }]
    })
  })

  it("an edit as a diff; a binary file, one over the cap and a link said plainly, without a diff", async () => {
    const { json } = await get(`/sessions/v/checkpoints/${seqOf("second")}/changes`)
    const files = (json as { files: Array<{ path: string; before: unknown; after: unknown; diff: unknown; note: unknown }> }).files
    expect(files.map((file) => file.path)).toEqual(["a.txt", "big.txt", "bin.dat", "link"])
    const [edited, big, binary, link] = files
    expect(edited!.diff).toEqual(["--- a/a.txt", "+++ b/a.txt", "@@ -1,3 +1,3 @@", " one", "-two", "+TWO", " three"])
    expect(big).toMatchObject({ after: { kind: "file", size: 300000 }, diff: null, note: "over 256 KiB: no diff shown" })
    expect(binary).toMatchObject({ after: { kind: "file", size: 3 }, diff: null, note: "binary: no diff shown" })
    expect(link).toMatchObject({ before: { kind: "absent" }, after: { kind: "link", target: "a.txt" }, diff: null, note: null })
  })

  it("a turn that changed nothing lists nothing; a seq that is not a checkpoint is a 400 that says so", async () => {
    expect((await get(`/sessions/v/checkpoints/${seqOf("third")}/changes`)).json).toEqual({ seq: seqOf("third"), files: [] })
    const notACheckpoint = await get(`/sessions/v/checkpoints/${seqOf("third") + 1}/changes`)
    expect(notACheckpoint.status).toBe(400)
    expect(notACheckpoint.json).toMatchObject({ error: "BadRequest", message: expect.stringContaining("is not a checkpoint") })
    for (const bad of ["0", "-1", "two", "1.5"]) {
      const answer = await get(`/sessions/v/checkpoints/${bad}/changes`)
      expect(answer.status).toBe(400)
      expect(answer.json).toMatchObject({ error: "BadRequest", message: expect.stringContaining("seq must be a positive integer") })
    }
    expect((await get("/sessions/nobody/checkpoints/1/changes")).status).toBe(404)
  })
})

describe("GET /sessions/:id/conversation", () => {
  it("at a checkpoint: the messages up to the end of its turn; without one, the whole current branch", async () => {
    const contents = (json: unknown) =>
      (json as { entries: Array<{ event: { _tag: string; content: unknown } }> }).entries
        .filter((entry) => entry.event._tag === "UserMessage")
        .map((entry) => entry.event.content)
    const atFirst = await get(`/sessions/v/conversation?at=${seqOf("first")}`)
    expect(contents(atFirst.json)).toEqual(["first"])
    expect(atFirst.json).toMatchObject({ at: seqOf("first"), compaction: null })
    expect(contents((await get("/sessions/v/conversation")).json)).toEqual(["first", "second", "third"])
    const bad = await get("/sessions/v/conversation?at=nope")
    expect(bad.status).toBe(400)
    expect(bad.json).toMatchObject({ error: "BadRequest", message: 'at must be a positive integer (a seq), got "nope"' })
  })
})

describe("GET /store/usage and GET /sessions/:id/usage", () => {
  it("the store's usage as du() gives it; a session's row of it; an unknown session 404, a bad id 400", async () => {
    const usage = await checkpointer.du()
    const whole = await get("/store/usage")
    expect(whole.status).toBe(200)
    expect(whole.json).toEqual(usage)
    expect((whole.json as { sessions: Array<{ id: string }> }).sessions.map((session) => session.id).sort()).toEqual(["big", "v"])

    const v = await get("/sessions/v/usage")
    expect(v.status).toBe(200)
    // One session's usage comes with its live branches; the store's with them when asked.
    const byBranch = await checkpointer.du({ branches: true })
    expect(v.json).toEqual(byBranch.sessions.find((session) => session.id === "v"))
    expect((v.json as { branches: Array<{ current: boolean }> }).branches.filter((branch) => branch.current)).toHaveLength(1)
    expect((await get("/store/usage?branches=true")).json).toEqual(byBranch)
    expect((await get("/store/usage?branches=false")).json).toEqual(usage)
    const badParam = await get("/store/usage?branches=yes")
    expect(badParam.status).toBe(400)
    expect(v.json).toMatchObject({ id: "v", referenced: { objects: expect.any(Number), bytes: expect.any(Number) } })
    const row = v.json as { logBytes: number; referenced: { objects: number }; shared: { objects: number }; own: { objects: number } }
    expect(row.referenced.objects).toBeGreaterThan(0)
    expect(row.logBytes).toBeGreaterThan(0)
    expect(row.shared.objects + row.own.objects).toBe(row.referenced.objects)

    const unknown = await get("/sessions/nobody/usage")
    expect(unknown.status).toBe(404)
    expect(unknown.json).toEqual({ error: "SessionNotFound", message: 'there is no session "nobody"' })
    const bad = await get("/sessions/..hidden/usage")
    expect(bad.status).toBe(400)
    expect(bad.json).toMatchObject({ error: "BadRequest" })
  })

  it("a store with a quota says how much of it the store holds, and that it is reached", async () => {
    const limited = fileCheckpointer({ dir: join(dir, "sessions"), maxStoreBytes: 1 })
    const quotaServer = await serveSessions({ checkpointer: limited, token: TOKEN })
    try {
      const usage = await request(`${quotaServer.url}/store/usage`, { token: TOKEN })
      expect(usage.status).toBe(200)
      const { quota, objects, logBytes } = usage.json as { quota: unknown; objects: { bytes: number }; logBytes: number }
      expect(quota).toEqual({ maxStoreBytes: 1, storeBytes: objects.bytes + logBytes, reached: true })
      // Without a quota, the field is absent.
      expect((await get("/store/usage")).json).not.toHaveProperty("quota")
    } finally {
      await quotaServer.close()
      await limited.close()
    }
  })
})
