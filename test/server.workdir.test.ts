/**
 * A server whose workdir is not the session's (the issue: two `lite-agent serve` over one
 * database, an undo through the second wrote the session's files into its empty workdir): the
 * session made by an agent in one directory, then served from another — every route that moves
 * files or runs a turn answers 409 `SessionWorkdirError` naming both directories, and writes
 * nothing; `"rehome": true` moves the session on purpose.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createLiteAgent } from "../src/index.js"
import { sqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { scripted } from "../src/provider.js"
import { live, makeTempDir, removeTempDirs, startServe } from "./support/processes.js"
import { request } from "./support/sse.js"

const TOKEN = "workdir-token-0123456789"
let url: string
let home: string
let served: string
let restoredTo: number
let database: string

beforeAll(async () => {
  home = makeTempDir("workdir-home")
  served = makeTempDir("workdir-served")
  database = join(makeTempDir("workdir-db"), "sessions.db")
  // The session, made at home: two turns, then restored to before the second.
  const agent = createLiteAgent({
    model: scripted([
      { toolCalls: [{ name: "write_file", input: { path: "a.txt", content: "one\n" } }] },
      { text: "a" },
      { toolCalls: [{ name: "write_file", input: { path: "b.txt", content: "two\n" } }] },
      { text: "b" }
    ]),
    workdir: home,
    checkpointer: sqliteCheckpointer({ file: database }),
    sessionId: "s"
  })
  await agent.send("write a")
  await agent.send("write b")
  restoredTo = (await agent.listCheckpoints("s"))[1]!.seq
  await agent.restore("s", restoredTo)
  await agent.close()
  const turns = join(makeTempDir("workdir-turns"), "turns.json")
  writeFileSync(turns, JSON.stringify([{ text: "hello from the served directory" }]))
  ;({ url } = await startServe([
    "--port", "0",
    "--token", TOKEN,
    "--model", `scripted:${turns}`,
    "--permission-mode", "bypassPermissions",
    "--workdir", served,
    "--checkpointer", `sqlite:${database}`
  ]))
}, 60_000)
afterAll(() => {
  for (const child of live) child.kill("SIGKILL")
  removeTempDirs()
})

const post = (path: string, body: unknown) => request(`${url}${path}`, { token: TOKEN, method: "POST", body })

describe("a server in another workdir than the session's", () => {
  it("refuses every route that would move its files or run a turn, naming both directories; writes nothing", async () => {
    for (const [path, body, operation] of [
      ["/sessions/s/undo", {}, "undo"],
      ["/sessions/s/restore", { seq: restoredTo }, "restore"],
      ["/sessions/s/fork", { id: "f" }, "fork"],
      ["/sessions/s/messages", { text: "go on" }, "turn"]
    ] as const) {
      const answer = await post(path, body)
      expect(answer, path).toMatchObject({
        status: 409,
        json: { error: "SessionWorkdirError", sessionId: "s", operation, sessionWorkdir: home, workdir: served }
      })
    }
    expect(readdirSync(served)).toEqual([])
  })

  it('moves the session when asked ("rehome": true): the undo then runs here, and the home directory is refused', async () => {
    const answer = await post("/sessions/s/undo", { rehome: true })
    // The move writes what differs between the two leaves (b.txt), checked against this disk.
    expect(answer).toMatchObject({ status: 200, json: { restoredFiles: ["b.txt"] } })
    expect(readFileSync(join(served, "b.txt"), "utf8")).toBe("two\n")
    const atHome = createLiteAgent({ model: scripted([{ text: "never" }]), workdir: home, checkpointer: sqliteCheckpointer({ file: database }) })
    try {
      await expect(atHome.redo("s")).rejects.toMatchObject({ _tag: "SessionWorkdirError", sessionWorkdir: served, workdir: home })
    } finally {
      await atHome.close()
    }
  })
})
