/**
 * The HTTP server over one checkpointer and, optionally, one agent: sessions as JSON, each
 * session's events as Server-Sent Events (followed live, resumable by `Last-Event-ID`), and —
 * with an agent — turns, restores and compactions.
 *
 * - Every request needs `Authorization: Bearer <token>`; listening on a non-loopback address
 *   needs a token given explicitly. No CORS headers unless origins are configured.
 * - Errors are `{ error: <tag>, message, ...fields }` with a status: 400 for bad input (nothing
 *   changed), 404 for an unknown session, 409 for conflicts, a busy agent or a refused restore.
 * - Clients following a session at its head share one follower (SessionHub.ts).
 * - A slow SSE client never makes memory grow without bound: at most `sseBufferEvents` events
 *   wait for it; when that buffer stays full for `slowClientMs`, the stream ends with an
 *   `event: close` saying why, and the client resumes from its `Last-Event-ID`.
 */
import { randomBytes, timingSafeEqual } from "node:crypto"
import { createServer } from "node:http"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpRouter from "@effect/platform/HttpRouter"
import type { ServeError } from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Cause, Context, Duration, Effect, Either, Layer, Option, Queue, Schedule, Schema, Sink, Stream } from "effect"
import type { AgentEvent } from "../agent/AgentEvents.js"
import { LiteAgent, type LiteAgentService } from "../agent/LiteAgent.js"
import { Checkpointer, type CheckpointerService, type FollowItem, NO_GENERATION } from "../core/Checkpointer.js"
import { encodeStoredEvent, jsonText } from "../core/encoding.js"
import { ConfigurationError } from "../core/errors.js"
import { decodeArgument, decodeOptions, expecting, Flag, NonEmptyString, PositiveInteger, PositiveMilliseconds } from "../core/internal/options.js"
import { sessionIdProblem } from "../core/sessionId.js"
import * as Session from "../core/session.js"
import { makeSessionHubs } from "./SessionHub.js"

export const SessionServerOptions = Schema.Struct({
  /** The address to listen on. Default "127.0.0.1"; any other than loopback needs `token`. */
  host: Schema.optional(NonEmptyString),
  /** The port; 0 (the default) picks a free one. */
  port: Schema.optional(expecting(Schema.Number.pipe(Schema.int(), Schema.between(0, 65535)), "a port number (0-65535)")),
  /** The bearer token every request must carry. Default: a random one (see `token` of the running server). */
  token: Schema.optional(expecting(Schema.String.pipe(Schema.minLength(16)), "a string of at least 16 characters")),
  /** Origins allowed to call from a browser (CORS). Default: none — no CORS headers at all. */
  corsOrigins: Schema.optional(Schema.Array(NonEmptyString)),
  /** Largest request body. Default 1 MiB. */
  maxBodyBytes: Schema.optional(PositiveInteger),
  /** A comment line on idle SSE streams this often, so proxies keep them open. Default 15000. */
  heartbeatMs: Schema.optional(PositiveMilliseconds),
  /** Events that may wait for one slow SSE client. Default 1000. */
  sseBufferEvents: Schema.optional(PositiveInteger),
  /** How long that buffer may stay full before the stream is closed. Default 10000. */
  slowClientMs: Schema.optional(PositiveMilliseconds)
})
export interface SessionServerOptions extends Schema.Schema.Type<typeof SessionServerOptions> {}

export interface SessionServerSettings {
  readonly token: string
  readonly corsOrigins: ReadonlyArray<string>
  readonly maxBodyBytes: number
  readonly heartbeatMs: number
  readonly sseBufferEvents: number
  readonly slowClientMs: number
}

export const resolveSettings = (options: SessionServerOptions, generatedToken: string): SessionServerSettings => ({
  token: options.token ?? generatedToken,
  corsOrigins: options.corsOrigins ?? [],
  maxBodyBytes: options.maxBodyBytes ?? 1024 * 1024,
  heartbeatMs: options.heartbeatMs ?? 15_000,
  sseBufferEvents: options.sseBufferEvents ?? 1000,
  slowClientMs: options.slowClientMs ?? 10_000
})

