/**
 * Waiting for a lock held by another process, written once for every backend: try, and while
 * the attempt reports `Busy`, pause and try again — jittered exponential back-off from 1 ms,
 * capped — until a time limit (measured on a monotonic clock: setting the wall clock back or
 * forward neither stretches nor cuts the wait); then `CheckpointBusyError`. The pauses are `Effect.sleep`s, so
 * the event loop keeps running, and waiting can be interrupted like any other sleep.
 *
 * A backend that can tell when the lock may have been released (a file-system event where the
 * holder writes or releases) passes it as `wakeUp`: a pause then ends at that signal rather than
 * at its timer, so a lock that is free again is taken at once instead of up to a pause later.
 */
import { Data, Duration, Effect, Random } from "effect"
import { CheckpointBusyError } from "../../core/errors.js"
import { monotonicMillis } from "./monotonic.js"

/** An attempt's way of saying "someone else holds the lock; try again". */
export class Busy extends Data.TaggedError("Busy")<{ readonly detail: string }> {}

export interface BusyWaitOptions {
  /** How long to keep trying; 0 means one attempt. */
  readonly timeoutMs: number
  /** The longest pause between two attempts. */
  readonly maxPauseMs: number
  /** Named in the `CheckpointBusyError`, when the wait is for one session. */
  readonly sessionId?: string | undefined
  /**
   * Succeeds when the lock may have been released (spurious signals are fine: each only brings
   * the next attempt forward). Without it, only the timers end pauses.
   */
  readonly wakeUp?: Effect.Effect<void> | undefined
}

/**
 * The pause before attempt `n` (1-based, after a busy one): 1, 2, 4, … ms, never longer than
 * `maxPauseMs`, shortened by a random factor in [0.5, 1] so waiters do not retry in lockstep.
 */
const pauseMs = (attempt: number, maxPauseMs: number) =>
  Effect.map(Random.nextRange(0.5, 1), (jitter) => Math.min(2 ** (attempt - 1), maxPauseMs) * jitter)

/**
 * Run `attempt`, trying again while it fails with `Busy`. Other failures end the wait at once,
 * as they are. `attempt` keeps its own interruptibility. A busy first attempt is followed by an
 * immediate second one, then by the back-off; no attempt starts after `timeoutMs`.
 */
export const retryWhileBusy = <A, E, R>(
  attempt: Effect.Effect<A, E | Busy, R>,
  options: BusyWaitOptions
): Effect.Effect<A, Exclude<E, Busy> | CheckpointBusyError, R> => {
  const isBusy = (error: E | Busy): error is Busy => error instanceof Busy
  const giveUp = (started: number, busy: Busy) =>
    Effect.flatMap(monotonicMillis, (now) =>
      Effect.fail(
        new CheckpointBusyError({
          ...(options.sessionId === undefined ? {} : { sessionId: options.sessionId }),
          waitedMs: Math.round(now - started),
          detail: busy.detail
        })
      ))
  // A pause ends at its timer or at the wake-up, whichever comes first; the race then interrupts
  // the other side. Run in the caller's fiber, both sides would take on the caller's
  // interruptibility: in a caller that cannot be interrupted (a move's commit) a timer that won
  // would wait for the wake-up as well — a file-system event that may never come, whose watch
  // keeps no process alive (Node then exits with code 13). So the race runs interruptibly in a
  // fiber of its own, and the caller is exactly as interruptible as it was.
  const pause = (ms: number) =>
    options.wakeUp === undefined
      ? Effect.sleep(Duration.millis(ms))
      : Effect.disconnect(Effect.interruptible(Effect.raceFirst(Effect.sleep(Duration.millis(ms)), options.wakeUp)))
  const again = (started: number, tries: number, busy: Busy): Effect.Effect<A, Exclude<E, Busy> | CheckpointBusyError, R> =>
    Effect.flatMap(monotonicMillis, (now) => {
      const elapsed = now - started
      if (elapsed >= options.timeoutMs) return giveUp(started, busy)
      // The second attempt is immediate; then the back-off, never past the time limit.
      const wait = tries === 1
        ? Effect.void
        : Effect.flatMap(pauseMs(tries - 1, options.maxPauseMs), (ms) => pause(Math.min(ms, options.timeoutMs - elapsed)))
      return Effect.zipRight(
        wait,
        Effect.catchIf(attempt, isBusy, (next) => again(started, tries + 1, next))
      )
    })
  // The first attempt usually succeeds: the clock is read only once there is something to wait for.
  return Effect.catchIf(attempt, isBusy, (busy) =>
    Effect.flatMap(monotonicMillis, (started) =>
      options.timeoutMs <= 0 ? giveUp(started, busy) : again(started, 1, busy)))
}
