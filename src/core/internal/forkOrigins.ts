/**
 * Which sessions are forks. A fork's own log begins with `SessionForked { from, at }` and reads
 * as `from`'s events 1…at followed by its own: shared, not copied. Whether a session is one is
 * read once from its first record and kept (a session's first record changes only when it is
 * deleted or cut to nothing and made again, which a generation other than the one it was read
 * under shows). The forks of a session are named by the `ForkMade` events in its own log, for
 * what would take the events they share (a delete, a truncate).
 */
import { Effect, Either, Stream } from "effect"
import type { CheckpointerDriver, LockedSession } from "../CheckpointerDriver.js"
import { type CheckpointerError, SessionForkedError } from "../errors.js"
import { decodeStoredEvent, tagOf } from "./eventCodec.js"

/** Where a fork's log starts: the first `at` events of session `from`. */
export interface ForkOrigin {
  readonly from: string
  readonly at: number
}

/** A fork of a session, how many of its events the fork shares, and where the session's own log names it. */
export interface ForkOf {
  readonly sessionId: string
  readonly at: number
  /** The own seq (not counting events the session itself shares as a fork) of its `ForkMade`. */
  readonly namedAt: number
}

/** How long a chain of forks of forks may be: a longer one (only a damaged store makes a cycle) is an integrity error. */
export const MAX_FORK_DEPTH = 64

export interface ForkOrigins {
  /** The session's origin when it is a fork (read from its first record the first time, then kept). */
  readonly of: (sessionId: string) => Effect.Effect<ForkOrigin | undefined, CheckpointerError>
  /**
   * The same, checked against a generation just read: a session made again since it was looked at
   * is read again (one whose first record cannot be read counts as no fork: its reads say why).
   */
  readonly under: (sessionId: string, generation: string) => Effect.Effect<ForkOrigin | undefined, CheckpointerError>
  /** This checkpointer made `sessionId`'s first record. */
  readonly created: (sessionId: string, origin: ForkOrigin | undefined) => void
  /** The session was deleted or cut to nothing: it may start differently next time. */
  readonly forget: (sessionId: string) => void
  /** The forks of `sessionId` (only direct ones: a fork of a fork shares its events through them). */
  readonly forksOf: (sessionId: string) => Effect.Effect<ReadonlyArray<ForkOf>, CheckpointerError>
  /**
   * The same, decided inside the session's write exclusion (`session`): a fork made meanwhile is
   * either named and found here, or made after the exclusion ends — what a delete or truncate
   * checks before it takes events a fork reads.
   */
  readonly forksHeld: (sessionId: string, session: LockedSession) => Effect.Effect<ReadonlyArray<ForkOf>, CheckpointerError>
  /** Fail with `SessionForkedError` when a fork found by `forksHeld` would lose what `operation` takes from it (`loses`). */
  readonly refuseShared: (
    sessionId: string,
    session: LockedSession,
    operation: "delete" | "truncate",
    loses: (fork: ForkOf) => boolean
  ) => Effect.Effect<void, CheckpointerError>
  /** Every fork of the session, every fork of those, and so on. */
  readonly below: (sessionId: string) => Effect.Effect<ReadonlyArray<string>, CheckpointerError>
  /** The session's head as read: a fork's own head plus the events it shares (its own, when its first record cannot be read). */
  readonly head: (sessionId: string) => Effect.Effect<number, CheckpointerError>
}

/** Where a session starts from its first record: a fork's origin, or null for a session that is no fork. */
const originOfFirst = (sessionId: string, first: unknown) =>
  Either.map(decodeStoredEvent(sessionId, 1, first), ({ event }): ForkOrigin | null =>
    event._tag === "SessionForked" ? { from: event.from, at: event.at } : null)