// ---------------------------------------------------------------------------------------
// Errors as statuses
// ---------------------------------------------------------------------------------------

const BAD_REQUEST = new Set([
  "InvalidSessionIdError",
  "InvalidSeqError",
  "InvalidEventError",
  "ConfigurationError",
  "BadRequest",
  "SessionsDisabledError"
])
const CONFLICT = new Set(["CheckpointConflictError", "AgentBusyError", "RestoreRefusedError", "RestoreInterruptedError", "CheckpointBusyError"])

/** A request the server refuses on its own account. */
class HttpRefusal extends Schema.TaggedError<HttpRefusal>()("HttpRefusal", {
  status: Schema.Number,
  error: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return this.detail
  }
}

const badRequest = (detail: string) => new HttpRefusal({ status: 400, error: "BadRequest", detail })
const notFound = (sessionId: string) =>
  new HttpRefusal({ status: 404, error: "SessionNotFound", detail: `there is no session "${sessionId}"` })

/** The status and JSON body for any failure: the error's tag, its message and its own fields. */
export const errorResponse = (error: unknown): HttpServerResponse.HttpServerResponse => {
  if (error instanceof HttpRefusal) {
    return HttpServerResponse.unsafeJson({ error: error.error, message: error.detail }, { status: error.status })
  }
  const tag = typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "InternalError"
  const fields: Record<string, unknown> = {}
  if (typeof error === "object" && error !== null) {
    for (const [key, value] of Object.entries(error)) if (key !== "cause" && key !== "_tag" && key !== "stack") fields[key] = value
  }
  const status = BAD_REQUEST.has(tag) ? 400 : CONFLICT.has(tag) ? 409 : tag === "SessionNotFound" ? 404 : 500
  const message = error instanceof Error ? error.message : String(error)
  return HttpServerResponse.unsafeJson({ ...fields, error: tag, message }, { status })
}

// ---------------------------------------------------------------------------------------
// Server-Sent Events
// ---------------------------------------------------------------------------------------

const encoder = new TextEncoder()
const frame = (fields: { readonly id?: string; readonly event: string; readonly data: unknown }) =>
  encoder.encode(`${fields.id === undefined ? "" : `id: ${fields.id}\n`}event: ${fields.event}\ndata: ${jsonText(fields.data)}\n\n`)
const heartbeatFrame = encoder.encode(": heartbeat\n\n")
/**
 * The first bytes of every SSE stream: the response's headers go out with them at once, so a
 * client at the head knows it is connected without waiting for an event or a heartbeat.
 */
const openedFrame = encoder.encode(": connected\n\n")

/** A follower's item as an SSE frame: `id` is the seq (0 after a reset, so a reconnect starts the new log from the top). */
const followFrame = (item: FollowItem) =>
  item.type === "event"
    ? frame({ id: String(item.stored.seq), event: "event", data: { ...encodeStoredEvent(item.stored), generation: item.generation } })
    : frame({ id: "0", event: "reset", data: { head: item.head, generation: item.generation } })

const sseHeaders = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache, no-transform",
  "x-accel-buffering": "no"
}

type Slot<A> = { readonly type: "item"; readonly item: A } | { readonly type: "close"; readonly reason: string }

/**
 * `frames` for one client, through a buffer of at most `capacity` items: the producer runs
 * ahead of a slow client only that far, and when the buffer stays full for `slowMs`, the
 * client is sent `event: close` (after what is already buffered) and the stream ends.
 */
