/**
 * Mutual exclusion per key for the fibers of one process, forgetting a key once no one holds
 * or waits for it (so a long-lived process does not keep an entry per session it ever saw).
 */
import { Effect } from "effect"

export interface KeyedMutex {
  readonly withKey: <A, E, R>(key: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Keys someone holds or waits for: an idle key has no entry. */
  readonly activeKeys: () => number
}

/** One permit per key, for the fibers of this process; a key's entry lives only while in use. */
export const makeKeyedMutex = (): KeyedMutex => {
  const entries = new Map<string, { readonly semaphore: Effect.Semaphore; users: number }>()
  return {
    withKey: (key, effect) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          let entry = entries.get(key)
          if (entry === undefined) {
            entry = { semaphore: Effect.unsafeMakeSemaphore(1), users: 0 }
            entries.set(key, entry)
          }
          entry.users++
          return entry
        }),
        (entry) => entry.semaphore.withPermits(1)(effect),
        (entry) =>
          Effect.sync(() => {
            if (--entry.users === 0) entries.delete(key)
          })
      ),
    activeKeys: () => entries.size
  }
}
