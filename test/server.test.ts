/**
 * `@lite-agent/sdk/server` with real HTTP on loopback, its typed client (derived from
 * SessionApi) and a real SSE client (streamed): the token, CORS, sessions as JSON and the error
 * statuses (each pinned once with a raw request), the public OpenAPI description, a session's
 * events followed live and resumed by Last-Event-ID across forced reconnects, a truncate as
 * `reset`, 200 clients at once, and a client too slow to keep up cut off with a reason.
 */
import { connect } from "node:net"
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Effect, Layer } from "effect"
import { sqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { Checkpointer, makeCheckpointer, MemoryCheckpointer } from "../src/core.js"
import { toPromiseCheckpointer } from "../src/facade/checkpointer.js"
import { ConfigurationError, type PromiseCheckpointerWithIntegrity, UserMessage } from "../src/index.js"
import { BadRequest, NoAgent, type RunningSessionServer, serveSessions, SessionNotFound, Unauthorized } from "../src/server.js"
import { makeTempDir, removeTempDirs } from "./support/processes.js"
import { answer, refusal } from "./support/sessionClient.js"
import { connectSse, request, type SseMessage } from "./support/sse.js"

const TOKEN = "test-token-0123456789"
const prompt = (content: string) => new UserMessage({ content, origin: "user" })

let checkpointer: PromiseCheckpointerWithIntegrity
let server: RunningSessionServer
beforeAll(async () => {
  checkpointer = sqliteCheckpointer({ file: join(makeTempDir("server"), "sessions.db") })
  server = await serveSessions({ checkpointer, token: TOKEN, heartbeatMs: 500, sseBufferEvents: 20, slowClientMs: 1000 })
})
afterAll(async () => {
  await server?.close()
  await checkpointer?.close()
  removeTempDirs()
})

const url = (path: string) => `${server.url}${path}`
const contentOf = (message: SseMessage) => String((JSON.parse(message.data) as { event: { content: string } }).event.content)

describe("the token", () => {
  it("every route answers 401 without it or with a wrong one", async () => {
    for (const path of ["/sessions", "/sessions/x", "/sessions/x/events", "/nowhere"]) {
      expect((await request(url(path))).status).toBe(401)
      expect((await request(url(path), { token: "wrong-token-0123456789" })).status).toBe(401)
    }
    expect(await request(url("/sessions"))).toMatchObject({ json: { error: "Unauthorized" } })
  })

  it("a server on a non-loopback address without a token of its own is refused; a generated token is long and random", async () => {
    await expect(serveSessions({ checkpointer, host: "0.0.0.0" })).rejects.toBeInstanceOf(ConfigurationError)
    const generated = await serveSessions({ checkpointer })
    try {
      expect(generated.token.length).toBeGreaterThanOrEqual(32)
      expect(await answer(generated.url, generated.token, (client) => client.sessions.list())).toMatchObject({ sessions: expect.any(Array) })
    } finally {
      await generated.close()
    }
  })
})

describe("CORS", () => {
  it("no CORS headers unless origins are configured; then only for those, preflights answered without the token", async () => {
    const plain = await fetch(url("/sessions"), { headers: { authorization: `Bearer ${TOKEN}`, origin: "https://ui.example" } })
    expect([...plain.headers.keys()].filter((name) => name.startsWith("access-control"))).toEqual([])
    const open = await serveSessions({ checkpointer, token: TOKEN, corsOrigins: ["https://ui.example"] })
    try {
      const allowed = await fetch(`${open.url}/sessions`, { headers: { authorization: `Bearer ${TOKEN}`, origin: "https://ui.example" } })
      expect(allowed.headers.get("access-control-allow-origin")).toBe("https://ui.example")
      const other = await fetch(`${open.url}/sessions`, { headers: { authorization: `Bearer ${TOKEN}`, origin: "https://elsewhere.example" } })
      expect(other.headers.get("access-control-allow-origin")).toBeNull()
      const preflight = await fetch(`${open.url}/sessions/x`, { method: "OPTIONS", headers: { origin: "https://ui.example" } })
      expect(preflight.status).toBe(204)
      expect(preflight.headers.get("access-control-allow-headers")).toContain("authorization")
      const refused = await fetch(`${open.url}/sessions`, { headers: { origin: "https://ui.example" } })
      expect([refused.status, refused.headers.get("access-control-allow-origin")]).toEqual([401, "https://ui.example"])
    } finally {
      await open.close()
    }
  })
})

describe("sessions as JSON", () => {
  it("list, one session, its checkpoints; 404 for an unknown one, 400 for a bad id, DELETE", async () => {
    await checkpointer.append("json-a", [prompt("first"), prompt("second")])
    const listed = await answer(server.url, TOKEN, (client) => client.sessions.list())
    expect(JSON.stringify(listed)).toContain(`"id":"json-a"`)
    const one = await answer(server.url, TOKEN, (client) => client.sessions.get({ path: { id: "json-a" } }))
    expect(one).toMatchObject({ id: "json-a", head: 2, stats: { events: 2 } })
    const checkpoints = await answer(server.url, TOKEN, (client) => client.sessions.checkpoints({ path: { id: "json-a" } }))
    expect(checkpoints).toMatchObject({ checkpoints: [{ seq: 1, prompt: "first" }, { seq: 2, prompt: "second" }], interruptedRestore: null })
    // The wire format of each error status, pinned with raw requests.
    expect(await request(url("/sessions/nope"), { token: TOKEN })).toMatchObject({ status: 404, json: { error: "SessionNotFound" } })
    expect(await request(url("/sessions/..hidden"), { token: TOKEN })).toMatchObject({ status: 400, json: { error: "BadRequest" } })
    expect(await request(url("/sessions/json-a/events?sinceSeq=-1"), { token: TOKEN })).toMatchObject({ status: 400 })
    expect(await request(url("/sessions/json-a/events?sinceSeq=abc"), { token: TOKEN })).toMatchObject({ status: 400 })
    // Without an agent, the agent's routes are not there.
    expect(await request(url("/sessions/json-a/messages"), { token: TOKEN, method: "POST", body: { text: "hi" } })).toMatchObject({
      status: 404,
      json: { error: "NoAgent" }
    })
    await answer(server.url, TOKEN, (client) => client.sessions.delete({ path: { id: "json-a" } }))
    expect(await refusal(server.url, TOKEN, (client) => client.sessions.get({ path: { id: "json-a" } }))).toBeInstanceOf(SessionNotFound)
    expect(await checkpointer.head("json-a")).toBe(0)
  })

  it("the typed client gets each error as the server's own error class, with its fields", async () => {
    await checkpointer.append("typed", [prompt("only")])
    const notFound = await refusal(server.url, TOKEN, (client) => client.sessions.checkpoints({ path: { id: "nope" } }))
    expect(notFound).toBeInstanceOf(SessionNotFound)
    expect(notFound).toMatchObject({ message: `there is no session "nope"` })
    expect(await refusal(server.url, TOKEN, (client) => client.sessions.get({ path: { id: "..hidden" } }))).toBeInstanceOf(BadRequest)
    expect(await refusal(server.url, TOKEN, (client) => client.agent.undoRestore({ path: { id: "typed" } }))).toBeInstanceOf(NoAgent)
    expect(await refusal(server.url, "wrong-token-0123456789", (client) => client.sessions.list())).toBeInstanceOf(Unauthorized)
  })
})

describe("the OpenAPI description", () => {
  it("GET /openapi.json names every route and the bearer token, and needs no token itself (it describes routes, not sessions)", async () => {
    const described = await request(url("/openapi.json"))
    expect(described.status).toBe(200)
    const spec = described.json as {
      paths: Record<string, Record<string, unknown>>
      components: { securitySchemes: Record<string, { type: string; scheme: string }> }
    }
    const routes = Object.entries(spec.paths).flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`))
    expect(routes.sort()).toEqual([
      "DELETE /sessions/{id}",
      "GET /sessions",
      "GET /sessions/{id}",
      "GET /sessions/{id}/checkpoints",
      "GET /sessions/{id}/checkpoints/{seq}/changes",
      "GET /sessions/{id}/conversation",
      "GET /sessions/{id}/events",
      "GET /sessions/{id}/tree",
      "GET /sessions/{id}/usage",
      "GET /store/usage",
      "POST /sessions/{id}/compact",
      "POST /sessions/{id}/fork",
      "POST /sessions/{id}/label",
      "POST /sessions/{id}/messages",
      "POST /sessions/{id}/permissions/{requestId}",
      "POST /sessions/{id}/redo",
      "POST /sessions/{id}/restore",
      "POST /sessions/{id}/restore/undo",
      "POST /sessions/{id}/switch",
      "POST /sessions/{id}/undo"
    ])
    expect(Object.values(spec.components.securitySchemes)).toEqual([expect.objectContaining({ type: "http", scheme: "bearer" })])
    expect(JSON.stringify(spec.paths["/sessions/{id}/restore"])).toContain(`"409"`)
    // Every operation needs the token (an empty `security` would say it needs nothing).
    const operations = Object.values(spec.paths).flatMap((item) => Object.values(item)) as Array<{ security: Array<unknown>; parameters: Array<Parameter> }>
    expect(operations.length).toBe(routes.length)
    for (const operation of operations) expect(operation.security).toEqual([{ bearer: [] }])
    // Parameters typed as the server reads them; the follower's resume point declared.
    type Parameter = { name: string; in: string; schema: { type: string; minimum?: number } }
    const parameter = (path: string, name: string) =>
      ((spec.paths[path]!["get"] as { parameters: Array<Parameter> }).parameters).find((each) => each.name === name)
    expect(parameter("/sessions/{id}/checkpoints/{seq}/changes", "seq")).toMatchObject({ in: "path", schema: { type: "integer", minimum: 1 } })
    expect(parameter("/sessions/{id}/conversation", "at")).toMatchObject({ in: "query", schema: { type: "integer", minimum: 1 } })
    expect(parameter("/sessions/{id}/events", "sinceSeq")).toMatchObject({ in: "query", schema: { type: "integer", minimum: 0 } })
    expect(parameter("/sessions/{id}/events", "generation")).toMatchObject({ in: "query", schema: { type: "string" } })
    expect(parameter("/sessions/{id}/events", "last-event-id")).toMatchObject({ in: "header", schema: { type: "integer", minimum: 0 } })
  })
})

describe("a session's events over SSE", () => {
  it("10,000 events followed across forced reconnects with Last-Event-ID: none lost, none repeated", async () => {
    const session = "many"
    await checkpointer.append(session, [prompt("0")])
    const total = 10_000
    const writing = (async () => {
      for (let next = 1; next < total; next += 250) {
        await checkpointer.append(session, Array.from({ length: Math.min(250, total - next) }, (_, i) => prompt(String(next + i))))
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
    })()
    const seen: Array<number> = []
    let lastEventId: string | undefined
    let reconnects = 0
    while (seen.length < total) {
      const connection = await connectSse(url(`/sessions/${session}/events`), { token: TOKEN, ...(lastEventId === undefined ? {} : { lastEventId }) })
      expect(connection.status).toBe(200)
      expect(connection.headers["content-type"]).toContain("text/event-stream")
      // Drop the connection after a random number of events, as a flaky network would.
      const dropAfter = 200 + Math.floor(Math.random() * 1500)
      let taken = 0
      for await (const message of connection.messages) {
        expect(message.event).toBe("event")
        seen.push(Number(message.id))
        expect(contentOf(message)).toBe(String(Number(message.id) - 1))
        lastEventId = message.id
        if (++taken >= dropAfter || seen.length >= total) break
      }
      connection.abort()
      reconnects++
    }
    await writing
    expect(seen).toEqual(Array.from({ length: total }, (_, i) => i + 1))
    expect(reconnects).toBeGreaterThan(3)
  })

  it("a session with no events yet is followed from before its first event", async () => {
    const session = "not-yet"
    const connection = await connectSse(url(`/sessions/${session}/events`), { token: TOKEN })
    const first = connection.messages[Symbol.asyncIterator]().next()
    await checkpointer.append(session, [prompt("the first")])
    const message = await first
    connection.abort()
    expect(message.done).toBe(false)
    expect(message.value && `${message.value.id}:${contentOf(message.value)}`).toBe("1:the first")
  })

  it("?sinceSeq= starts after it; a truncate is a `reset` with id 0, then the new log", async () => {
    const session = "rewritten"
    await checkpointer.append(session, [prompt("a"), prompt("b"), prompt("c")])
    const connection = await connectSse(url(`/sessions/${session}/events?sinceSeq=1`), { token: TOKEN })
    const messages: Array<string> = []
    for await (const message of connection.messages) {
      messages.push(message.event === "reset" ? `reset ${message.id} ${message.data}` : `${message.id}:${contentOf(message)}`)
      if (messages.length === 2) await checkpointer.truncate(session, 1, 3)
      if (messages.length === 4) break
    }
    connection.abort()
    const head = await checkpointer.head(session)
    expect(head).toBe(1)
    expect(messages[0]).toBe("2:b")
    expect(messages[1]).toBe("3:c")
    expect(messages[2]).toMatch(/^reset 0 \{"head":1,"generation":"\d+"\}$/)
    expect(messages[3]).toBe("1:a")
  })

  it("with ?generation=, a log rewritten and grown back past Last-Event-ID while the client was away is a reset first", async () => {
    const session = "regrown"
    await checkpointer.append(session, [prompt("a"), prompt("b"), prompt("c")])
    const first = await connectSse(url(`/sessions/${session}/events`), { token: TOKEN })
    let generation = ""
    for await (const message of first.messages) {
      generation = (JSON.parse(message.data) as { generation: string }).generation
      if (message.id === "2") break
    }
    first.abort()
    await checkpointer.truncate(session, 1)
    await checkpointer.append(session, [prompt("x"), prompt("y"), prompt("z")])
    const again = await connectSse(url(`/sessions/${session}/events?generation=${generation}`), { token: TOKEN, lastEventId: "2" })
    const messages: Array<string> = []
    for await (const message of again.messages) {
      messages.push(message.event === "reset" ? "reset" : `${message.id}:${contentOf(message)}`)
      if (messages.length === 5) break
    }
    again.abort()
    expect(messages).toEqual(["reset", "1:a", "2:x", "3:y", "4:z"])
  })

  it("a client at the head is connected at once, not at the first event or heartbeat", async () => {
    // A server whose heartbeat would come only after the test's time limit.
    const quiet = await serveSessions({ checkpointer, token: TOKEN, heartbeatMs: 600_000 })
    try {
      await checkpointer.append("connected-at-head", [prompt("only")])
      const connection = await connectSse(`${quiet.url}/sessions/connected-at-head/events`, { token: TOKEN, lastEventId: "1" })
      expect(connection.status).toBe(200)
      const next = connection.messages[Symbol.asyncIterator]().next()
      await checkpointer.append("connected-at-head", [prompt("after connecting")])
      const message = (await next).value as SseMessage
      expect([message.id, contentOf(message)]).toEqual(["2", "after connecting"])
      connection.abort()
    } finally {
      await quiet.close()
    }
  })

  it("200 clients at once each get every event, in order", async () => {
    const session = "crowd"
    await checkpointer.append(session, [prompt("1")])
    const clients = await Promise.all(Array.from({ length: 200 }, () => connectSse(url(`/sessions/${session}/events`), { token: TOKEN })))
    expect(clients.map((client) => client.status)).toEqual(clients.map(() => 200))
    const reading = clients.map(async (client) => {
      const ids: Array<number> = []
      for await (const message of client.messages) {
        ids.push(Number(message.id))
        if (ids.length === 20) break
      }
      client.abort()
      return ids
    })
    for (let i = 2; i <= 20; i++) await checkpointer.append(session, [prompt(String(i))])
    const results = await Promise.all(reading)
    for (const ids of results) expect(ids).toEqual(Array.from({ length: 20 }, (_, i) => i + 1))
  })

  it("a client that stops reading is cut off with `event: close` (after what was buffered) instead of growing the server's memory", async () => {
    const session = "slow"
    const big = "x".repeat(64 * 1024)
    await checkpointer.append(session, [prompt(`0 ${big}`)])
    // A raw socket that sends the request and then does not read.
    const socket = connect(server.port, "127.0.0.1")
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()))
    socket.pause()
    socket.write(`GET /sessions/${session}/events HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TOKEN}\r\n\r\n`)
    const total = 800 // about 50 MiB of events: far more than the socket buffers and the 20-event buffer hold
    for (let i = 1; i < total; i += 50) {
      await checkpointer.append(session, Array.from({ length: 50 }, (_, k) => prompt(`${i + k} ${big}`)))
    }
    // Longer than slowClientMs with the buffer full: the server gives up on this client.
    await new Promise((resolve) => setTimeout(resolve, 2500))
    socket.resume()
    // Until the response ends: the last chunk of a chunked body (the connection may stay open for the next request).
    const received = await new Promise<string>((resolve) => {
      const chunks: Array<Buffer> = []
      const done = () => resolve(Buffer.concat(chunks).toString("utf8"))
      socket.on("data", (chunk: Buffer) => {
        chunks.push(chunk)
        if (Buffer.concat(chunks.slice(-2)).toString("latin1").endsWith("\r\n0\r\n\r\n")) done()
      })
      socket.on("end", done)
      socket.on("error", done)
    })
    socket.destroy()
    const ids = [...received.matchAll(/^id: (\d+)$/gm)].map((match) => Number(match[1]))
    expect(ids.length).toBeGreaterThan(0)
    expect(ids).toEqual(Array.from({ length: ids.length }, (_, i) => i + 1))
    expect(ids.length).toBeLessThan(total)
    expect(received).toContain("event: close")
    expect(received).toContain("slow_client")
    console.log(`slow client: ${ids.length} of ${total} events (64 KiB each) reached it before the server closed the stream`)
  })
})

describe("clients of one session share one follower", () => {
  it("50 clients at the head: each append costs the store a few looks, not one per client", async () => {
    let versions = 0
    const counted = Layer.scoped(
      Checkpointer,
      Effect.gen(function*() {
        const driver = yield* MemoryCheckpointer.makeDriver
        return yield* makeCheckpointer({
          ...driver,
          version: (sessionId) => Effect.sync(() => versions++).pipe(Effect.zipRight(driver.version(sessionId)))
        })
      })
    )
    const store = toPromiseCheckpointer(counted)
    const shared = await serveSessions({ checkpointer: store, token: TOKEN })
    try {
      await store.append("s", [prompt("0")])
      const clients = await Promise.all(Array.from({ length: 50 }, () => connectSse(`${shared.url}/sessions/s/events`, { token: TOKEN })))
      const received = clients.map(() => [] as Array<number>)
      const reading = clients.map(async (client, index) => {
        for await (const message of client.messages) {
          received[index]!.push(Number(message.id))
          if (received[index]!.length === 21) break
        }
        client.abort()
      })
      while (received.some((ids) => ids.length < 1)) await new Promise((resolve) => setTimeout(resolve, 10))
      const before = versions
      for (let i = 1; i <= 20; i++) {
        await store.append("s", [prompt(String(i))])
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
      await Promise.all(reading)
      for (const ids of received) expect(ids).toEqual(Array.from({ length: 21 }, (_, i) => i + 1))
      const looks = versions - before
      // Two `version`s a look; one follower per client would make at least 50 × 20 × 2.
      console.log(`50 clients, 20 appends: ${looks} version calls`)
      expect(looks).toBeLessThan(200)
    } finally {
      await shared.close()
      await store.close()
    }
  })
})