const bounded = <A, E>(
  items: Stream.Stream<A, E>,
  toFrame: (item: A) => Uint8Array,
  settings: SessionServerSettings
): Stream.Stream<Uint8Array, E> =>
  Stream.unwrapScoped(
    Effect.gen(function*() {
      const queue = yield* Queue.unbounded<Slot<A> | { readonly type: "failed"; readonly error: E } | { readonly type: "end" }>()
      const room = yield* Effect.makeSemaphore(settings.sseBufferEvents)
      yield* Effect.forkScoped(
        Stream.runForEach(items, (item) =>
          Effect.flatMap(
            Effect.timeout(room.take(1), Duration.millis(settings.slowClientMs)),
            () => Queue.offer(queue, { type: "item", item })
          )).pipe(
            Effect.matchEffect({
              onSuccess: () => Queue.offer(queue, { type: "end" }),
              onFailure: (error) =>
                error instanceof Error && error.name === "TimeoutException"
                  ? Queue.offer(queue, {
                    type: "close",
                    reason: `slow_client: ${settings.sseBufferEvents} events waited for this client for ${settings.slowClientMs} ms; reconnect with Last-Event-ID to resume`
                  })
                  : Queue.offer(queue, { type: "failed", error: error as E })
            })
          )
      )
      const frames = Stream.fromQueue(queue).pipe(
        Stream.takeUntil((slot) => slot.type !== "item"),
        Stream.mapEffect((slot) => {
          switch (slot.type) {
            case "item":
              return Effect.as(room.release(1), Option.some(toFrame(slot.item)))
            case "close":
              return Effect.succeed(Option.some(frame({ event: "close", data: { reason: slot.reason } })))
            case "failed":
              return Effect.succeed(Option.some(frame({ event: "error", data: slot.error })))
            case "end":
              return Effect.succeed(Option.none<Uint8Array>())
          }
        }),
        Stream.filterMap((bytes) => bytes)
      )
      const heartbeats = Stream.map(Stream.fromSchedule(Schedule.spaced(Duration.millis(settings.heartbeatMs))), () => heartbeatFrame)
      return Stream.concat(Stream.make(openedFrame), Stream.merge(frames, heartbeats, { haltStrategy: "left" }))
    })
  )

// ---------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------

const sessionIdParam = Effect.flatMap(HttpRouter.params, (params) => {
  const sessionId = params["id"] ?? ""
  const problem = sessionIdProblem(sessionId)
  return problem === undefined ? Effect.succeed(sessionId) : Effect.fail(badRequest(`session id ${JSON.stringify(sessionId)} ${problem}`))
})

/** The request's JSON body decoded with `schema` (unknown keys refused), or a 400 saying what is wrong. */
const body = <A, I>(schema: Schema.Schema<A, I, never>, name: string) =>
  Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
    const declared = Number(request.headers["content-length"] ?? 0)
    return Effect.flatMap(MaxBodySizeOf, (limit) =>
      declared > limit
        ? Effect.fail(tooLarge(limit))
        : request.text.pipe(
      Effect.mapError((error) => (String(error).includes("maxBytes") || String(error).includes("too large") ? tooLarge(limit) : badRequest(`cannot read the request body: ${String(error)}`))),
      Effect.flatMap((text) => {
        let parsed: unknown
        try {
          parsed = text.trim() === "" ? {} : JSON.parse(text)
        } catch (error) {
          return Effect.fail(badRequest(`the request body is not JSON: ${String(error)}`))
        }
        return Either.match(decodeOptions(schema, parsed, name), {
          onLeft: (error) => Effect.fail(badRequest(error.message)),
          onRight: Effect.succeed
        })
      })
        ))
  })

const tooLarge = (limit: number) =>
  new HttpRefusal({ status: 413, error: "PayloadTooLarge", detail: `the request body is too large (the limit is ${limit} bytes)` })

/** The body size limit in force (`maxBodyBytes`). */
const MaxBodySizeOf = Effect.map(HttpIncomingMessage.MaxBodySize, (size) => Option.match(size, { onNone: () => Infinity, onSome: Number }))

const SinceSeq = expecting(Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative()), "a non-negative integer")

