/**
 * Mutual exclusion per key for the fibers of one process, forgetting a key once no one holds
 * or waits for it (so a long-lived process does not keep an entry per session it ever saw).
 *
 * Written by hand rather than as a semaphore per key: it sits on every append's path, and an
 * uncontended key costs one map lookup and a flag here.
 */
import { Effect } from "effect"

export interface KeyedMutex {
  readonly withKey: <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Keys someone holds or waits for: an idle key has no entry. */
  readonly activeKeys: () => number
}

interface Entry {
  held: boolean
  /** Holders and waiters. */
  users: number
  /** Waiters in arrival order; waking one hands it the key (it stays held). */
  readonly waiters: Array<() => void>
}

/** One holder per key at a time, first come first served, for the fibers of this process. */
export const makeKeyedMutex = (): KeyedMutex => {
  const entries = new Map<string, Entry>()

  /** The holder of `key` is done: hand the key to the next waiter, or let it go. */
  const handOn = (key: string, entry: Entry) => {
    entry.users--
    const next = entry.waiters.shift()
    if (next !== undefined) return next()
    entry.held = false
    if (entry.users === 0) entries.delete(key)
  }

  const withKey = <A, E, R>(key: string, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.uninterruptibleMask((restore) =>
      Effect.suspend(() => {
        let entry = entries.get(key)
        if (entry === undefined) {
          entry = { held: false, users: 0, waiters: [] }
          entries.set(key, entry)
        }
        const mine = entry
        mine.users++
        const run = Effect.ensuring(restore(effect), Effect.sync(() => handOn(key, mine)))
        if (!mine.held) {
          mine.held = true
          return run
        }
        // Set when the key is handed to this waiter: from then on it is this waiter's to hand on.
        let granted = false
        const wait = Effect.async<void>((resume) => {
          const wake = () => {
            granted = true
            resume(Effect.void)
          }
          mine.waiters.push(wake)
          return Effect.sync(() => {
            const index = mine.waiters.indexOf(wake)
            if (index >= 0) mine.waiters.splice(index, 1)
          })
        })
        return restore(wait).pipe(
          Effect.onInterrupt(() =>
            Effect.sync(() => {
              if (granted) return handOn(key, mine)
              mine.users--
              if (mine.users === 0 && !mine.held) entries.delete(key)
            })
          ),
          Effect.zipRight(run)
        )
      })
    )

  return { withKey, activeKeys: () => entries.size }
}
