/**
 * One SSE client as its Node response: frames written straight to the socket, with the
 * socket's own backpressure. Writing a frame to a client is a `write` call and nothing more —
 * no fiber, queue or stream stage per client per event — so a server with hundreds of
 * followers spends its time in the kernel's sends, not in the runtime.
 *
 * A client that does not drain its socket is given `slowClientMs`; then it gets `event: close`
 * saying why (after what is already buffered) and the response ends, and it resumes from its
 * `Last-Event-ID`. Idle clients get a heartbeat comment every `heartbeatMs`. Both are judged by
 * one timer for all the server's clients, on the monotonic clock.
 */
import type { ServerResponse } from "node:http"
import { performance } from "node:perf_hooks"
import { Effect, Stream } from "effect"
import { jsonText } from "../core/encoding.js"

/** What the SSE streams need of the server's settings. */
export interface SseSettings {
  readonly heartbeatMs: number
  /** Events a follower may fall behind the session's head before it is cut off. */
  readonly sseBufferEvents: number
  readonly slowClientMs: number
}

const encoder = new TextEncoder()
/** One SSE message as bytes. */
export const frame = (fields: { readonly id?: string; readonly event: string; readonly data: unknown }) =>
  encoder.encode(`${fields.id === undefined ? "" : `id: ${fields.id}\n`}event: ${fields.event}\ndata: ${jsonText(fields.data)}\n\n`)
const heartbeatFrame = encoder.encode(": heartbeat\n\n")
/**
 * The first bytes of every SSE stream: the response's headers go out with them at once, so a
 * client at the head knows it is connected without waiting for an event or a heartbeat.
 */
const openedFrame = encoder.encode(": connected\n\n")

export const sseHeaders = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  "x-accel-buffering": "no"
} as const

export class SseClient {
  /** When the last frame was written (monotonic ms), for heartbeats. */
  lastWriteAt = performance.now()
  /** Since when the socket has asked to wait for `drain` (monotonic ms); undefined while it takes writes. */
  blockedSince: number | undefined = undefined
  ended = false
  private finished = false
  /** Called when a blocked socket drains: the writer of this client goes on. */
  onDrain: (() => void) | undefined = undefined
  private readonly endListeners = new Set<() => void>()

  constructor(
    private readonly response: ServerResponse,
    private readonly clients: SseClients
  ) {
    response.on("close", () => this.finish())
    response.on("drain", () => {
      this.blockedSince = undefined
      this.onDrain?.()
    })
  }

  /** Write one frame; false when the socket wants the writer to wait for a drain (or the client is gone). */
  write(frame: Uint8Array): boolean {
    if (this.ended) return false
    this.lastWriteAt = performance.now()
    if (this.response.write(frame)) return true
    this.blockedSince ??= this.lastWriteAt
    return false
  }

  get blocked() {
    return this.ended || this.blockedSince !== undefined
  }

  /** End the stream, with a last frame (an `event: close` or `event: error`) when given. */
  end(last?: Uint8Array) {
    if (this.ended) return
    if (last !== undefined) this.response.write(last)
    this.response.end()
    this.finish()
  }

  /** Call `listener` once when the stream has ended, whoever ended it; returns the way to cancel that. */
  whenEnded(listener: () => void): () => void {
    if (this.ended) {
      listener()
      return () => {}
    }
    this.endListeners.add(listener)
    return () => this.endListeners.delete(listener)
  }

  private finish() {
    if (this.finished) return
    this.finished = true
    this.ended = true
    this.clients.remove(this)
    const listeners = [...this.endListeners]
    this.endListeners.clear()
    for (const listener of listeners) listener()
  }

  /** @internal the registry's tick: a heartbeat when idle, the end when blocked too long. */
  tick(now: number, settings: SseSettings) {
    if (this.blockedSince !== undefined) {
      if (now - this.blockedSince >= settings.slowClientMs) {
        this.end(closeFrame(
          `slow_client: this client did not read its stream for ${settings.slowClientMs} ms; reconnect with Last-Event-ID to resume`
        ))
      }
    } else if (now - this.lastWriteAt >= settings.heartbeatMs) {
      this.write(heartbeatFrame)
    }
  }
}

export const closeFrame = (reason: string) => frame({ event: "close", data: { reason } })

/** The server's SSE clients and the one timer that keeps them alive or cuts them off. */
export class SseClients {
  private readonly all = new Set<SseClient>()
  private timer: ReturnType<typeof setInterval> | undefined = undefined

  constructor(readonly settings: SseSettings) {}

  /** Start an SSE response on `response` (headers and a first comment go out now). */
  open(response: ServerResponse, headers: Record<string, string>): SseClient {
    response.writeHead(200, { ...sseHeaders, ...headers })
    const client = new SseClient(response, this)
    this.all.add(client)
    client.write(openedFrame)
    if (this.timer === undefined) {
      const every = Math.max(20, Math.min(this.settings.heartbeatMs, this.settings.slowClientMs) / 4)
      this.timer = setInterval(() => this.tick(), every)
      this.timer.unref()
    }
    return client
  }

  remove(client: SseClient) {
    this.all.delete(client)
    if (this.all.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer)
      this.timer = undefined
    }
  }

  get size() {
    return this.all.size
  }

  private tick() {
    const now = performance.now()
    for (const client of this.all) client.tick(now, this.settings)
  }

  /** End every stream (the server is closing). */
  closeAll() {
    for (const client of [...this.all]) client.end()
  }
}

/** Until `client` drains its socket or ends. */
export const drained = (client: SseClient): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (!client.blocked) return resume(Effect.void)
    let cancel = () => {}
    const done = () => {
      cancel()
      if (client.onDrain === done) client.onDrain = undefined
      resume(Effect.void)
    }
    client.onDrain = done
    cancel = client.whenEnded(done)
    return Effect.sync(() => {
      cancel()
      if (client.onDrain === done) client.onDrain = undefined
    })
  })

/**
 * Write a stream of one client's own (a catch-up, a turn's events) to it, as fast as the socket
 * drains: the stream is pulled no further ahead than the socket's buffer. Stops when the client
 * is gone. Whether the client ended it is for the caller to ask (`client.ended`).
 */
export const writeStream = <A, E, R>(
  client: SseClient,
  items: Stream.Stream<A, E, R>,
  toFrame: (item: A) => Uint8Array
): Effect.Effect<void, E, R> =>
  Stream.runForEachWhile(items, (item) => {
    if (client.write(toFrame(item))) return Effect.succeed(true)
    return Effect.map(drained(client), () => !client.ended)
  })

/** Until `client`'s stream has ended. */
export const untilEnded = (client: SseClient): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    const cancel = client.whenEnded(() => resume(Effect.void))
    return Effect.sync(cancel)
  })
