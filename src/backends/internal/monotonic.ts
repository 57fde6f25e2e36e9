/**
 * Elapsed time, for every wait and window of the backends. The wall clock (`Date.now()`) can be
 * set back or forward while something waits — by an administrator, NTP, a laptop waking up —
 * and a wait measured on it would then last hours longer, or end at once; a monotonic clock
 * only ever moves forward with real time.
 */
import { Clock, Effect } from "effect"

/** Milliseconds since an arbitrary origin, on a monotonic clock (outside Effect). */
export const monotonicNow = (): number => performance.now()

/**
 * The same through Effect's clock, whose nanoseconds are monotonic (its milliseconds are
 * `Date.now()`); a `TestClock` controls them in tests.
 */
export const monotonicMillis: Effect.Effect<number> = Effect.map(Clock.currentTimeNanos, (nanos) => Number(nanos / 1_000n) / 1_000)
