/**
 * Waiting for a lock held by another process, written once for every backend: try, and while
 * the attempt reports `Busy`, pause and try again — jittered exponential back-off from 1 ms,
 * capped — until a time limit; then `CheckpointBusyError`. The pauses are `Effect.sleep`s, so
 * the event loop keeps running, and waiting can be interrupted like any other sleep.
 */
import { Clock, Data, Duration, Effect, Schedule } from "effect"
import { CheckpointBusyError } from "../core/errors.js"

/** An attempt's way of saying "someone else holds the lock; try again". */
export class Busy extends Data.TaggedError("Busy")<{ readonly detail: string }> {}

/**
 * Pauses of 1, 2, 4, … ms, never longer than `maxPauseMs`, each shortened by a random factor
 * in [0.5, 1] so waiters do not retry in lockstep; no new attempt starts after `timeoutMs`.
 */
export const busyBackoff = (timeoutMs: number, maxPauseMs: number): Schedule.Schedule<unknown> =>
  Schedule.exponential(Duration.millis(1)).pipe(
    Schedule.union(Schedule.spaced(Duration.millis(maxPauseMs))),
    Schedule.jitteredWith({ min: 0.5, max: 1 }),
    Schedule.intersect(Schedule.elapsed.pipe(Schedule.whileOutput(Duration.lessThan(Duration.millis(timeoutMs)))))
  )

export interface BusyWaitOptions {
  /** How long to keep trying; 0 means one attempt. */
  readonly timeoutMs: number
  /** The longest pause between two attempts. */
  readonly maxPauseMs: number
  /** Named in the `CheckpointBusyError`, when the wait is for one session. */
  readonly sessionId?: string | undefined
}

/**
 * Run `attempt`, retrying it with `busyBackoff` while it fails with `Busy`. Other failures end
 * the wait at once, as they are. `attempt` keeps its own interruptibility. A busy first attempt
 * is followed by an immediate second one, then by the back-off.
 */
export const retryWhileBusy = <A, E, R>(
  attempt: Effect.Effect<A, E | Busy, R>,
  options: BusyWaitOptions
): Effect.Effect<A, Exclude<E, Busy> | CheckpointBusyError, R> => {
  const isBusy = (error: E | Busy): error is Busy => error instanceof Busy
  // The first attempt usually succeeds: build the schedule only once there is something to wait for.
  const wait = Effect.flatMap(Clock.currentTimeMillis, (started) =>
    attempt.pipe(
      Effect.retry({ schedule: busyBackoff(options.timeoutMs, options.maxPauseMs), while: isBusy }),
      Effect.catchIf(isBusy, (busy) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Effect.fail(
            new CheckpointBusyError({
              ...(options.sessionId === undefined ? {} : { sessionId: options.sessionId }),
              waitedMs: now - started,
              detail: busy.detail
            })
          )))
    ))
  return Effect.catchIf(attempt, isBusy, () => wait)
}
