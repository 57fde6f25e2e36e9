/**
 * Following a session: the stored events after a seq, then every event any process appends,
 * as it lands, and a truncate (or a delete and re-creation) as a `reset` — never a silent mix
 * of an old log and its successor. Written once over the contract's `version` and `read`; a
 * backend only says when it may be worth looking again (wake-ups), and a slow poll covers
 * wake-ups that never come (a lost notification, a file system without change events).
 *
 * A look is one `readPage`: the first new events with the version they were read at, in one
 * snapshot — a generation other than the follower's is a rewrite (a `reset`), and events are
 * delivered only with the generation they belong to. Looks are Effects, not streams: a
 * follower's look at one new event is the hot path of a server with many followers.
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
  /** The first events after `sinceSeq` (at most `FOLLOW_BATCH_EVENTS`) and the version they were read at. */
  readonly readPage: (
    sessionId: string,
    sinceSeq: number,
    /** The generation the follower's events up to `sinceSeq` belong to, when it knows it. */
    generation: string | undefined
  ) => Effect.Effect<{ readonly events: Chunk.Chunk<StoredEvent>; readonly head: number; readonly generation: string }, CheckpointerError>
  /** Calls `wake` whenever the session may have changed, for as long as the scope lasts; subscribed before the first look. */
  readonly wakeUps: (sessionId: string, wake: () => void) => Effect.Effect<void, never, Scope.Scope>
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
      yield* source.wakeUps(sessionId, () => void wake.unsafeOffer(undefined))
      // The slow poll is a wake-up too: one timer per follower, not one per wait.
      yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(pollMs), Queue.offer(wake, undefined))))
      let after = sinceSeq
      let generation: string | undefined = knownGeneration
      // The last look read up to the head it saw after reading: the next one waits for a wake-up.
      let caughtUp = false

      const look: Effect.Effect<Chunk.Chunk<FollowItem>, CheckpointerError> = Effect.gen(function*() {
        for (;;) {
          if (caughtUp) yield* Queue.take(wake)
          caughtUp = false
          // Wake-ups so far are answered by this look.
          yield* Queue.takeAll(wake)
          const page = yield* source.readPage(sessionId, after, generation)
          const rewritten = (generation !== undefined && page.generation !== generation) || after > page.head
          generation = page.generation
          if (rewritten && after > 0) {
            // The page read after the old log's seq is dropped: the new log is read from its start.
            after = 0
            return Chunk.of<FollowItem>({ type: "reset", head: page.head, generation: page.generation })
          }
          if (Chunk.isNonEmpty(page.events)) {
            after = Chunk.lastNonEmpty(page.events).seq
            caughtUp = page.head <= after
            const readFrom = page.generation
            return Chunk.map(page.events, (stored): FollowItem => ({ type: "event", stored, generation: readFrom }))
          }
          caughtUp = true
        }
      })
      return Stream.repeatEffectChunk(look)
    })
  )
