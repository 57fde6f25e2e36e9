/**
 * Following a session: the stored events after a seq, then every event any process appends,
 * as it lands, and a truncate (or a delete and re-creation) as a `reset` — never a silent mix
 * of an old log and its successor. Written once over the contract's `version` and `read`; a
 * backend only says when it may be worth looking again (wake-ups), and a slow poll covers
 * wake-ups that never come (a lost notification, a file system without change events).
 *
 * Each look costs one `version` and, when the head moved, a read of the new events only and a
 * second `version`: the events read are delivered only if the generation did not change in
 * between, which proves they belong to the log the follower has been reading.
 */
import { Chunk, Effect, Queue, type Scope, Stream } from "effect"
import type { CheckpointerError } from "./errors.js"
import type { StoredEvent } from "./events.js"

/** What a follower receives: an event, or word that the log it was reading was rewritten. */
export type FollowItem =
  | {
    readonly type: "event"
    readonly stored: StoredEvent
    /** The generation of the log the event was read from (checked after the read). */
    readonly generation: string
  }
  | {
    /**
     * The session was truncated, or deleted (and maybe re-created), since the follower's
     * events: drop them. The events from seq 1 of the current log follow.
     */
    readonly type: "reset"
    /** The head of the log as it now is (0 when the session no longer exists). */
    readonly head: number
    readonly generation: string
  }

/** Events per look: a follower far behind catches up in steps of this many. */
export const FOLLOW_BATCH_EVENTS = 512

export interface FollowSource {
  readonly version: (sessionId: string) => Effect.Effect<{ readonly head: number; readonly generation: string }, CheckpointerError>
  readonly read: (sessionId: string, sinceSeq: number) => Stream.Stream<StoredEvent, CheckpointerError>
  /** Signals that the session may have changed; subscribed before the first look. */
  readonly wakeUps: (sessionId: string) => Effect.Effect<Stream.Stream<unknown>, never, Scope.Scope>
}

export const followSession = (
  source: FollowSource,
  sessionId: string,
  sinceSeq: number,
  pollMs: number,
  /** The generation the events up to `sinceSeq` belong to, when the follower knows it. */
  knownGeneration?: string
): Stream.Stream<FollowItem, CheckpointerError> =>
  Stream.unwrapScoped(
    Effect.gen(function*() {
      // At most one pending wake-up: many changes between two looks are one look.
      const wake = yield* Queue.sliding<void>(1)
      const signals = yield* source.wakeUps(sessionId)
      yield* Effect.forkScoped(Stream.runForEach(signals, () => Queue.offer(wake, undefined)))
      let after = sinceSeq
      let generation: string | undefined = knownGeneration

      const look: Effect.Effect<Chunk.Chunk<FollowItem>, CheckpointerError> = Effect.gen(function*() {
        for (;;) {
          // Wake-ups so far are answered by this look.
          yield* Queue.takeAll(wake)
          const version = yield* source.version(sessionId)
          const rewritten = (generation !== undefined && version.generation !== generation) || after > version.head
          generation = version.generation
          if (rewritten && after > 0) {
            after = 0
            return Chunk.of<FollowItem>({ type: "reset", head: version.head, generation: version.generation })
          }
          if (version.head > after) {
            const batch = yield* Stream.runCollect(
              Stream.take(source.read(sessionId, after), Math.min(version.head - after, FOLLOW_BATCH_EVENTS))
            ).pipe(
              // Truncated while it paged: look again (the generation tells).
              Effect.catchTag("CheckpointConflictError", () => Effect.succeed(Chunk.empty<StoredEvent>()))
            )
            const check = yield* source.version(sessionId)
            if (check.generation !== generation) continue
            if (Chunk.isNonEmpty(batch)) {
              after = Chunk.lastNonEmpty(batch).seq
              const readFrom = check.generation
              return Chunk.map(batch, (stored): FollowItem => ({ type: "event", stored, generation: readFrom }))
            }
          }
          yield* Effect.race(Queue.take(wake), Effect.sleep(pollMs))
        }
      })
      return Stream.repeatEffectChunk(look)
    })
  )
