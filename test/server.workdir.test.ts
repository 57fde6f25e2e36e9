/**
 * The scenario: two `lite-agent serve` processes with different workdirs over one
 * PostgreSQL. A session made through the first belongs to its workdir: through the second, every
 * route that would move its files or run a turn answers 409 `SessionWorkdirError` naming both
 * directories and writes nothing (an undo through the second used to write the session's files
 * into its empty workdir); `"rehome": true` moves the session there on purpose, and the first is
 * refused from then on.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { live, makeTempDir, removeTempDirs, startServe } from "./support/processes.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"
import { request } from "./support/sse.js"

const TOKEN = "workdir-token-0123456789"
let postgres: PostgresServer
let first: { readonly url: string; readonly workdir: string }
let second: { readonly url: string; readonly workdir: string }

const serveIn = async (label: string, turns: ReadonlyArray<unknown>) => {
  const workdir = makeTempDir(label)
  const script = join(makeTempDir(`${label}-turns`), "turns.json")
  writeFileSync(script, JSON.stringify(turns))
  const { url } = await startServe([
    "--port", "0",
    "--token", TOKEN,
    "--model", `scripted:${script}`,
    "--permission-mode", "bypassPermissions",
    "--workdir", workdir,
    "--checkpointer", `postgres:${postgres.url}`
  ])
  return { url, workdir }
}

beforeAll(async () => {
  postgres = await startPostgres()
  const write = (path: string, content: string) => ({ toolCalls: [{ name: "write_file", input: { path, content } }] })
  ;[first, second] = await Promise.all([
    serveIn("workdir-first", [write("a.txt", "one\n"), { text: "a" }, write("b.txt", "two\n"), { text: "b" }]),
    serveIn("workdir-second", [{ text: "never" }])
  ])
}, 90_000)
afterAll(() => {
  for (const child of live) child.kill("SIGKILL")
  postgres?.destroy()
  removeTempDirs()
})

const post = (server: { readonly url: string }, path: string, body: unknown) =>
  request(`${server.url}${path}`, { token: TOKEN, method: "POST", body })

/** A turn through `server`, to its end (the SSE stream is read whole). */
const turn = async (server: { readonly url: string }, text: string) => {
  const response = await fetch(`${server.url}/sessions/s/messages`, {
    method: "POST",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ text })
  })
  const stream = await response.text()
  expect(response.status, stream).toBe(200)
  expect(stream).toContain("event: result")
}

describe("two servers with different workdirs over one PostgreSQL", () => {
  let restoredTo: number

  it("the second refuses every route that would move the session's files or run a turn, naming both directories; writes nothing", async () => {
    await turn(first, "write a")
    await turn(first, "write b")
    const tree = (await request(`${first.url}/sessions/s/tree`, { token: TOKEN })).json as { checkpoints: Array<{ seq: number }> }
    restoredTo = tree.checkpoints[1]!.seq
    expect(await post(first, "/sessions/s/restore", { seq: restoredTo })).toMatchObject({ status: 200, json: { restoredFiles: ["b.txt"] } })

    for (const [path, body, operation] of [
      ["/sessions/s/undo", {}, "undo"],
      ["/sessions/s/restore", { seq: restoredTo }, "restore"],
      ["/sessions/s/fork", { id: "f" }, "fork"],
      ["/sessions/s/messages", { text: "go on" }, "turn"]
    ] as const) {
      expect(await post(second, path, body), path).toMatchObject({
        status: 409,
        json: { error: "SessionWorkdirError", sessionId: "s", operation, sessionWorkdir: first.workdir, workdir: second.workdir }
      })
    }
    expect(readdirSync(second.workdir)).toEqual([])
  })

  it('moves the session when asked ("rehome": true): the undo then runs in the second, and the first is refused', async () => {
    const answer = await post(second, "/sessions/s/undo", { rehome: true })
    // The move writes what differs between the two leaves (b.txt), checked against this disk.
    expect(answer).toMatchObject({ status: 200, json: { restoredFiles: ["b.txt"] } })
    expect(readFileSync(join(second.workdir, "b.txt"), "utf8")).toBe("two\n")
    expect(await post(first, "/sessions/s/redo", {})).toMatchObject({
      status: 409,
      json: { error: "SessionWorkdirError", operation: "redo", sessionWorkdir: second.workdir, workdir: first.workdir }
    })
  })
})
