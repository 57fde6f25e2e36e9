/**
 * The storage contract every backend provides. Backends implement a small driver of
 * primitives; `make` adds everything they share — argument validation, event validation
 * and encoding, seq allocation, expected-head checks, decoding with contiguity checks and
 * the closed state — so those rules are written once.
 */
import { Chunk, Clock, Context, Effect, Either, Ref, Schema, Stream } from "effect"
import { decodeStoredEvent, normalizeEvents, type SessionEventInput } from "./encoding.js"
import {
  CheckpointConflictError,
  CheckpointerClosedError,
  type CheckpointerError,
  CheckpointIntegrityError,
  InvalidSeqError
} from "./errors.js"
import type { StoredEvent, StoredEventEncoded } from "./events.js"
import { decodeOptions } from "./options.js"
import { validateSessionId } from "./sessionId.js"

export interface SessionInfo {
  readonly id: string
  /** The session's last activity (append or truncate). */
  readonly mtime: Date
}

export const ReadOptions = Schema.Struct({
  /** Return only the events after this seq (exclusive). Default 0: all of them. */
  sinceSeq: Schema.optional(Schema.Unknown)
})
export interface ReadOptions {
  /** Return only the events after this seq (exclusive). Default 0: all of them. */
  readonly sinceSeq?: number | undefined
}

export interface CheckpointerService {
  /**
   * Append `events` in one atomic step and return the new head. With `expectedHead`, fails
   * with `CheckpointConflictError` (writing nothing) unless the head is exactly that.
   * `append(id, [])` writes nothing, creates nothing and returns the current head, still
   * checking `expectedHead` — a cheap compare.
   */
  readonly append: (
    sessionId: string,
    events: ReadonlyArray<SessionEventInput>,
    expectedHead?: number
  ) => Effect.Effect<number, CheckpointerError>
  /** The stored events after `sinceSeq`, in seq order, streamed. */
  readonly read: (sessionId: string, options?: ReadOptions) => Stream.Stream<StoredEvent, CheckpointerError>
  /** The last seq; 0 for an empty or unknown session. */
  readonly head: (sessionId: string) => Effect.Effect<number, CheckpointerError>
  /** Every existing session, most recently active first. */
  readonly list: () => Effect.Effect<ReadonlyArray<SessionInfo>, CheckpointerError>
  /** Remove a session and everything stored for it. Deleting an unknown session does nothing. */
  readonly delete: (sessionId: string) => Effect.Effect<void, CheckpointerError>
  /**
   * Drop every event after `toSeq` and return the new head (`toSeq`). `toSeq` must be
   * between 0 and the head; `toSeq === head` changes nothing; a larger one fails with
   * `InvalidSeqError`. Truncating to 0 leaves an existing, empty session.
   */
  readonly truncate: (
    sessionId: string,
    toSeq: number,
    expectedHead?: number
  ) => Effect.Effect<number, CheckpointerError>
}

export class Checkpointer extends Context.Tag("@lite-agent/core/Checkpointer")<Checkpointer, CheckpointerService>() {}

/** Exclusive write access to one session, handed to `make` by a driver. */
export interface LockedSession {
  /** The real current head, read after the exclusion was taken. */
  readonly head: number
  /** Store these records (seqs head+1…head+n, already encoded to JSON) atomically. */
  readonly append: (records: ReadonlyArray<StoredEventEncoded>) => Effect.Effect<void, CheckpointerError>
  /** Drop every record after `toSeq` (< head) atomically. */
  readonly truncate: (toSeq: number) => Effect.Effect<void, CheckpointerError>
}

/** The primitives a backend implements. Session ids reaching a driver are already valid. */
export interface CheckpointerDriver {
  /** Run `use` while holding the session's write exclusion (in-process and, where it applies, cross-process). */
  readonly withSession: <A>(
    sessionId: string,
    use: (session: LockedSession) => Effect.Effect<A, CheckpointerError>
  ) => Effect.Effect<A, CheckpointerError>
  /** The stored records after `sinceSeq` in seq order, in their JSON form. */
  readonly read: (sessionId: string, sinceSeq: number) => Stream.Stream<unknown, CheckpointerError>
  readonly head: (sessionId: string) => Effect.Effect<number, CheckpointerError>
  readonly list: Effect.Effect<ReadonlyArray<SessionInfo>, CheckpointerError>
  readonly delete: (sessionId: string) => Effect.Effect<void, CheckpointerError>
}

/**
 * Events per emitted chunk, whatever size the backend reads in: some stream operators
 * (`Stream.runFold` among them) recurse once per element of a chunk.
 */
const READ_CHUNK_EVENTS = 256

/** A seq argument (`sinceSeq`, `toSeq`, a checkpoint's seq) must be a non-negative integer. */
export const checkSeqArgument = (
  sessionId: string,
  argument: string,
  value: number | undefined
): Effect.Effect<void, InvalidSeqError> =>
  value === undefined || (Number.isSafeInteger(value) && value >= 0)
    ? Effect.void
    : Effect.fail(new InvalidSeqError({ sessionId, argument, value, reason: "must be a non-negative integer" }))

