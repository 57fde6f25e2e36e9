/**
 * The served side of the server benchmark, in a process of its own so that its CPU time and
 * peak memory are its own:
 *
 *   node --import tsx bench/server-process.ts lite '{"backend":"file","store":"<dir>"}'
 *   node --import tsx bench/server-process.ts bare '{"sessions":["s0"],"events":2000,"perSecond":80}'
 *
 * `lite` serves a store with `serveSessions` (default settings); the appends come from another
 * process. `bare` is the baseline: a plain `node:http` server that, on "go" (a line on stdin),
 * makes the same events at the same rate and writes each one's SSE frame — the frame lite-agent
 * sends — to every client of its session with `res.write`, and answers `GET /sessions`.
 * Both print `ready <url>`.
 */
import { createServer, type ServerResponse } from "node:http"
import { createInterface } from "node:readline"
import { postgresCheckpointer } from "../src/checkpoint-postgres.js"
import { sqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { encodeStoredEvent, jsonText } from "../src/core/encoding.js"
import { fileCheckpointer, type PromiseCheckpointer, UserMessage } from "../src/index.js"
import { serveSessions } from "../src/server.js"

export const BENCH_TOKEN = "bench-token-3f9c2a7be1d04c8a9e55b2d17f6a0c34"

/** Wall-clock milliseconds with sub-millisecond resolution: comparable across processes. */
export const wallNow = () => performance.timeOrigin + performance.now()

/** The event the writer appends: its content carries when it was sent. */
export const timedEvent = () => new UserMessage({ content: `t${wallNow()}`, origin: "user" })

export const openStore = (backend: string, store: string): PromiseCheckpointer => {
  switch (backend) {
    case "file":
      return fileCheckpointer({ dir: store })
    case "sqlite":
      return sqliteCheckpointer({ file: store })
    case "postgres": {
      const [url, schema] = store.split(" ")
      return postgresCheckpointer({ url: url!, schema: schema! })
    }
    default:
      throw new Error(`unknown backend ${backend}`)
  }
}

const serveLite = async (config: { readonly backend: string; readonly store: string }) => {
  const checkpointer = openStore(config.backend, config.store)
  const server = await serveSessions({ checkpointer, token: BENCH_TOKEN })
  // An orderly exit on SIGINT, so a `--cpu-prof` run writes its profile.
  process.on("SIGINT", () => process.exit(0))
  console.log(`ready ${server.url}`)
}

const encoder = new TextEncoder()
/** The frame the server writes for an event (sse.ts's followFrame, spelled out so the baseline loads none of the server). */
const frameOf = (seq: number, generation: string) => {
  const data = { ...encodeStoredEvent({ seq, ts: Date.now(), event: timedEvent() }), generation }
  return encoder.encode(`id: ${seq}\nevent: event\ndata: ${jsonText(data)}\n\n`)
}

const serveBare = async (config: { readonly sessions: ReadonlyArray<string>; readonly events: number; readonly perSecond: number }) => {
  const clients = new Map<string, Set<ServerResponse>>(config.sessions.map((session) => [session, new Set()]))
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://localhost").pathname
    if (path === "/sessions") {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ sessions: config.sessions.map((id) => ({ id, mtime: new Date().toISOString() })) }))
      return
    }
    const session = /^\/sessions\/([^/]+)\/events$/.exec(path)?.[1]
    const followers = session === undefined ? undefined : clients.get(session)
    if (followers === undefined) {
      res.writeHead(404).end()
      return
    }
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache, no-transform" })
    res.write(": connected\n\n")
    followers.add(res)
    res.on("close", () => followers.delete(res))
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  console.log(`ready http://127.0.0.1:${typeof address === "object" && address !== null ? address.port : 0}`)
  const lines = createInterface({ input: process.stdin })
  for await (const line of lines) if (line === "go") break
  const heads = new Map(config.sessions.map((session) => [session, 1]))
  const started = performance.now()
  for (let i = 0; i < config.events; i++) {
    const wait = started + (i * 1000) / config.perSecond - performance.now()
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
    const session = config.sessions[i % config.sessions.length]!
    const seq = heads.get(session)! + 1
    heads.set(session, seq)
    const frame = frameOf(seq, "bench")
    for (const res of clients.get(session)!) res.write(frame)
  }
  console.log("written")
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [mode, config] = [process.argv[2], JSON.parse(process.argv[3] ?? "{}")]
  if (mode === "lite") await serveLite(config)
  else await serveBare(config)
}
