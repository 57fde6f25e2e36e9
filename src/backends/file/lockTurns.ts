/**
 * Taking turns with other processes. A process that keeps taking a session's lock (handed on,
 * or taken again right after letting it go) has a tenure; after `TURN_MS` of it, if someone
 * has said they wait (`markWanted`), it lets the lock go and stays away for `AWAY_MS`.
 */
import { monotonicNow } from "../internal/monotonic.js"

/** How long a process keeps a lock others wait for before it gives way. */
export const TURN_MS = 100
/** How long it then stays away, for a waiter (woken by the lock's removal) to take it. */
const AWAY_MS = 5

/** One process's run of holds of one session's lock; times are `monotonicNow()`. */
export interface Tenure {
  /** When the run began, or when the waiters were last looked for. */
  since: number
  releasedAt: number
  /** Until when this process stays away, having given way. */
  awayUntil: number
  /** Holders of this process holding it now (0 or 1). */
  holding: number
}

/** The tenures of one lock service, by lock key; `wantedFreshMs`: how young a `.wanted/` mark says someone waits. */
export const makeTurns = (wantedFreshMs: number) => {
  const tenures = new Map<string, Tenure>()

  const tenureOf = (key: string): Tenure => {
    let tenure = tenures.get(key)
    if (tenure === undefined) {
      // Forget the sessions this process let go of long ago.
      if (tenures.size >= 256) {
        const old = monotonicNow() - 1_000
        for (const [other, entry] of tenures) if (entry.releasedAt < old && entry.holding === 0) tenures.delete(other)
      }
      tenure = { since: 0, releasedAt: Number.NEGATIVE_INFINITY, awayUntil: 0, holding: 0 }
      tenures.set(key, tenure)
    }
    return tenure
  }

  /** The lock was taken (`handedOn`: without a break since this process's last holder). */
  const taken = (tenure: Tenure, handedOn: boolean) => {
    // A tenure starts when the lock is taken after a while without it.
    const now = monotonicNow()
    if (!handedOn && (now - tenure.releasedAt > AWAY_MS || tenure.since === Number.POSITIVE_INFINITY)) tenure.since = now
  }

  /**
   * The holder ends its hold: whether it should give way to a waiting process now.
   * `wantedAge` reads how long ago a waiter last said it waits (its `.wanted/` mark, on the
   * file system's clock, so that no process's own clock enters it), if one did.
   */
  const shouldGiveWay = (wantedAge: () => number | undefined, tenure: Tenure) => {
    const now = monotonicNow()
    if (now - tenure.since < TURN_MS) return false
    let wanted = false
    try {
      const age = wantedAge()
      wanted = age !== undefined && age < wantedFreshMs
    } catch {
      // Unknown: keep going, and look again after the next turn.
    }
    if (wanted) {
      tenure.awayUntil = now + AWAY_MS
      tenure.since = Number.POSITIVE_INFINITY
    } else {
      tenure.since = now
    }
    return wanted
  }

  return { tenureOf, taken, shouldGiveWay }
}
