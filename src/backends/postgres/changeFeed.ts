/**
 * The live feed: every change any process commits to a schema, heard through LISTEN on the
 * channel the writers' transactions `pg_notify` (see `notifyChange` in statements.ts for the
 * payload), as they commit. One LISTEN per checkpointer while anyone subscribes, shared through
 * a PubSub, and dispatched by session to followers. The connection is watched with heartbeats (a NOTIFY to itself): when it goes quiet,
 * it is replaced, and subscribers hear `reconnected` once the new one is listening.
 */
import type { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, PubSub, RcRef, type Scope, Stream } from "effect"
import { StorageError } from "../../core/errors.js"
import { makeKeyedSignals } from "../../core/internal/keyedSignals.js"
import { monotonicNow } from "../internal/monotonic.js"
import { toCheckpointerError } from "./pgErrors.js"
import type { Query } from "./transactions.js"

/** The channel every backend instance notifies on; the payload names the schema. */
export const CHANGES_CHANNEL = "lite_agent_changes"

/** A change to a session, as the live feed reports it. */
export type SessionChange =
  | {
    readonly kind: "append" | "truncate" | "delete"
    readonly sessionId: string
    /** The head after the change (0 after a delete). */
    readonly head: number
    /** The generation after the change (`NO_GENERATION` after a delete). */
    readonly generation: string
  }
  | {
    /**
     * The feed's connection was lost and is back: changes made in between were not heard.
     * Re-check what you follow.
     */
    readonly kind: "reconnected"
  }

/** The live feed: every change any process commits to this schema, as it commits. */
export class PostgresChanges extends Context.Tag("@lite-agent/backends/postgres/PostgresChanges")<
  PostgresChanges,
  { readonly changes: Stream.Stream<SessionChange> }
>() {}

/** The feed notifies itself this often; hearing nothing at all for three times as long means its connection is gone. */
const FEED_HEARTBEAT_MS = 2000
/** Changes a feed subscriber may fall behind by before the oldest are dropped (it then gets `reconnected`-like gaps). */
const FEED_BUFFER = 10_000

const HEARTBEAT = "heartbeat"

/** A notification's payload, if it is a change to `schema` or its heartbeat. */
const heard = (schema: string, payload: string): SessionChange | typeof HEARTBEAT | undefined => {
  try {
    const message = JSON.parse(payload) as { schema?: unknown; kind?: unknown; sessionId?: unknown; head?: unknown; generation?: unknown }
    if (message.schema !== schema) return undefined
    if (message.kind === HEARTBEAT) return HEARTBEAT
    if ((message.kind === "append" || message.kind === "truncate" || message.kind === "delete") && typeof message.sessionId === "string") {
      return { kind: message.kind, sessionId: message.sessionId, head: Number(message.head), generation: String(message.generation) }
    }
  } catch {
    // Not one of ours.
  }
  return undefined
}

export interface ChangeFeed {
  /** Every change to the schema. */
  readonly changes: Stream.Stream<SessionChange>
  /**
   * Calls `onChange` for one session's changes, and at `reconnected`, for as long as the scope
   * lasts. Dispatched by session as each notification is heard, so a change costs work for its
   * session's followers only.
   */
  readonly wakeUps: (sessionId: string, onChange: () => void) => Effect.Effect<void, never, Scope.Scope>
}

/** The changes to `schema`, for as long as the scope lasts; subscribing starts the LISTEN, the last subscriber leaving ends it. */
export const makeChangeFeed = (
  client: PgClient.PgClient,
  schema: string,
  query: Query
): Effect.Effect<ChangeFeed, never, Scope.Scope> =>
  Effect.gen(function*() {
    // Not PgClient's `notify`: it sends `NOTIFY channel, $1`, which PostgreSQL refuses (NOTIFY takes no parameters).
    const heartbeat = Effect.ignore(query("notify", "SELECT pg_notify($1, $2)", [CHANGES_CHANNEL, JSON.stringify({ schema, kind: HEARTBEAT })]))
    /**
     * The LISTEN, read until its connection is gone: the feed notifies itself every
     * FEED_HEARTBEAT_MS, and a watchdog fails the listen once nothing at all was heard for three
     * times as long. Hearing only notes the time: nothing per notification but its handling.
     */
    const listenWith = (onPayload: (payload: string) => Effect.Effect<void>) =>
      Effect.suspend(() => {
        let lastHeardAt = monotonicNow()
        const reading = Stream.runForEach(Stream.mapError(client.listen(CHANGES_CHANNEL), toCheckpointerError("listen")), (payload) => {
          lastHeardAt = monotonicNow()
          return onPayload(payload)
        })
        const watchdog = Effect.zipRight(
          heartbeat,
          Effect.forever(Effect.gen(function*() {
            yield* Effect.sleep(Duration.millis(FEED_HEARTBEAT_MS))
            if (monotonicNow() - lastHeardAt > 3 * FEED_HEARTBEAT_MS) {
              return yield* new StorageError({
                operation: "listen",
                detail: "the live feed heard nothing, not even its own heartbeat: its connection is gone"
              })
            }
            yield* heartbeat
          }))
        )
        return Effect.raceFirst(reading, watchdog)
      })
    const followers = makeKeyedSignals()
    const feed = yield* RcRef.make({
      acquire: Effect.gen(function*() {
        const hub = yield* Effect.acquireRelease(PubSub.sliding<SessionChange>(FEED_BUFFER), PubSub.shutdown)
        let lost = false
        const listen = listenWith((payload) => {
          const change = heard(schema, payload)
          if (change === HEARTBEAT) {
            if (!lost) return Effect.void
            lost = false
            followers.signalAll()
            return PubSub.publish(hub, { kind: "reconnected" })
          }
          if (change === undefined) return Effect.void
          if (change.kind !== "reconnected") followers.signal(change.sessionId)
          return PubSub.publish(hub, change)
        })
        yield* Effect.forkScoped(
          listen.pipe(
            Effect.catchAllCause(() => Effect.sync(() => (lost = true))),
            Effect.zipRight(Effect.sleep(Duration.millis(250))),
            Effect.forever
          )
        )
        return hub
      })
    })
    return {
      changes: Stream.unwrapScoped(
        Effect.map(Effect.flatMap(RcRef.get(feed), PubSub.subscribe), (subscription) => Stream.fromQueue(subscription))
      ),
      wakeUps: (sessionId, onChange) => Effect.zipRight(RcRef.get(feed), followers.subscribe(sessionId, onChange))
    }
  })
