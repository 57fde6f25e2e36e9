/**
 * A writer's view of one session: the fold up to the head it knows, advanced only by what it
 * appends itself. Every append carries that head as the expected head, so a write by anyone
 * else in between fails with `CheckpointConflictError` instead of interleaving silently.
 */
import { Chunk, Effect, Option, Stream } from "effect"
import type { CheckpointerService } from "../core/Checkpointer.js"
import { CheckpointConflictError, type CheckpointerError } from "../core/errors.js"
import type { SessionEvent, StoredEvent } from "../core/events.js"
import * as Session from "../core/session.js"
import type { SessionStatesService } from "../tools/SessionStates.js"
import type { Emit } from "./AgentEvents.js"

export interface SessionWriter {
  readonly sessionId: string
  /** The fold up to the head this writer knows. */
  readonly state: Session.SessionState
  /** Append at the known head, then fold in exactly what was appended (not what others may have added after it). */
  readonly commit: (events: ReadonlyArray<SessionEvent>) => Effect.Effect<void, CheckpointerError>
  /** The append half of `commit`; the caller folds the records in with `foldOwn(events.length)`. */
  readonly append: (events: ReadonlyArray<SessionEvent>) => Effect.Effect<void, CheckpointerError>
  /** Fold in the next `count` records after the known head: the writer's own, just appended. */
  readonly foldOwn: (count: number) => Effect.Effect<void, CheckpointerError>
  /**
   * Fold in the records a tool call appended itself (file snapshots and changes carrying its
   * tool-use id). Anything else means another writer got in: a conflict, rather than interleave.
   */
  readonly foldToolRecords: (toolUseId: string) => Effect.Effect<void, CheckpointerError>
}

/**
 * The session as the shared fold cache has it (brought up to date with what others appended);
 * each record the writer folds in later is emitted, and kept in the cache for the next turn.
 */
export const openSessionWriter = (
  checkpointer: CheckpointerService,
  states: SessionStatesService,
  sessionId: string,
  emit: Emit
): Effect.Effect<SessionWriter, CheckpointerError> =>
  Effect.map(states.get(sessionId), ({ generation, state: initial }) => {
    let state = initial
    // The writer's own appends never change the generation, so its fold stays valid for the cache.
    const advance = (stored: StoredEvent) => {
      state = Session.step(state, stored)
      return Effect.zipRight(
        states.remember(sessionId, { state, generation }),
        emit({ type: "session_event", sessionId, seq: stored.seq, ts: stored.ts, event: stored.event })
      )
    }
    const append = (events: ReadonlyArray<SessionEvent>) =>
      events.length === 0 ? Effect.void : Effect.asVoid(checkpointer.append(sessionId, events, state.head))
    const foldOwn = (count: number) =>
      count === 0 ? Effect.void : Stream.runForEach(Stream.take(checkpointer.read(sessionId, { sinceSeq: state.head }), count), advance)
    return {
      sessionId,
      get state() {
        return state
      },
      append,
      foldOwn,
      commit: (events) => Effect.zipRight(append(events), Effect.suspend(() => foldOwn(events.length))),
      foldToolRecords: (toolUseId) =>
        Effect.gen(function*() {
          const expected = state.head
          const records = yield* Stream.runCollect(checkpointer.read(sessionId, { sinceSeq: expected }))
          const foreign = Chunk.findFirst(records, (stored) =>
            !((stored.event._tag === "FileSnapshot" || stored.event._tag === "FileChange") && stored.event.toolUseId === toolUseId))
          if (Option.isSome(foreign)) {
            const actual = Option.match(Chunk.last(records), { onNone: () => expected, onSome: (stored) => stored.seq })
            return yield* new CheckpointConflictError({ sessionId, expected, actual })
          }
          for (const stored of records) yield* advance(stored)
        })
    }
  })
