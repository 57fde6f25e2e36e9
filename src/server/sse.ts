/**
 * Server-Sent Events: frames written once as bytes, the SSE responses written by hand to the
 * Node response (sseClient.ts), and where a client resumes. Nothing here goes through a schema,
 * so following a session costs one encoding per event for all clients (SessionHub.ts).
 */
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Effect, Either, Option, Schema, Sink, Stream } from "effect"
import type { FollowItem } from "../core/Checkpointer.js"
import { encodeStoredEvent } from "../core/encoding.js"
import { decodeArgument, expecting } from "../core/internal/options.js"
import { frame, type SseClient, SseClients, type SseSettings, writeStream } from "./sseClient.js"

export { frame }
import { badRequest } from "./wireErrors.js"

/** A follower's item as an SSE frame: `id` is the seq (0 after a reset, so a reconnect starts the new log from the top). */
export const followFrame = (item: FollowItem) =>
  item.type === "event"
    ? frame({ id: String(item.stored.seq), event: "event", data: { ...encodeStoredEvent(item.stored), generation: item.generation } })
    : frame({ id: "0", event: "reset", data: { head: item.head, generation: item.generation } })

/** A stream's failure as its last frame. */
export const errorFrame = (error: unknown) => frame({ event: "error", data: error })

/**
 * The SSE responses of one server: each is written by hand to its Node response (sseClient.ts)
 * and its handler answers only once the stream is over — the response is then already ended,
 * and what the handler returns is not sent.
 */
export const makeSseResponses = (settings: SseSettings & { readonly corsOrigins: ReadonlyArray<string> }) => {
  const clients = new SseClients(settings)
  /** The CORS middleware's headers never reach a response written by hand: the same ones, here. */
  const corsHeaders = (request: HttpServerRequest.HttpServerRequest): Record<string, string> => {
    const origin = request.headers["origin"]
    return origin !== undefined && settings.corsOrigins.includes(origin)
      ? { "access-control-allow-origin": origin, vary: "Origin" }
      : {}
  }
  /** Open the SSE response of `request` and write it with `write` until it is over. */
  const respond = <E, R>(request: HttpServerRequest.HttpServerRequest, write: (client: SseClient) => Effect.Effect<void, E, R>) =>
    Effect.suspend(() => {
      const client = clients.open(NodeHttpServerRequest.toServerResponse(request), corsHeaders(request))
      return write(client).pipe(
        Effect.catchAll((error) => Effect.sync(() => client.end(errorFrame(error)))),
        Effect.ensuring(Effect.sync(() => client.end())),
        Effect.as(HttpServerResponse.empty())
      )
    })
  /**
   * A stream of one client's own (a turn's events) as an SSE response, once its first item (or
   * failure) is known: a failure before anything was sent is an ordinary error response (a busy
   * agent is 409), not a stream.
   */
  const stream = <A, E, R>(request: HttpServerRequest.HttpServerRequest, items: Stream.Stream<A, E, R>, toFrame: (item: A) => Uint8Array) =>
    Effect.flatMap(Stream.peel(items, Sink.head<A>()), ([first, rest]) =>
      respond(request, (client) => {
        // The request's scope lasts until the response is written: `rest` stays valid that long.
        const all = Option.match(first, { onNone: () => rest, onSome: (item) => Stream.concat(Stream.make(item), rest) })
        return writeStream(client, all, toFrame)
      }))
  return { clients, respond, stream }
}

const SinceSeq = expecting(Schema.NumberFromString.pipe(Schema.int(), Schema.nonNegative()), "a non-negative integer")

/**
 * Where an SSE client resumes: `Last-Event-ID`, else `?sinceSeq=`, else 0 — and, with
 * `?generation=`, the generation that seq belongs to (a log rewritten since is a reset first).
 */
export const resumePoint = (request: HttpServerRequest.HttpServerRequest) => {
  const url = new URL(request.url, "http://localhost")
  const given = request.headers["last-event-id"] ?? url.searchParams.get("sinceSeq") ?? undefined
  const generation = url.searchParams.get("generation") ?? undefined
  if (given === undefined || given === "") return Effect.succeed({ sinceSeq: 0, generation })
  return Either.match(decodeArgument(SinceSeq, given, { name: "sinceSeq" }), {
    onLeft: () => Effect.fail(badRequest(`Last-Event-ID / sinceSeq must be a non-negative integer, got ${JSON.stringify(given)}`)),
    onRight: (sinceSeq) => Effect.succeed({ sinceSeq, generation })
  })
}