/**
 * Where an SSE client resumes: `Last-Event-ID`, else `?sinceSeq=`, else 0 — and, with
 * `?generation=`, the generation that seq belongs to (a log rewritten since is a reset first).
 */
const resumePoint = Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) => {
  const url = new URL(request.url, "http://localhost")
  const given = request.headers["last-event-id"] ?? url.searchParams.get("sinceSeq") ?? undefined
  const generation = url.searchParams.get("generation") ?? undefined
  if (given === undefined || given === "") return Effect.succeed({ sinceSeq: 0, generation })
  return Either.match(decodeArgument(SinceSeq, given, { name: "sinceSeq" }), {
    onLeft: () => Effect.fail(badRequest(`Last-Event-ID / sinceSeq must be a non-negative integer, got ${JSON.stringify(given)}`)),
    onRight: (sinceSeq) => Effect.succeed({ sinceSeq, generation })
  })
})

const existing = (checkpointer: CheckpointerService, sessionId: string) =>
  Effect.flatMap(checkpointer.version(sessionId), (version) =>
    version.generation === NO_GENERATION ? Effect.fail(notFound(sessionId)) : Effect.succeed(version))

const MessageBody = Schema.Struct({ text: NonEmptyString })
const RestoreBody = Schema.Struct({
  seq: expecting(Schema.Number.pipe(Schema.int(), Schema.nonNegative()), "a non-negative integer"),
  files: Schema.optional(Flag),
  conversation: Schema.optional(Flag),
  dryRun: Schema.optional(Flag)
})
const CompactBody = Schema.Struct({
  instructions: Schema.optional(Schema.String),
  /** Messages kept verbatim after the summary, at most (estimated tokens). */
  keepRecentTokens: Schema.optional(expecting(Schema.Number.pipe(Schema.int(), Schema.nonNegative()), "a non-negative integer"))
})

const noAgent = new HttpRefusal({ status: 404, error: "NoAgent", detail: "this server has no agent: it serves sessions only" })

/**
 * A stream as an SSE response, once its first item (or failure) is known: a failure before
 * anything was sent is an ordinary error response (a busy agent is 409), not a stream.
 */
const streamResponse = <A, E>(stream: Stream.Stream<A, E>, toFrame: (item: A) => Uint8Array, settings: SessionServerSettings) =>
  Effect.map(Stream.peel(stream, Sink.head<A>()), ([first, rest]) => {
    // The request's scope lasts until the response is written: `rest` stays valid that long.
    const all = Option.match(first, { onNone: () => rest, onSome: (item) => Stream.concat(Stream.make(item), rest) })
    return HttpServerResponse.stream(bounded(all, toFrame, settings), { headers: sseHeaders })
  })

