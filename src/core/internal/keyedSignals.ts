/**
 * Wake-ups keyed by session: a signal for one session reaches that session's subscribers only,
 * so a change costs work in proportion to who follows it, not to everyone following anything.
 *
 * Each subscriber holds one pending wake-up at most (a sliding queue of one): many signals
 * before it looks are one look, and a subscriber that is slow to look never loses the last
 * signal — there is no buffer to overflow. Signalling is synchronous, so a poller can call it
 * from inside a statement's callback.
 */
import { Effect, Queue, type Scope, Stream } from "effect"

export interface KeyedSignals {
  /** Wake-ups for `key`, for as long as the scope lasts (the subscription is made before this returns). */
  readonly subscribe: (key: string) => Effect.Effect<Stream.Stream<void>, never, Scope.Scope>
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
  const subscribers = new Map<string, Set<Queue.Queue<void>>>()
  const wake = (queues: Set<Queue.Queue<void>>) => {
    for (const queue of queues) queue.unsafeOffer(undefined)
  }
  return {
    subscribe: (key) =>
      Effect.map(
        Effect.acquireRelease(
          Effect.tap(Queue.sliding<void>(1), (queue) =>
            Effect.sync(() => {
              const forKey = subscribers.get(key)
              if (forKey === undefined) subscribers.set(key, new Set([queue]))
              else forKey.add(queue)
            })),
          (queue) =>
            Effect.zipRight(
              Effect.sync(() => {
                const forKey = subscribers.get(key)
                forKey?.delete(queue)
                if (forKey?.size === 0) subscribers.delete(key)
              }),
              Queue.shutdown(queue)
            )
        ),
        (queue) => Stream.fromQueue(queue)
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
