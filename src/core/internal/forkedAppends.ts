/**
 * Appending to a session's own log — a fork's seqs shifted by the events it shares, its blob
 * references allowed to name its source's blobs — and starting a fork with its `SessionForked`.
 */
import { Clock, Effect, Either } from "effect"
import type { CheckpointerDriver, SnapshotBlob } from "../CheckpointerDriver.js"
import { CheckpointConflictError, type CheckpointerError, InvalidEventError } from "../errors.js"
import { ForkMade, type SessionEvent, type SessionForked } from "../events.js"
import { sessionIdProblem } from "../sessionId.js"
import { type ForkOrigin, type ForkOrigins, MAX_FORK_DEPTH } from "./forkOrigins.js"
import { separateBlobs } from "./snapshotSeparation.js"

export const make = (
  driver: CheckpointerDriver,
  forks: ForkOrigins,
  signalChange: (sessionId: string) => <A, E>(effect: Effect.Effect<A, E>) => Effect.Effect<A, E>
) => {
  const viewHead = forks.head
  /**
   * Store `events` after the session's own records; `origin.at` (a fork's shared events) is added
   * to every seq the caller sees. A fork's blob references may name its source's blobs: those
   * its own store lacks are looked for there — outside its write exclusion (a backend may hold
   * one connection for it) — and the append tried again.
   */
  /** Blobs an append's references name that the session's own store lacks (a fork's: perhaps its source's). */
  type Lacking = { readonly lacking: ReadonlyArray<string> }
  const appendOwn = (
    sessionId: string,
    events: ReadonlyArray<SessionEvent>,
    expectedHead: number | undefined,
    origin: ForkOrigin | undefined
  ): Effect.Effect<number, CheckpointerError> => {
    const shared = origin?.at ?? 0
    const separated = separateBlobs(sessionId, events)
    if (Either.isLeft(separated)) return Effect.fail(separated.left)
    const { blobs, encoded, references } = separated.right
    const attempt = (heldBySource: ReadonlySet<string> | undefined, blobs: ReadonlyArray<SnapshotBlob>) =>
      driver.withSession(sessionId, (session): Effect.Effect<number | Lacking, CheckpointerError> => {
        const head = session.head === 0 ? 0 : session.head + shared
        if (expectedHead !== undefined && expectedHead !== head) {
          return Effect.fail(new CheckpointConflictError({ sessionId, expected: expectedHead, actual: head }))
        }
        const write = Effect.flatMap(Clock.currentTimeMillis, (ts) => {
          const records = encoded.map((event, index) => ({ seq: session.head + index + 1, ts, event }))
          // The blobs first: a logged reference must never lack its blob.
          const stored = blobs.length > 0 ? Effect.zipRight(session.putBlobs(blobs), session.append(records)) : session.append(records)
          // A session this append starts is no fork (a fork starts with its SessionForked): known without a read.
          const started = session.head === 0 && origin === undefined
            ? Effect.tap(stored, () => Effect.sync(() => forks.created(sessionId, undefined)))
            : stored
          return Effect.as(started, session.head + records.length + shared)
        })
        if (references.size === 0) return write
        // A reference to a blob the store does not hold would make a snapshot that can never be restored.
        return Effect.flatMap(session.missingBlobs([...references.keys()]), (missingHere): Effect.Effect<number | Lacking, CheckpointerError> => {
          const missing = heldBySource === undefined ? missingHere : missingHere.filter((sha256) => !heldBySource.has(sha256))
          if (missing.length === 0) return write
          if (origin !== undefined && heldBySource === undefined) return Effect.succeed({ lacking: missing })
          return Effect.fail(
            new InvalidEventError({
              sessionId,
              index: references.get(missing[0]!) ?? 0,
              detail: `a stored reference names ${missing[0]}, which this session's snapshot store does not hold`
            })
          )
        })
      })
    // Bytes a fork's source already stores stay there: a fork copies no blob it shares.
    const ownBlobs = origin === undefined || blobs.length === 0
      ? Effect.succeed(blobs)
      : Effect.filter(blobs, (blob) => Effect.map(forks.blob(origin.from, blob.sha256), (data) => data === undefined))
    return Effect.flatMap(ownBlobs, (blobs) => Effect.flatMap(attempt(undefined, blobs), (outcome) =>
      typeof outcome === "number" ? Effect.succeed(outcome) : Effect.flatMap(
        Effect.filter(outcome.lacking, (sha256) =>
          origin === undefined ? Effect.succeed(false) : Effect.map(forks.blob(origin.from, sha256), (data) => data !== undefined)),
        (held) =>
          Effect.flatMap(attempt(new Set(held), blobs), (again) =>
            // Told what the source holds, an attempt stores or fails: it never asks again.
            typeof again === "number" ? Effect.succeed(again) : Effect.dieMessage("an append asked twice where its blobs are"))
      ))).pipe(signalChange(sessionId))
  }
  
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
      if ((yield* driver.head(sessionId)) === 0) {
        yield* appendOwn(forked.from, [new ForkMade({ fork: sessionId, at: forked.at })], undefined, yield* forks.of(forked.from))
      }
      const origin = { from: forked.from, at: forked.at }
      const head = yield* appendOwn(sessionId, events, 0, origin).pipe(
        Effect.catchTag("CheckpointConflictError", (conflict): Effect.Effect<never, CheckpointerError> =>
          expectedHead === undefined || expectedHead === conflict.actual
            ? refuse(`the session already holds ${conflict.actual} events: a SessionForked only starts a new session`)
            : Effect.fail(new CheckpointConflictError({ sessionId, expected: expectedHead, actual: conflict.actual })))
      )
      forks.created(sessionId, origin)
      return head
    })
  }

  return { appendOwn, startFork }
}
