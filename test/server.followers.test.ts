/**
 * `lite-agent serve` (file backend) in its own process under hundreds of SSE followers: 300
 * clients follow one session while this process appends to the same store, as another process
 * would; every client gets every event exactly once and in order, and the server answers other
 * routes meanwhile. Also the server's edges: an over-limit body is not drained after its 413,
 * the bearer scheme is case-insensitive, a token reachable from the network must be strong.
 */
import { connect } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { ConfigurationError, fileCheckpointer, memoryCheckpointer, type PromiseCheckpointer, UserMessage } from "../src/index.js"
import { serveSessions } from "../src/server.js"
import { live, makeTempDir, removeTempDirs, startServe } from "./support/processes.js"
import { connectSse, request } from "./support/sse.js"

const TOKEN = "followers-token-0123456789abcdef"
const prompt = (content: string) => new UserMessage({ content, origin: "user" })

let dir: string
let url: string
let writer: PromiseCheckpointer
beforeAll(async () => {
  dir = makeTempDir("followers")
  writer = fileCheckpointer({ dir })
  ;({ url } = await startServe(["--port", "0", "--token", TOKEN, "--checkpointer", `file:${dir}`]))
})
afterAll(async () => {
  await writer?.close()
  for (const child of live) child.kill("SIGKILL")
  removeTempDirs()
})

describe("hundreds of followers", () => {
  it("300 clients follow one session while another process appends: each gets every event once, in order; other routes answer meanwhile", async () => {
    const session = "watched"
    await writer.append(session, [prompt("1")])
    const clients = 300
    const total = 300
    const connections = await Promise.all(
      Array.from({ length: clients }, () => connectSse(`${url}/sessions/${session}/events`, { token: TOKEN, lastEventId: "1" }))
    )
    expect(connections.every((connection) => connection.status === 200)).toBe(true)
    const reading = connections.map(async (connection) => {
      // Checked once at the end: 300 clients' worth of assertions per event would load this process more than the server.
      const ids: Array<number> = []
      const wrong: Array<string> = []
      for await (const message of connection.messages) {
        const id = Number(message.id)
        const data = JSON.parse(message.data) as { seq: number; event: { content: string } }
        if (message.event !== "event" || data.seq !== id || data.event.content !== String(id)) wrong.push(`${message.event} ${message.data}`)
        ids.push(id)
        if (id === total) break
      }
      connection.abort()
      expect(wrong).toEqual([])
      return ids
    })
    let appending = true
    const otherRoutes: Array<number> = []
    const asking = (async () => {
      while (appending) otherRoutes.push((await request(`${url}/sessions`, { token: TOKEN })).status)
    })()
    for (let seq = 2; seq <= total; seq++) {
      await writer.append(session, [prompt(String(seq))])
      // Now and then a batch lands at once, as a turn's events do.
      if (seq % 50 === 0) {
        const batch = Array.from({ length: Math.min(10, total - seq) }, (_, i) => prompt(String(seq + 1 + i)))
        if (batch.length > 0) await writer.append(session, batch)
        seq += batch.length
      }
    }
    const received = await Promise.all(reading)
    appending = false
    await asking
    const expected = Array.from({ length: total - 1 }, (_, i) => i + 2)
    for (const ids of received) expect(ids).toEqual(expected)
    expect(otherRoutes.length).toBeGreaterThan(0)
    expect(otherRoutes.every((status) => status === 200)).toBe(true)
    console.log(`${clients} followers × ${total - 1} events; GET /sessions answered ${otherRoutes.length} times meanwhile`)
  }, 300_000)
})

describe("the server's edges", () => {
  it("a body over the limit gets its 413 and the connection closes, instead of the server reading the rest", async () => {
    const served = await serveSessions({ checkpointer: memoryCheckpointer(), token: TOKEN, maxBodyBytes: 1024 })
    try {
      const declared = 200 * 1024 * 1024
      const socket = connect(served.port, "127.0.0.1")
      await new Promise<void>((resolve) => socket.once("connect", () => resolve()))
      let answer = ""
      socket.on("data", (chunk: Buffer) => answer += chunk.toString("latin1"))
      const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()))
      socket.on("error", () => {})
      socket.write(
        `POST /sessions/s/messages HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${TOKEN}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${declared}\r\n\r\n`
      )
      const chunk = Buffer.alloc(64 * 1024, "x")
      let sent = 0
      let open = true
      void closed.then(() => open = false)
      while (open && sent < declared) {
        const more = socket.write(chunk)
        sent += chunk.length
        if (!more) await Promise.race([new Promise((resolve) => socket.once("drain", resolve)), closed])
      }
      await closed
      expect(answer).toMatch(/^HTTP\/1\.1 413 /)
      expect(answer.toLowerCase()).toContain("connection: close")
      // The server stopped reading: what the client got into its socket before the close is far short of the body.
      expect(sent).toBeLessThan(declared / 4)
    } finally {
      await served.close()
    }
  })

  it("the bearer scheme is case-insensitive; the token is not", async () => {
    const served = await serveSessions({ checkpointer: memoryCheckpointer(), token: TOKEN })
    try {
      const status = async (authorization: string) =>
        (await fetch(`${served.url}/sessions`, { headers: { authorization } })).status
      expect(await status(`Bearer ${TOKEN}`)).toBe(200)
      expect(await status(`bearer ${TOKEN}`)).toBe(200)
      expect(await status(`BEARER ${TOKEN}`)).toBe(200)
      expect(await status(`Bearer ${TOKEN.toUpperCase()}`)).toBe(401)
      expect(await status(`Basic ${TOKEN}`)).toBe(401)
      expect(await status(TOKEN)).toBe(401)
    } finally {
      await served.close()
    }
  })

  it("a token reachable from the network needs 128 bits of entropy; a weak one is refused saying how to make one", async () => {
    const checkpointer = memoryCheckpointer()
    for (const weak of ["aaaaaaaaaaaaaaaa", "password12345678", "correcthorsebatterystaple"]) {
      const refused = await serveSessions({ checkpointer, host: "0.0.0.0", token: weak }).then(() => undefined, (error: unknown) => error)
      expect(refused).toBeInstanceOf(ConfigurationError)
      expect(String((refused as ConfigurationError).message)).toMatch(/128 bits of entropy.*openssl rand -hex 32/)
    }
    // On loopback the same weak token is the user's business.
    const local = await serveSessions({ checkpointer, token: "aaaaaaaaaaaaaaaa" })
    await local.close()
    const strong = await serveSessions({ checkpointer, host: "0.0.0.0", token: "3f9c2a7be1d04c8a9e55b2d17f6a0c34e8b1d9f2a6c7e0b3" })
    try {
      expect((await fetch(`http://127.0.0.1:${strong.port}/sessions`, {
        headers: { authorization: "Bearer 3f9c2a7be1d04c8a9e55b2d17f6a0c34e8b1d9f2a6c7e0b3" }
      })).status).toBe(200)
    } finally {
      await strong.close()
    }
  })
})
