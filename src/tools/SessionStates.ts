/**
 * The folded state of each session, kept between calls and brought up to date by folding only
 * the events appended since — what the agent, the file tools and `listCheckpoints` read
 * instead of folding the whole log each time. The cache is never fooled by another writer: a
 * state is reused only while the session's generation (which every truncate and delete
 * changes) is the one it was folded under; otherwise the log is folded again from the start.
 */
import { Chunk, Context, Effect, Layer, Option, Stream } from "effect"
import { Checkpointer, type CheckpointerService } from "../core/Checkpointer.js"
import { CheckpointConflictError, type CheckpointerError } from "../core/errors.js"
import * as Session from "../core/session.js"

/** A session's fold and the generation of the log it was folded from. */
export interface FoldedSession {
  readonly state: Session.SessionState
  readonly generation: string
}

export interface SessionStatesService {
  /** The session folded up to (at least) its head when called. */
  readonly get: (sessionId: string) => Effect.Effect<FoldedSession, CheckpointerError>
  /** Keep a fold a writer advanced itself (by its own appends), so the next `get` starts there. */
  readonly remember: (sessionId: string, folded: FoldedSession) => Effect.Effect<void>
}

export class SessionStates extends Context.Tag("@lite-agent/tools/SessionStates")<SessionStates, SessionStatesService>() {}

/** Sessions kept; the least recently used goes first. Folds hold no file bytes, so each is small. */
export const DEFAULT_CAPACITY = 64

/** A session folded from its whole log, read now (no cache: what a one-off look needs). */
export const foldedLog = (checkpointer: CheckpointerService, sessionId: string) =>
  Effect.map(Stream.runCollect(checkpointer.read(sessionId)), (events) => Session.fold(Chunk.toReadonlyArray(events)))

/** A generation changing during a refresh means a truncate raced it; try again, a few times. */
const MAX_ATTEMPTS = 5

export const make = (capacity = DEFAULT_CAPACITY): Effect.Effect<SessionStatesService, never, Checkpointer> =>
  Effect.gen(function*() {
    const checkpointer = yield* Checkpointer
    // Insertion order is recency: a touched entry is deleted and set again.
    const cache = new Map<string, FoldedSession>()
    const keep = (sessionId: string, folded: FoldedSession) => {
      const current = cache.get(sessionId)
      // Never replace a fold of the same log by an older one.
      if (current !== undefined && current.generation === folded.generation && current.state.head > folded.state.head) return
      cache.delete(sessionId)
      cache.set(sessionId, folded)
      if (cache.size > capacity) cache.delete(cache.keys().next().value as string)
    }

    const refresh = (sessionId: string, attempt: number): Effect.Effect<FoldedSession, CheckpointerError> =>
      Effect.gen(function*() {
        const before = yield* checkpointer.version(sessionId)
        const cached = Option.fromNullable(cache.get(sessionId)).pipe(
          Option.filter((folded) => folded.generation === before.generation && folded.state.head <= before.head)
        )
        const incremental = yield* Option.match(cached, {
          onNone: () => Effect.succeed(undefined),
          onSome: (folded) => Stream.runFold(checkpointer.read(sessionId, { sinceSeq: folded.state.head }), folded.state, Session.step)
        })
        // A move to a branch the cached fold never held is folded from the whole log, like a first read.
        const state = incremental !== undefined && !incremental.branchUnknown
          ? incremental
          : yield* foldedLog(checkpointer, sessionId)
        const after = yield* checkpointer.version(sessionId)
        if (after.generation !== before.generation) {
          // The log was cut (or deleted and re-created) while it was read: what was read may mix two logs.
          if (attempt < MAX_ATTEMPTS) return yield* refresh(sessionId, attempt + 1)
          return yield* new CheckpointConflictError({ sessionId, expected: before.head, actual: after.head })
        }
        const folded = { state, generation: before.generation }
        keep(sessionId, folded)
        return folded
      })

    return {
      get: (sessionId) => refresh(sessionId, 1),
      remember: (sessionId, folded) => Effect.sync(() => keep(sessionId, folded))
    }
  })

export const layer: Layer.Layer<SessionStates, never, Checkpointer> = Layer.effect(SessionStates, make())

/** The `SessionStates` in the context, or a private one when none was provided. */
export const fromContextOrNew: Effect.Effect<SessionStatesService, never, Checkpointer> = Effect.flatMap(
  Effect.serviceOption(SessionStates),
  Option.match({ onNone: () => make(), onSome: Effect.succeed })
)
