/**
 * The live feed: every change any process commits to a schema, heard through LISTEN on the
 * channel the writers' transactions `pg_notify` (see `notifyChange` in statements.ts for the
 * payload), as they commit. One LISTEN per checkpointer while anyone subscribes, shared through
 * a PubSub, and dispatched by session to followers. Subscribing returns once the LISTEN is heard
 * to be in place (its first heartbeat, a NOTIFY to itself, came back), so a commit made after it
 * is heard. The connection is watched with heartbeats: when it goes quiet, it is replaced, and
 * subscribers hear `reconnected` once the new one is listening.
 */
import type { PgClient } from "@effect/sql-pg"
import { Context, Deferred, Duration, Effect, PubSub, RcRef, type Scope, Stream } from "effect"
import type { RecordPage } from "../../core/CheckpointerDriver.js"
import { StorageError } from "../../core/errors.js"
import { makeKeyedSignals } from "../../core/internal/keyedSignals.js"
import { monotonicNow } from "../internal/monotonic.js"
import type { StoredRecord } from "../internal/pagedRead.js"
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
    /**
     * An append's records as committed, when they were small enough to travel with the
     * notification (see `CARRIED_RECORDS_BYTES`): seqs up to `head`, in order.
     */
    readonly records?: ReadonlyArray<StoredRecord> | undefined
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
/** How often a feed not yet heard to listen notifies itself, so that it knows soon once it does. */
const FEED_STARTING_HEARTBEAT_MS = 25
/** Changes a feed subscriber may fall behind by before the oldest are dropped (it then gets `reconnected`-like gaps). */
const FEED_BUFFER = 10_000

const HEARTBEAT = "heartbeat"

/**
 * An append's records travel with its notification when their JSON is at most this many bytes
 * (a notification's payload must stay under 8000): a follower of the session then has them
 * without a read. Larger appends notify without them.
 */
export const CARRIED_RECORDS_BYTES = 6000

/**
 * The records an append notification may carry, as the writer sends them, from the events' JSON
 * texts it stores (`eventTexts[i]` is `records[i]`'s); undefined when they are too big to.
 */
export const carriedRecordsJson = (
  records: ReadonlyArray<{ readonly seq: number; readonly ts: number }>,
  eventTexts: ReadonlyArray<string>
): string | undefined => {
  const json = `[${records.map(({ seq, ts }, index) => `{"seq":${seq},"ts":${ts},"event":${eventTexts[index]}}`).join(",")}]`
  return Buffer.byteLength(json) <= CARRIED_RECORDS_BYTES ? json : undefined
}

/** Records heard in a notification: contiguous, ending at `head`; anything else is not used. */
const carriedRecords = (records: unknown, head: number): ReadonlyArray<StoredRecord> | undefined => {
  if (!Array.isArray(records) || records.length === 0) return undefined
  const first = head - records.length + 1
  for (const [index, record] of records.entries()) {
    if (typeof record !== "object" || record === null) return undefined
    const { seq, ts } = record as { seq?: unknown; ts?: unknown }
    if (seq !== first + index || typeof ts !== "number" || !("event" in record)) return undefined
  }
  return records as ReadonlyArray<StoredRecord>
}

/** A notification's payload, if it is a change to `schema` or its heartbeat. */
const heard = (schema: string, payload: string): SessionChange | typeof HEARTBEAT | undefined => {
  try {
    const message = JSON.parse(payload) as {
      schema?: unknown
      kind?: unknown
      sessionId?: unknown
      head?: unknown
      generation?: unknown
      records?: unknown
    }
    if (message.schema !== schema) return undefined
    if (message.kind === HEARTBEAT) return HEARTBEAT
    if ((message.kind === "append" || message.kind === "truncate" || message.kind === "delete") && typeof message.sessionId === "string") {
      const head = Number(message.head)
      return {
        kind: message.kind,
        sessionId: message.sessionId,
        head,
        generation: String(message.generation),
        records: message.kind === "append" ? carriedRecords(message.records, head) : undefined
      }
    }
  } catch {
    // Not one of ours.
  }
  return undefined
}

/** Records kept per followed session from the notifications: the last this many of its log. */
const CARRIED_RUN_RECORDS = 256

