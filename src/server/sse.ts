/**
 * Server-Sent Events: frames written once as bytes, each client behind a bounded buffer, and
 * where a client resumes. The SSE routes answer with these raw responses: nothing here goes
 * through a schema, so following a session costs one encoding per event for all clients.
 *
 * A slow SSE client never makes memory grow without bound: at most `sseBufferEvents` events
 * wait for it; when that buffer stays full for `slowClientMs`, the stream ends with an
 * `event: close` saying why, and the client resumes from its `Last-Event-ID`.
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Duration, Effect, Either, Option, Queue, Schedule, Schema, Sink, Stream } from "effect"
import type { FollowItem } from "../core/Checkpointer.js"
import { encodeStoredEvent, jsonText } from "../core/encoding.js"
import { decodeArgument, expecting } from "../core/internal/options.js"
import { badRequest } from "./wireErrors.js"

/** What the SSE streams need of the server's settings. */
export interface SseSettings {
  readonly heartbeatMs: number
  readonly sseBufferEvents: number
  readonly slowClientMs: number
}

const encoder = new TextEncoder()
export const frame = (fields: { readonly id?: string; readonly event: string; readonly data: unknown }) =>
  encoder.encode(`${fields.id === undefined ? "" : `id: ${fields.id}\n`}event: ${fields.event}\ndata: ${jsonText(fields.data)}\n\n`)
const heartbeatFrame = encoder.encode(": heartbeat\n\n")
/**
 * The first bytes of every SSE stream: the response's headers go out with them at once, so a
 * client at the head knows it is connected without waiting for an event or a heartbeat.
 */
const openedFrame = encoder.encode(": connected\n\n")

/** A follower's item as an SSE frame: `id` is the seq (0 after a reset, so a reconnect starts the new log from the top). */
export const followFrame = (item: FollowItem) =>
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
  settings: SseSettings
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

/** Frames already encoded (a session's followers share them) as an SSE response. */
export const framesResponse = <E>(frames: Stream.Stream<Uint8Array, E>, settings: SseSettings) =>
  HttpServerResponse.stream(bounded(frames, (bytes) => bytes, settings), { headers: sseHeaders })

/**
 * A stream as an SSE response, once its first item (or failure) is known: a failure before
 * anything was sent is an ordinary error response (a busy agent is 409), not a stream.
 */
export const streamResponse = <A, E>(stream: Stream.Stream<A, E>, toFrame: (item: A) => Uint8Array, settings: SseSettings) =>
  Effect.map(Stream.peel(stream, Sink.head<A>()), ([first, rest]) => {
    // The request's scope lasts until the response is written: `rest` stays valid that long.
    const all = Option.match(first, { onNone: () => rest, onSome: (item) => Stream.concat(Stream.make(item), rest) })
    return HttpServerResponse.stream(bounded(all, toFrame, settings), { headers: sseHeaders })
  })

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
