/**
 * Appending to a session's own log — a fork's seqs shifted by the events it shares — and
 * starting a fork with its `SessionForked`.
 */
import { Clock, Effect, Either, Stream } from "effect"
import type { CheckpointerDriver } from "../CheckpointerDriver.js"
import { CheckpointConflictError, type CheckpointerError, InvalidEventError } from "../errors.js"
import { ForkMade, type SessionEvent, type SessionForked } from "../events.js"
import { sessionIdProblem } from "../sessionId.js"
import { type ForkOrigin, type ForkOrigins, MAX_FORK_DEPTH } from "./forkOrigins.js"
import type { Manifests } from "./manifests.js"
import { decodeStoredEvent, tagOf } from "./eventCodec.js"
import { storeThenLog } from "./objectCollection.js"
import { separateBlobs } from "./snapshotSeparation.js"

export const make = (
  driver: CheckpointerDriver,
  forks: ForkOrigins,
  manifests: Manifests,
  signalChange: (sessionId: string) => <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<A, E>
) => {
  const viewHead = forks.head
  /** Where an append left the session: its head as read, its own head, and the generation it was written in. */
  interface Written {
    readonly head: number
    readonly ownHead: number
    readonly generation: string
  }
  /**
   * Store `events` after the session's own records; `origin.at` (a fork's shared events) is added
   * to every seq the caller sees. The objects the events reference are stored or touched first
   * (objectCollection.ts): a logged reference always names a stored object.
   */
  const appendWritten = (
    sessionId: string,
    events: ReadonlyArray<SessionEvent>,
    expectedHead: number | undefined,
    origin: ForkOrigin | undefined,
    /** Checked against the head inside the exclusion, before anything is written. */
    precondition?: (head: number) => Effect.Effect<void, CheckpointerError>
  ): Effect.Effect<Written, CheckpointerError> => {
    const shared = origin?.at ?? 0
    const separated = separateBlobs(sessionId, events)
    if (Either.isLeft(separated)) return Effect.fail(separated.left)
    const { blobs, references } = separated.right
    // A capture its manifest lists is logged without its changes (a read lists them again); their
    // objects are stored or touched all the same, as every reference the batch makes.
    const hasManifest = events.some((event) => event._tag === "WorkspaceCaptured" && event.manifest !== undefined)
    return Effect.flatMap(hasManifest ? manifests.prepare(sessionId, events) : Effect.succeed(new Set<number>()), (listed) => {
    const encoded = listed.size === 0
      ? separated.right.encoded
      : separated.right.encoded.map((record, index) => (listed.has(index) ? { ...record, changes: [] } : record))
    // A reference to an object the store does not hold would make a snapshot that can never be restored.
    const missing = (sha256: string, index: number) =>
      new InvalidEventError({ sessionId, index, detail: `a stored reference names ${sha256}, which the store does not hold` })
    return driver.withSession(sessionId, (session): Effect.Effect<Written, CheckpointerError> => {
      const head = session.head === 0 ? 0 : session.head + shared
      if (expectedHead !== undefined && expectedHead !== head) {
        return Effect.fail(new CheckpointConflictError({ sessionId, expected: expectedHead, actual: head }))
      }
      const log = Effect.flatMap(Clock.currentTimeMillis, (ts) => {
        const records = encoded.map((event, index) => ({ seq: session.head + index + 1, ts, event }))
        const appended = session.append(records)
        // A session this append starts is no fork (a fork starts with its SessionForked): known without a read.
        const started = session.head === 0 && origin === undefined
          ? Effect.tap(appended, () => Effect.sync(() => forks.created(sessionId, undefined)))
          : appended
        const ownHead = session.head + records.length
        return Effect.as(started, { head: ownHead + shared, ownHead, generation: session.generation })
      })
      return Effect.zipRight(
        precondition === undefined ? Effect.void : precondition(head),
        storeThenLog(driver, blobs, references, missing, log)
      )
    }).pipe(signalChange(sessionId))
    })
  }
  const appendOwn = (
    sessionId: string,
    events: ReadonlyArray<SessionEvent>,
    expectedHead: number | undefined,
    origin: ForkOrigin | undefined
  ): Effect.Effect<number, CheckpointerError> => Effect.map(appendWritten(sessionId, events, expectedHead, origin), (written) => written.head)
  
  /** Whether the source's own log still holds the `ForkMade` naming `fork` at `at` that was written at `named`. */
  const stillNames = (source: string, fork: string, at: number, named: Written) =>
    driver.withSession(source, (session) => {
      // Nothing cut since: the record is where it was written.
      if (session.generation === named.generation) return Effect.succeed(session.head >= named.ownHead)
      // Cut since (above the name, or the name would have kept its fork): look for it.
      return Effect.map(
        Stream.runFold(session.records(), false, (found, raw) =>
          found || (tagOf(raw) === "ForkMade" && Either.match(decodeStoredEvent(source, 0, raw), {
            onLeft: () => false,
            // At the same point: a name an earlier attempt left (a crash) says nothing of this one.
            onRight: ({ event }) => event._tag === "ForkMade" && event.fork === fork && event.at === at
          }))),
        (found) => found
      )
    })

  /** Start a fork: its `SessionForked` first, checked against the session it names. */
  const startFork = (
    sessionId: string,
    events: ReadonlyArray<SessionEvent>,
    expectedHead: number | undefined
  ): Effect.Effect<number, CheckpointerError> => {
    const forked = events[0] as SessionForked
    const refuse = (detail: string): Effect.Effect<never, CheckpointerError> => Effect.fail(new InvalidEventError({ sessionId, index: 0, detail }))
    if (forked.from === sessionId) return refuse("a session cannot be a fork of itself")
    const problem = sessionIdProblem(forked.from)
    if (problem !== undefined) return refuse(`it names "${forked.from}", which is not a session id: ${problem}`)
    return Effect.gen(function*() {
      const sourceHead = yield* viewHead(forked.from)
      if (sourceHead < forked.at) {
        return yield* refuse(`it forks the first ${forked.at} events of session "${forked.from}", which holds ${sourceHead}`)
      }
      let depth = 1
      for (let origin = yield* forks.of(forked.from); origin !== undefined; origin = yield* forks.of(origin.from)) {
        if (++depth > MAX_FORK_DEPTH) return yield* refuse(`forks of forks go at most ${MAX_FORK_DEPTH} deep`)
      }
      // The source names its fork first (a crash before the fork exists leaves a name that names
      // nothing: whoever looks checks that the fork is there and forked from it).
      // A session already there is no fork to start: refused now, as the append would be — going on
      // would let it be deleted meanwhile and the fork made without its source naming it.
      const existing = yield* viewHead(sessionId)
      if (existing !== 0) {
        return yield* (expectedHead === undefined || expectedHead === existing
          ? refuse(`the session already holds ${existing} events: a SessionForked only starts a new session`)
          : Effect.fail(new CheckpointConflictError({ sessionId, expected: expectedHead, actual: existing })))
      }
      const named = yield* appendWritten(
          forked.from,
          [new ForkMade({ fork: sessionId, at: forked.at })],
          undefined,
          yield* forks.of(forked.from),
          // Looked at again where it counts: a source deleted or cut since is not to be named (nor made again).
          (sourceHead) => sourceHead < forked.at ? refuse(`it forks the first ${forked.at} events of session "${forked.from}", which holds ${sourceHead}`) : Effect.void
        )
      const origin = { from: forked.from, at: forked.at }
      const head = yield* appendOwn(sessionId, events, 0, origin).pipe(
        Effect.catchTag("CheckpointConflictError", (conflict): Effect.Effect<never, CheckpointerError> =>
          expectedHead === undefined || expectedHead === conflict.actual
            ? refuse(`the session already holds ${conflict.actual} events: a SessionForked only starts a new session`)
            : Effect.fail(new CheckpointConflictError({ sessionId, expected: expectedHead, actual: conflict.actual })))
      )
      forks.created(sessionId, origin)
      // A delete or truncate of the source decides, inside the source's exclusion, whether a fork
      // it names exists. One that looked before this fork existed may have taken the events it
      // shares: looked at in the same exclusion, the source still holds its name, or the fork goes.
      if (!(yield* stillNames(forked.from, sessionId, forked.at, named))) {
        // Only as this call made it: what others appended meanwhile is not this call's to take.
        const removed = yield* driver.withSession(sessionId, (session) =>
          session.head === events.length ? Effect.as(session.remove, true) : Effect.succeed(false))
        forks.forget(sessionId)
        return yield* refuse(
          `session "${forked.from}" was deleted or cut while it was forked: ` +
            (removed ? "the fork was not made" : `the fork, which others appended to meanwhile, is left and cannot be read: delete "${sessionId}"`)
        )
      }
      return head
    })
  }

  return { appendOwn, startFork }
}