export const make = (driver: CheckpointerDriver): ForkOrigins => {
  // Per session: its origin (null: not a fork) and the generation it was read under (undefined: not known yet).
  const known = new Map<string, { origin: ForkOrigin | null; generation: string | undefined }>()

  const learn = (sessionId: string): Effect.Effect<ForkOrigin | undefined, CheckpointerError> =>
    Effect.flatMap(driver.readPage(sessionId, 0, 1), (page) => {
      const first = page.records[0]
      // An empty or unknown session is not kept: it may yet be made a fork.
      if (first === undefined) {
        known.delete(sessionId)
        return Effect.succeed(undefined)
      }
      return Either.match(originOfFirst(sessionId, first), {
        onLeft: Effect.fail,
        onRight: (origin) => {
          known.set(sessionId, { origin, generation: page.generation })
          return Effect.succeed(origin ?? undefined)
        }
      })
    })

  const of: ForkOrigins["of"] = (sessionId) => {
    const entry = known.get(sessionId)
    return entry === undefined ? learn(sessionId) : Effect.succeed(entry.origin ?? undefined)
  }

  // A fork's source logs a `ForkMade` naming it before the fork's first event: its own records
  // say which sessions may be its forks; each still is one if it exists and names it as its source.
  const forksNamed = (
    sessionId: string,
    records: Stream.Stream<unknown, CheckpointerError>,
    originOf: (candidate: string) => Effect.Effect<ForkOrigin | undefined, CheckpointerError>
  ): Effect.Effect<ReadonlyArray<ForkOf>, CheckpointerError> =>
    Effect.gen(function*() {
      const named = new Map<string, number>()
      yield* Stream.runForEach(records, (raw) => {
        if (tagOf(raw) !== "ForkMade") return Effect.void
        return Either.match(decodeStoredEvent(sessionId, 0, raw), {
          onLeft: Effect.fail,
          onRight: ({ event, seq }) => Effect.sync(() => {
            // The first record naming a fork is the one to keep (a fork made again after a crash names it twice).
            if (event._tag === "ForkMade" && !named.has(event.fork)) named.set(event.fork, seq)
          })
        })
      })
      const forks: Array<ForkOf> = []
      for (const [candidate, namedAt] of named) {
        const origin = yield* originOf(candidate)
        if (origin?.from === sessionId) forks.push({ sessionId: candidate, at: origin.at, namedAt })
      }
      return forks
    })

  // One that cannot be read (deleted meanwhile, damaged) is no fork anyone can read.
  const forksOf: ForkOrigins["forksOf"] = (sessionId) =>
    forksNamed(sessionId, driver.read(sessionId, 0), (candidate) => Effect.orElseSucceed(of(candidate), () => undefined))

  const forksHeld: ForkOrigins["forksHeld"] = (sessionId, session) =>
    forksNamed(sessionId, session.records(), (candidate) =>
      Effect.map(session.firstRecordOf(candidate), (first) =>
        first === undefined ? undefined : Either.getOrUndefined(originOfFirst(candidate, first)) ?? undefined))

  return {
    of,
    under: (sessionId, generation) => {
      const entry = known.get(sessionId)
      if (entry === undefined || (entry.generation !== undefined && entry.generation !== generation)) {
        return Effect.orElseSucceed(learn(sessionId), () => undefined)
      }
      if (entry.generation === undefined) known.set(sessionId, { origin: entry.origin, generation })
      return Effect.succeed(entry.origin ?? undefined)
    },
    created: (sessionId, origin) => {
      known.set(sessionId, { origin: origin ?? null, generation: undefined })
    },
    forget: (sessionId) => {
      known.delete(sessionId)
    },
    forksOf,
    forksHeld,
    refuseShared: (sessionId, session, operation, loses) =>
      Effect.flatMap(forksHeld(sessionId, session), (found) => {
        const sharing = found.filter(loses)
        return sharing.length === 0
          ? Effect.void
          : Effect.fail(new SessionForkedError({ sessionId, operation, forks: sharing.map((fork) => ({ sessionId: fork.sessionId, at: fork.at })) }))
      }),
    below: (sessionId) =>
      Effect.gen(function*() {
        const found: Array<string> = []
        let level = [sessionId]
        for (let depth = 0; level.length > 0 && depth < MAX_FORK_DEPTH; depth++) {
          const next: Array<string> = []
          for (const id of level) for (const fork of yield* forksOf(id)) next.push(fork.sessionId)
          found.push(...next)
          level = next
        }
        return found
      }),
    head: (sessionId) =>
      // A session whose first record cannot be read (damaged) reads as its own log here: its read says why.
      Effect.flatMap(Effect.orElseSucceed(of(sessionId), () => undefined), (origin) =>
        origin === undefined ? driver.head(sessionId) : Effect.map(driver.head(sessionId), (head) => (head === 0 ? 0 : head + origin.at)))
  }
}
