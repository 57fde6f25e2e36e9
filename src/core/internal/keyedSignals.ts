/**
 * Wake-ups keyed by session: a signal for one session reaches that session's subscribers only,
 * so a change costs work in proportion to who follows it, not to everyone following anything.
 *
 * A subscriber is a callback, called synchronously by `signal` (so a poller can signal from
 * inside a statement's callback): no stream, queue or fiber stands between a change and the
 * follower it wakes. A follower keeps its own pending wake-up (follow.ts).
 */
import { Effect, type Scope } from "effect"

export interface KeyedSignals {
  /** Call `onSignal` at each signal for `key`, for as long as the scope lasts (subscribed before this returns). It must not throw. */
  readonly subscribe: (key: string, onSignal: () => void) => Effect.Effect<void, never, Scope.Scope>
  /** Wake the subscribers of `key` (none: nothing happens). */
  readonly signal: (key: string) => void
  /** Wake every subscriber: something was missed, and no one knows for which keys. */
  readonly signalAll: () => void
  /** The keys someone subscribes to now (and whether `key` is one). */
  readonly keys: () => IterableIterator<string>
  readonly has: (key: string) => boolean
  /** How many keys someone subscribes to now. */
  readonly size: () => number
}

export const makeKeyedSignals = (): KeyedSignals => {
  const subscribers = new Map<string, Set<() => void>>()
  const wake = (callbacks: Set<() => void>) => {
    for (const onSignal of callbacks) onSignal()
  }
  return {
    subscribe: (key, onSignal) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          // A wrapper of its own: the same callback subscribed twice is two subscriptions.
          const subscription = () => onSignal()
          const forKey = subscribers.get(key)
          if (forKey === undefined) subscribers.set(key, new Set([subscription]))
          else forKey.add(subscription)
          return subscription
        }),
        (subscription) =>
          Effect.sync(() => {
            const forKey = subscribers.get(key)
            forKey?.delete(subscription)
            if (forKey?.size === 0) subscribers.delete(key)
          })
      ),
    signal: (key) => {
      const forKey = subscribers.get(key)
      if (forKey !== undefined) wake(forKey)
    },
    signalAll: () => {
      for (const forKey of subscribers.values()) wake(forKey)
    },
    keys: () => subscribers.keys(),
    has: (key) => subscribers.has(key),
    size: () => subscribers.size
  }
}
