/**
 * Pruning branches, the store's half: for one session or every session, fold its log, plan what
 * to prune (branchPruning.ts) and append one `BranchesPruned` at the head the plan was made from.
 * Nothing is deleted or rewritten: the log stays append-only, the pruned branches stay in it
 * (shown as pruned), and what only they referenced is left to the next `gc`.
 *
 * An append by anyone else between the read and the append (a turn, a move onto the branch) is
 * never lost: the expected head refuses the `BranchesPruned`, and the session is read and planned
 * again — up to `MAX_ATTEMPTS` times, then it is skipped and the report says so.
 */
import { Chunk, Clock, Effect, Schema, Stream } from "effect"
import { type BranchToPrune, type KeptBranch, planPruning } from "./branchPruning.js"
import type { SessionInfo } from "./CheckpointerDriver.js"
import type { CheckpointerError } from "./errors.js"
import { BranchesPruned, type SessionEvent, type StoredEvent } from "./events.js"
import { decodeOptions, expecting, Flag } from "./internal/options.js"
import { fold } from "./sessionFold.js"

/** Reads and appends the operation needs: a `Checkpointer`'s (a fork's events read with what it shares). */
export interface PrunableStore {
  readonly list: () => Effect.Effect<ReadonlyArray<SessionInfo>, CheckpointerError>
  readonly read: (sessionId: string) => Stream.Stream<StoredEvent, CheckpointerError>
  readonly append: (sessionId: string, events: ReadonlyArray<SessionEvent>, expectedHead?: number) => Effect.Effect<number, CheckpointerError>
}

export const PruneBranchesOptions = Schema.Struct({
  /** Prune branches whose last activity is at least this many milliseconds ago (0: any branch left behind). */
  olderThanMs: expecting(Schema.Number.pipe(Schema.int(), Schema.nonNegative()), "an integer of milliseconds >= 0"),
  /** Keep a branch with a named node (`BranchLabeled`) whatever its age. Default true. */
  keepLabeled: Schema.optional(Flag),
  /** Only this session (default: every session of the store). */
  sessionId: Schema.optional(Schema.String)
})
export interface PruneBranchesOptions {
  /** Prune branches whose last activity is at least this many milliseconds ago (0: any branch left behind). */
  readonly olderThanMs: number
  /** Keep a branch with a named node (`BranchLabeled`) whatever its age. Default true. */
  readonly keepLabeled?: boolean | undefined
  /** Only this session (default: every session of the store). */
  readonly sessionId?: string | undefined
}

/** What pruning did to one session that has branches left behind. */
export interface SessionPruning {
  readonly sessionId: string
  /** The seq of its `BranchesPruned`, or undefined when nothing was pruned. */
  readonly seq: number | undefined
  /** The branches pruned: each tip, its nodes (seq ranges), its last activity. */
  readonly pruned: ReadonlyArray<BranchToPrune>
  /** The branches left behind that stay, and why (`recent`, `labeled`, `forked`: a fork shares them). */
  readonly kept: ReadonlyArray<KeptBranch>
}

export interface PruneBranchesReport {
  /** The cutoff: branches last active at or before this were pruned (epoch ms). */
  readonly before: number
  /** The sessions with branches left behind, pruned or kept (sessions with none are not listed). */
  readonly sessions: ReadonlyArray<SessionPruning>
  /**
   * Sessions not pruned: appended to by others on every attempt (`conflict`), with a restore cut
   * short (`restore_interrupted`), or — in a pruning of every session — whose log cannot be read
   * (`unreadable`: damaged, or of a newer format; a pruning of one session fails with the error).
   */
  readonly skipped: ReadonlyArray<{ readonly sessionId: string; readonly reason: SkipReason; readonly detail: string }>
}

/** Reads and plans of one session before it is skipped as appended to meanwhile each time. */
export const MAX_ATTEMPTS = 5

export type SkipReason = "conflict" | "restore_interrupted" | "unreadable"

type Outcome =
  | { readonly _tag: "done"; readonly pruning: SessionPruning | undefined }
  | { readonly _tag: "skipped"; readonly reason: SkipReason; readonly detail: string }

const UNREADABLE: ReadonlySet<string> = new Set(["EventDecodeError", "CheckpointIntegrityError", "SchemaVersionError", "CodecError"])

const pruneOne = (
  store: PrunableStore,
  sessionId: string,
  settings: { readonly before: number; readonly keepLabeled: boolean; readonly skipUnreadable: boolean }
): Effect.Effect<Outcome, CheckpointerError> => {
  const { before, keepLabeled } = settings
  const readAll = Effect.map(Stream.runCollect(store.read(sessionId)), Chunk.toReadonlyArray)
  const attempt = (left: number): Effect.Effect<Outcome, CheckpointerError> =>
    Effect.gen(function*() {
      const read = yield* Effect.either(readAll)
      if (read._tag === "Left") {
        if (!settings.skipUnreadable || !UNREADABLE.has(read.left._tag)) return yield* read.left
        return { _tag: "skipped", reason: "unreadable", detail: read.left.message }
      }
      const events: ReadonlyArray<StoredEvent> = read.right
      if (events.length === 0) return { _tag: "done", pruning: undefined }
      const state = fold(events)
      if (state.pendingRestore !== undefined) {
        // Its move may be bound for a branch this would prune: finished or undone first.
        return { _tag: "skipped", reason: "restore_interrupted", detail: `session "${sessionId}" has a restore cut short (seq ${state.pendingRestore.seq})` }
      }
      const plan = planPruning(events, state, { before, keepLabeled })
      if (plan.pruned.length === 0) {
        return { _tag: "done", pruning: plan.kept.length === 0 ? undefined : { sessionId, seq: undefined, pruned: [], kept: plan.kept } }
      }
      const event = new BranchesPruned({ branches: plan.pruned.map(({ nodes, tip }) => ({ tip, nodes })), before })
      const appended = yield* Effect.either(store.append(sessionId, [event], state.head))
      if (appended._tag === "Right") return { _tag: "done", pruning: { sessionId, seq: appended.right, pruned: plan.pruned, kept: plan.kept } }
      if (appended.left._tag !== "CheckpointConflictError") return yield* appended.left
      if (left > 1) return yield* attempt(left - 1)
      return { _tag: "skipped", reason: "conflict", detail: `session "${sessionId}" was appended to during each of ${MAX_ATTEMPTS} attempts` }
    })
  return attempt(MAX_ATTEMPTS)
}

/** Prune the branches left behind that match `options`, in one session or every session of the store. */
export const pruneBranches = (store: PrunableStore, options: PruneBranchesOptions): Effect.Effect<PruneBranchesReport, CheckpointerError> =>
  Effect.gen(function*() {
    const decoded = decodeOptions(PruneBranchesOptions, options, "pruneBranches options")
    if (decoded._tag === "Left") return yield* decoded.left
    const { keepLabeled = true, olderThanMs, sessionId } = decoded.right
    const before = (yield* Clock.currentTimeMillis) - olderThanMs
    const ids = sessionId === undefined ? (yield* store.list()).map((session) => session.id) : [sessionId]
    const sessions: Array<SessionPruning> = []
    const skipped: Array<PruneBranchesReport["skipped"][number]> = []
    for (const id of ids) {
      const outcome = yield* pruneOne(store, id, { before, keepLabeled, skipUnreadable: sessionId === undefined })
      if (outcome._tag === "skipped") skipped.push({ sessionId: id, reason: outcome.reason, detail: outcome.detail })
      else if (outcome.pruning !== undefined) sessions.push(outcome.pruning)
    }
    return { before, sessions, skipped }
  })