/** The end of one generation's log as the notifications told it: records up to `head`, contiguous. */
interface CarriedRun {
  readonly generation: string
  head: number
  records: Array<StoredRecord>
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
  /**
   * The records after `sinceSeq` of the log `generation`, with the version they were committed
   * at, when the notifications heard so far carried them (a followed session's appends that
   * were small enough); undefined when they did not — then read them. Never "nothing new": a
   * follower that has everything heard still reads, so a notification that never came is found.
   */
  readonly carried: (sessionId: string, sinceSeq: number, generation: string, maxRecords: number) => RecordPage | undefined
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
    const listenWith = (onPayload: (payload: string) => Effect.Effect<void>, listening: () => boolean) =>
      Effect.suspend(() => {
        let lastHeardAt = monotonicNow()
        const reading = Stream.runForEach(Stream.mapError(client.listen(CHANGES_CHANNEL), toCheckpointerError("listen")), (payload) => {
          lastHeardAt = monotonicNow()
          return onPayload(payload)
        })
        const watchdog = Effect.zipRight(
          heartbeat,
          Effect.forever(Effect.gen(function*() {
            // Until the LISTEN is heard to be in place, its first heartbeat may have come before it: ask again soon.
            yield* Effect.sleep(Duration.millis(listening() ? FEED_HEARTBEAT_MS : FEED_STARTING_HEARTBEAT_MS))
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
    // Kept for sessions someone follows only; dropped at anything but an append that continues the run.
    const runs = new Map<string, CarriedRun>()
    const remember = (change: Extract<SessionChange, { kind: "append" | "truncate" | "delete" }>) => {
      const run = runs.get(change.sessionId)
      const records = change.records
      if (records === undefined || !followers.has(change.sessionId)) return void runs.delete(change.sessionId)
      if (run !== undefined && run.generation === change.generation && records[0]!.seq === run.head + 1) {
        run.records.push(...records)
        if (run.records.length > CARRIED_RUN_RECORDS) run.records.splice(0, run.records.length - CARRIED_RUN_RECORDS)
        run.head = change.head
        return
      }
      runs.set(change.sessionId, { generation: change.generation, head: change.head, records: records.slice(-CARRIED_RUN_RECORDS) })
      // Sessions no longer followed leave as their next change is heard; this sweeps the others.
      if (runs.size > 2 * followers.size() + 64) for (const id of runs.keys()) if (!followers.has(id)) runs.delete(id)
    }
    const feed = yield* RcRef.make({
      acquire: Effect.gen(function*() {
        const hub = yield* Effect.acquireRelease(PubSub.sliding<SessionChange>(FEED_BUFFER), PubSub.shutdown)
        // Not listening until a heartbeat is heard: the LISTEN runs in a fiber of its own, after this returns.
        let lost = true
        const listeningOnce = yield* Deferred.make<void>()
        const listen = listenWith((payload) => {
          const change = heard(schema, payload)
          if (change === HEARTBEAT) {
            if (!lost) return Effect.void
            lost = false
            // What was missed is unknown: what the notifications told is no longer the end of any log.
            runs.clear()
            followers.signalAll()
            return Effect.zipRight(Deferred.succeed(listeningOnce, undefined), PubSub.publish(hub, { kind: "reconnected" }))
          }
          if (change === undefined) return Effect.void
          if (change.kind !== "reconnected") {
            remember(change)
            followers.signal(change.sessionId)
          }
          return PubSub.publish(hub, change)
        }, () => !lost)
        yield* Effect.forkScoped(
          listen.pipe(
            Effect.catchAllCause(() =>
              Effect.sync(() => {
                lost = true
                runs.clear()
              })
            ),
            Effect.zipRight(Effect.sleep(Duration.millis(250))),
            Effect.forever
          )
        )
        // The first subscriber waits until the LISTEN is in place, so that no commit after its
        // subscription goes unheard. A database that does not answer is not waited for longer
        // than the watchdog would: once the feed listens, \`reconnected\` wakes everyone.
        yield* Effect.timeoutOption(Deferred.await(listeningOnce), Duration.millis(3 * FEED_HEARTBEAT_MS))
        return hub
      })
    })
    return {
      changes: Stream.unwrapScoped(
        Effect.map(Effect.flatMap(RcRef.get(feed), PubSub.subscribe), (subscription) => Stream.fromQueue(subscription))
      ),
      wakeUps: (sessionId, onChange) => Effect.zipRight(RcRef.get(feed), followers.subscribe(sessionId, onChange)),
      carried: (sessionId, sinceSeq, generation, maxRecords) => {
        const run = runs.get(sessionId)
        // A run is only ever an append's, so never of NO_GENERATION.
        if (run === undefined || run.generation !== generation) return undefined
        const start = sinceSeq + 1 - run.records[0]!.seq
        if (start < 0 || start >= run.records.length) return undefined
        return { records: run.records.slice(start, start + maxRecords), head: run.head, generation }
      }
    }
  })