const checkExpectedHead = (
  sessionId: string,
  expected: number | undefined,
  actual: number
): Effect.Effect<void, CheckpointConflictError> =>
  expected === undefined || expected === actual
    ? Effect.void
    : Effect.fail(new CheckpointConflictError({ sessionId, expected, actual }))

const byMostRecentActivity = (a: SessionInfo, b: SessionInfo): number =>
  b.mtime.getTime() - a.mtime.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/**
 * Build the `Checkpointer` service from a backend's driver. The service refuses every
 * call with `CheckpointerClosedError` once the scope it was made in has closed.
 */
export const make = (driver: CheckpointerDriver) =>
  Effect.gen(function*() {
    const closed = yield* Ref.make(false)
    yield* Effect.addFinalizer(() => Ref.set(closed, true))
    const ensureOpen = Effect.flatMap(
      Ref.get(closed),
      (isClosed) => (isClosed ? Effect.fail(new CheckpointerClosedError()) : Effect.void)
    )
    const guard = <A>(sessionId: string, effect: Effect.Effect<A, CheckpointerError>) =>
      ensureOpen.pipe(Effect.zipRight(validateSessionId(sessionId)), Effect.zipRight(effect))

    const append: CheckpointerService["append"] = (sessionId, inputs, expectedHead) =>
      guard(
        sessionId,
        Effect.gen(function*() {
          yield* checkSeqArgument(sessionId, "expectedHead", expectedHead)
          const { encoded } = yield* normalizeEvents(sessionId, inputs)
          if (encoded.length === 0) {
            const head = yield* driver.head(sessionId)
            yield* checkExpectedHead(sessionId, expectedHead, head)
            return head
          }
          return yield* driver.withSession(sessionId, (session) =>
            Effect.gen(function*() {
              yield* checkExpectedHead(sessionId, expectedHead, session.head)
              const ts = yield* Clock.currentTimeMillis
              const records = encoded.map((event, index) => ({ seq: session.head + index + 1, ts, event }))
              yield* session.append(records)
              return session.head + records.length
            }))
        })
      )

    const read: CheckpointerService["read"] = (sessionId, options) => {
      const sinceSeq = options?.sinceSeq ?? 0
      // An unknown key (`since`, `fromSeq`) must not silently read everything; the seq itself is checked as every seq argument.
      const checked = options === undefined
        ? checkSeqArgument(sessionId, "sinceSeq", sinceSeq)
        : Effect.zipRight(decodeOptions(ReadOptions, options, "read options"), checkSeqArgument(sessionId, "sinceSeq", sinceSeq))
      return Stream.unwrap(
        guard(sessionId, checked).pipe(
          Effect.as(Stream.suspend(() => {
            let expectedSeq = sinceSeq + 1
            return Stream.mapChunksEffect(
              driver.read(sessionId, sinceSeq),
              (chunk): Effect.Effect<Chunk.Chunk<StoredEvent>, CheckpointerError> => {
              // A plain loop: decoding sits on the replay hot path.
              const decodedChunk: Array<StoredEvent> = []
              for (const raw of chunk) {
                const decoded = decodeStoredEvent(sessionId, expectedSeq, raw)
                if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
                if (decoded.right.seq !== expectedSeq) {
                  return Effect.fail(
                    new CheckpointIntegrityError({
                      sessionId,
                      seq: decoded.right.seq,
                      detail: `expected seq ${expectedSeq}, found ${decoded.right.seq}: the log is not contiguous`
                    })
                  )
                }
                expectedSeq++
                decodedChunk.push(decoded.right)
              }
              return Effect.succeed(Chunk.unsafeFromArray(decodedChunk))
            }).pipe(Stream.rechunk(READ_CHUNK_EVENTS))
          }))
        )
      )
    }

    const truncate: CheckpointerService["truncate"] = (sessionId, toSeq, expectedHead) =>
      guard(
        sessionId,
        Effect.gen(function*() {
          yield* checkSeqArgument(sessionId, "toSeq", toSeq)
          yield* checkSeqArgument(sessionId, "expectedHead", expectedHead)
          return yield* driver.withSession(sessionId, (session) =>
            Effect.gen(function*() {
              yield* checkExpectedHead(sessionId, expectedHead, session.head)
              if (toSeq > session.head) {
                return yield* new InvalidSeqError({
                  sessionId,
                  argument: "toSeq",
                  value: toSeq,
                  reason: `is past the head (${session.head})`
                })
              }
              if (toSeq < session.head) yield* session.truncate(toSeq)
              return toSeq
            }))
        })
      )

    const service: CheckpointerService = {
      append,
      read,
      head: (sessionId) => guard(sessionId, driver.head(sessionId)),
      list: () =>
        ensureOpen.pipe(Effect.zipRight(driver.list), Effect.map((sessions) => [...sessions].sort(byMostRecentActivity))),
      delete: (sessionId) => guard(sessionId, driver.delete(sessionId)),
      truncate
    }
    return service
  })
