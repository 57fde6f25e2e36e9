/**
 * Following a session while another process writes it, on every persistent backend: a writer
 * process (test/workers/writer.ts) appends; the follower — a checkpointer of this process —
 * hears of it through the backend's own signal (file-system events, SQLite's data_version,
 * PostgreSQL's notifications — it polls only every 10 minutes here, so nothing else could
 * deliver), gets every event once and in order, and gets a `reset` when a third checkpointer
 * truncates the session.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { FollowItem, PromiseCheckpointerWithIntegrity, UserMessage } from "../src/index.js"
import { live, makeTempDir, removeTempDirs, startWorker } from "./support/processes.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"
import { openStore, postgresLocation, type StoreBackend } from "./support/stores.js"
import { command, nextReply } from "./support/writers.js"

let server: PostgresServer
beforeAll(async () => {
  server = await startPostgres()
})
afterAll(() => {
  for (const child of live) child.kill("SIGKILL")
  server?.destroy()
  removeTempDirs()
})

const locationFor = async (backend: StoreBackend) => {
  switch (backend) {
    case "file":
      return makeTempDir("follow-file")
    case "sqlite":
      return `${makeTempDir("follow-sqlite")}/sessions.db`
    case "postgres":
      return postgresLocation(server.url, `follow_${Date.now().toString(36)}`)
  }
}

const describeItem = (item: FollowItem) =>
  item.type === "event" ? `${item.stored.seq}:${String((item.stored.event as UserMessage).content)}` : `reset ${item.head}`

/** Follow `session` through `checkpointer`, collecting items until `stop` aborts. */
const collect = (checkpointer: PromiseCheckpointerWithIntegrity, session: string, signal: AbortSignal) => {
  const items: Array<string> = []
  const done = (async () => {
    // No polling to speak of: only the backend's own signal can deliver in time.
    for await (const item of checkpointer.follow(session, { signal, pollMs: 600_000 })) items.push(describeItem(item))
  })()
  return { items, done }
}

const until = async (what: string, condition: () => boolean, timeoutMs = 30_000) => {
  const started = Date.now()
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

describe.each(["file", "sqlite", "postgres"] as const)("following a session written by another process: %s", (backend) => {
  it("every event once and in order as the writer appends; a truncate by a third checkpointer is a reset, then the new log", async () => {
    const location = await locationFor(backend)
    const session = "followed"
    const follower = await openStore(backend, location)
    const other = await openStore(backend, location)
    const writer = startWorker("writer.ts", [backend, location, "0"], { ipc: true })
    const stop = new AbortController()
    try {
      expect(await writer.nextMessage()).toMatchObject({ type: "ready" })
      const { items, done } = collect(follower, session, stop.signal)
      const count = 300
      command(writer, { type: "retry", session, count })
      await nextReply(writer, "retry-result")
      await until(`${count} events`, () => items.length >= count)
      expect(items).toEqual(Array.from({ length: count }, (_, i) => `${i + 1}:w0:${i}`))

      expect(await other.truncate(session, 100, count)).toBe(100)
      await until("the reset and the truncated log", () => items.length >= count + 1 + 100)
      expect(items[count]).toBe("reset 100")
      expect(items.slice(count + 1)).toEqual(Array.from({ length: 100 }, (_, i) => `${i + 1}:w0:${i}`))

      command(writer, { type: "retry", session, count: 5 })
      await nextReply(writer, "retry-result")
      await until("the appends after the truncate", () => items.length >= count + 1 + 105)
      expect(items.slice(count + 101)).toEqual(Array.from({ length: 5 }, (_, i) => `${101 + i}:w0:${i}`))
      stop.abort()
      await done
      expect(items).toHaveLength(count + 106)
    } finally {
      stop.abort()
      if (writer.child.connected) command(writer, { type: "exit" })
      await writer.closed
      await follower.close()
      await other.close()
    }
  })
})