export const makeRouter = (settings: SessionServerSettings, agent: Option.Option<LiteAgentService>) =>
  Effect.gen(function*() {
    const checkpointer = yield* Checkpointer
    const hubs = yield* makeSessionHubs(checkpointer, followFrame)
    const withAgent = Option.match(agent, { onNone: () => Effect.fail(noAgent), onSome: Effect.succeed })
    return HttpRouter.empty.pipe(
      HttpRouter.get(
        "/sessions",
        Effect.map(checkpointer.list(), (sessions) =>
          HttpServerResponse.unsafeJson({ sessions: sessions.map((s) => ({ id: s.id, mtime: s.mtime.toISOString() })) }))
      ),
      HttpRouter.get(
        "/sessions/:id",
        Effect.gen(function*() {
          const sessionId = yield* sessionIdParam
          const version = yield* existing(checkpointer, sessionId)
          const stats = yield* checkpointer.stats(sessionId)
          return HttpServerResponse.unsafeJson({ id: sessionId, head: version.head, generation: version.generation, stats })
        })
      ),
      HttpRouter.get(
        "/sessions/:id/checkpoints",
        Effect.gen(function*() {
          const sessionId = yield* sessionIdParam
          yield* existing(checkpointer, sessionId)
          const { checkpoints, interruptedRestore } = yield* Option.match(agent, {
            onSome: (a) =>
              Effect.all({ checkpoints: a.listCheckpoints(sessionId), interruptedRestore: a.interruptedRestore(sessionId) }),
            onNone: () =>
              Effect.map(Stream.runFold(checkpointer.read(sessionId), Session.emptySessionState, Session.step), (state) => ({
                checkpoints: Session.checkpoints(state),
                interruptedRestore: Session.interruptedRestore(state)
              }))
          })
          // A restore a crash cut short, or null.
          return HttpServerResponse.unsafeJson({ checkpoints, interruptedRestore: interruptedRestore ?? null })
        })
      ),
      HttpRouter.get(
        "/sessions/:id/events",
        Effect.gen(function*() {
          const sessionId = yield* sessionIdParam
          const { generation, sinceSeq } = yield* resumePoint
          yield* existing(checkpointer, sessionId)
          return HttpServerResponse.stream(bounded(hubs.frames(sessionId, sinceSeq, generation), (frame) => frame, settings), {
            headers: sseHeaders
          })
        })
      ),
      HttpRouter.del(
        "/sessions/:id",
        Effect.gen(function*() {
          const sessionId = yield* sessionIdParam
          yield* existing(checkpointer, sessionId)
          yield* Option.match(agent, { onSome: (a) => a.deleteSession(sessionId), onNone: () => checkpointer.delete(sessionId) })
          return HttpServerResponse.empty({ status: 204 })
        })
      ),
      HttpRouter.post(
        "/sessions/:id/messages",
        Effect.gen(function*() {
          const a = yield* withAgent
          const sessionId = yield* sessionIdParam
          const { text } = yield* body(MessageBody, "message")
          return yield* streamResponse(a.run(text, { sessionId }), (event: AgentEvent) => frame({ event: event.type, data: event }), settings)
        })
      ),
      HttpRouter.post(
        "/sessions/:id/restore",
        Effect.gen(function*() {
          const a = yield* withAgent
          const sessionId = yield* sessionIdParam
          const { seq, ...options } = yield* body(RestoreBody, "restore")
          yield* existing(checkpointer, sessionId)
          const result = yield* a.restore(sessionId, seq, options)
          return HttpServerResponse.text(jsonText(result), { contentType: "application/json" })
        })
      ),
      HttpRouter.post(
        "/sessions/:id/restore/undo",
        Effect.gen(function*() {
          const a = yield* withAgent
          const sessionId = yield* sessionIdParam
          yield* existing(checkpointer, sessionId)
          const result = yield* a.undoInterruptedRestore(sessionId)
          return HttpServerResponse.text(jsonText(result), { contentType: "application/json" })
        })
      ),
      HttpRouter.post(
        "/sessions/:id/compact",
        Effect.gen(function*() {
          const a = yield* withAgent
          const sessionId = yield* sessionIdParam
          const { instructions, keepRecentTokens } = yield* body(CompactBody, "compact")
          yield* existing(checkpointer, sessionId)
          return yield* streamResponse(
            a.compactRun(instructions, { sessionId, ...(keepRecentTokens === undefined ? {} : { keepRecentTokens }) }),
            (event) => frame({ event: event.type, data: event }),
            settings
          )
        })
      )
    )
  })

// ---------------------------------------------------------------------------------------
// The app: authentication, CORS, body limit, errors
// ---------------------------------------------------------------------------------------

const tokenMatches = (header: string | undefined, token: string) => {
  const expected = Buffer.from(`Bearer ${token}`)
  const given = Buffer.from(header ?? "")
  return given.length === expected.length && timingSafeEqual(given, expected)
}

const corsHeaders = (origin: string) => ({
  "access-control-allow-origin": origin,
  "access-control-allow-headers": "authorization, content-type, last-event-id",
  "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
  vary: "origin"
})

/** The whole application: every route behind the token, errors as JSON. */
export const makeApp = (settings: SessionServerSettings, agent: Option.Option<LiteAgentService>) =>
  Effect.gen(function*() {
    const routes = yield* HttpRouter.toHttpApp(yield* makeRouter(settings, agent))
    return Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const origin = request.headers["origin"]
      const cors = origin !== undefined && settings.corsOrigins.includes(origin) ? corsHeaders(origin) : undefined
      const withCors = (response: HttpServerResponse.HttpServerResponse) =>
        cors === undefined ? response : HttpServerResponse.setHeaders(response, cors)
      if (request.method === "OPTIONS" && cors !== undefined) return withCors(HttpServerResponse.empty({ status: 204 }))
      if (!tokenMatches(request.headers["authorization"], settings.token)) {
        return withCors(HttpServerResponse.unsafeJson(
          { error: "Unauthorized", message: "send Authorization: Bearer <token>" },
          { status: 401, headers: { "www-authenticate": "Bearer" } }
        ))
      }
      const response = yield* routes.pipe(
        HttpIncomingMessage.withMaxBodySize(Option.some(settings.maxBodyBytes)),
        Effect.catchAllCause((cause) => {
          if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
          const failure = Cause.failureOption(cause)
          if (Option.isSome(failure)) {
            const error = failure.value
            if (typeof error === "object" && error !== null && "_tag" in error && error._tag === "RouteNotFound") {
              return Effect.succeed(HttpServerResponse.unsafeJson({ error: "NotFound", message: `no route ${request.method} ${request.url}` }, { status: 404 }))
            }
            return Effect.succeed(errorResponse(error))
          }
          return Effect.succeed(HttpServerResponse.unsafeJson({ error: "InternalError", message: Cause.pretty(cause) }, { status: 500 }))
        })
      )
      return withCors(response)
    })
  })

// ---------------------------------------------------------------------------------------
// Listening
// ---------------------------------------------------------------------------------------

const isLoopback = (host: string) =>
  host === "localhost" || host === "::1" || host === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)

/** Where the server listens, and the token its clients need. */
export class SessionServerInfo extends Context.Tag("@lite-agent/server/SessionServerInfo")<
  SessionServerInfo,
  { readonly url: string; readonly host: string; readonly port: number; readonly token: string; readonly tokenGenerated: boolean }
>() {}

/**
 * Serve the `Checkpointer` in context — and the `LiteAgent`, when there is one — over HTTP,
 * for as long as the layer lives. Refuses (`ConfigurationError`) a non-loopback `host`
 * without an explicit `token`.
 */
export const layer = (
  options: SessionServerOptions = {}
): Layer.Layer<SessionServerInfo, ConfigurationError | ServeError, Checkpointer> =>
  Layer.scoped(
    SessionServerInfo,
    Effect.gen(function*() {
      const decoded = yield* decodeOptions(SessionServerOptions, options, { name: "server options", secrets: ["token"] })
      const host = decoded.host ?? "127.0.0.1"
      if (!isLoopback(host) && decoded.token === undefined) {
        return yield* new ConfigurationError({
          option: "token",
          detail: `listening on ${host}, which is not a loopback address, needs a token of your own (at least 16 characters)`
        })
      }
      const settings = resolveSettings(decoded, randomBytes(24).toString("base64url"))
      const agent = yield* Effect.serviceOption(LiteAgent)
      const app = yield* makeApp(settings, agent)
      const server = yield* NodeHttpServer.make(() => createServer(), { host, port: decoded.port ?? 0 })
      yield* server.serve(app)
      const address = server.address
      const port = address._tag === "TcpAddress" ? address.port : 0
      const urlHost = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host
      return { url: `http://${urlHost}:${port}`, host, port, token: settings.token, tokenGenerated: decoded.token === undefined }
    })
  )
