/**
 * Time travel: list a session's checkpoints, and restore it to just before one — the files
 * the agent changed and/or the conversation — or refuse, with a reason per file.
 *
 * 1. plan (pure, `planRestore`) from the folded log;
 * 2. preflight every file on disk (path safety, outside edits) before changing any; a file
 *    already at its target (a retried restore) needs nothing;
 * 3. append the intent (`RestoreStarted`: each file's bytes before, and its target), with the
 *    expected head;
 * 4. execute: write each file atomically, keeping what it replaced; on any failure, abort or
 *    interruption put every changed file back (and close the intent); then move the session's
 *    leaf back to just before the checkpoint (`LeafMoved`, with the expected head, naming the
 *    intent it completes; a files-only restore closes the intent) — a conflict there puts the
 *    files back too. No event is deleted: what the move leaves stays in the log as a branch.
 *
 * Not a file-system or database transaction, but a crash part-way leaves the intent in the log:
 * the session then refuses turns (`RestoreInterruptedError`) until the same restore finishes
 * it or `undoInterruptedRestore` puts every file back from the intent.
 */
import { Context, Effect, Layer, Option, PubSub, type Queue, type Scope, Stream } from "effect"
import { Checkpointer, checkSeqArgument } from "../core/Checkpointer.js"
import { decodeOptions } from "../core/internal/options.js"
import { type CheckpointerError, ConfigurationError, InvalidSeqError, type Refusal } from "../core/errors.js"
import { BranchLabeled, LeafMoved, type MoveReason } from "../core/events.js"
import { type RestoreFailedError, RestoreRefusedError } from "./errors.js"
import { type FilesPlan, planMove, planRestore } from "../core/restore.js"
import * as Session from "../core/session.js"
import * as ForkSession from "./forkSession.js"
import {
  type ForkOptions,
  type ForkResult,
  MoveOptions,
  nothingRestored,
  plannedFiles,
  type RestoreError,
  RestoreOptions,
  type RestoreProgress,
  type RestoreResult
} from "./timeTravelTypes.js"
import * as RestoreFiles from "./restoreFiles.js"
import * as RestoreIntent from "./restoreIntent.js"
import * as Preflight from "./restorePreflight.js"
import * as SessionStates from "./SessionStates.js"
import { Workspace } from "./Workspace.js"
import { homedState } from "./sessionWorkdir.js"
import { WorkspaceCapture } from "./WorkspaceCapture.js"
import { makeRecordRestore } from "./recordRestore.js"


export interface TimeTravelService {
  readonly listCheckpoints: (sessionId: string) => Effect.Effect<ReadonlyArray<Session.Checkpoint>, CheckpointerError>
  readonly restore: (sessionId: string, seq: number, options?: RestoreOptions) => Effect.Effect<RestoreResult, RestoreError>
  /**
   * Undo the session's last move — a restore, a switch or a redo: back to where it started, the
   * conversation and the workspace as the session knew it there. Refused with a reason per file
   * when a file was edited outside since (or the user's edits since would be overwritten without
   * `includeUserEdits`), and with `nothing_to_undo` when there is no move to undo. Repeated, it
   * walks the history of moves back.
   */
  readonly undo: (sessionId: string, options?: MoveOptions) => Effect.Effect<RestoreResult, RestoreError>
  /** Redo the last undo (`nothing_to_redo` when there is none: a restore or a switch since empties them). */
  readonly redo: (sessionId: string, options?: MoveOptions) => Effect.Effect<RestoreResult, RestoreError>
  /**
   * Switch to another branch: to `leaf`, the tip of a branch (from `tree`) or the point just
   * before a prompt, with the workspace as the session knew it there (`not_a_branch` otherwise).
   * Undone by `undo`, like a restore.
   */
  readonly switchBranch: (sessionId: string, leaf: number, options?: MoveOptions) => Effect.Effect<RestoreResult, RestoreError>
  /**
   * Fork the session: a new session from just before checkpoint `seq` (of any branch), or from
   * its tip when `seq` is undefined — the conversation up to there and the workspace as it was
   * there, in this workdir (its files move, as for a restore; refused the same way) or written
   * into `options.workdir`. The fork shares the session's events and blobs instead of copying
   * them, and knows where it came from (`tree(fork).forkedFrom`).
   */
  readonly fork: (sessionId: string, seq: number | undefined, options?: ForkOptions) => Effect.Effect<ForkResult, RestoreError>
  /** The session's tree: its checkpoints on every branch, its branches, the current one, labels, what undo and redo would do. */
  readonly tree: (sessionId: string) => Effect.Effect<Session.SessionTree, CheckpointerError>
  /** Name a node — a checkpoint or a branch's tip — for the tree; an empty name removes the name. */
  readonly label: (sessionId: string, seq: number, name: string) => Effect.Effect<void, CheckpointerError | ConfigurationError>
  /** The restore of this session that was cut short, if any. */
  readonly interruptedRestore: (sessionId: string) => Effect.Effect<Session.InterruptedRestore | undefined, CheckpointerError>
  /**
   * Put every file the session's interrupted restore changed back to what it held when that
   * restore began, and close its intent (the log is then as before it). Refused, changing
   * nothing, when a file is at neither state (edited since) or there is no interrupted restore.
   */
  readonly undoInterruptedRestore: (sessionId: string) => Effect.Effect<RestoreResult, RestoreError>
  /** `checkpoint_restore` progress of every restore, for as long as the stream is consumed. */
  readonly progress: Stream.Stream<RestoreProgress>
  /** The same progress through a queue subscribed when this effect runs (nothing published later is missed). */
  readonly subscribe: Effect.Effect<Queue.Dequeue<RestoreProgress>, never, Scope.Scope>
}

export class TimeTravel extends Context.Tag("@lite-agent/tools/TimeTravel")<TimeTravel, TimeTravelService>() {}

export {
  ForkOptions,
  type ForkResult,
  MoveOptions,
  type PlannedFile,
  type RestoreError,
  RestoreOptions,
  type RestoreProgress,
  type RestoreResult
} from "./timeTravelTypes.js"
export type { InterruptedRestore } from "../core/session.js"

/** The longest name a node can be given. */
export const MAX_LABEL_LENGTH = 200

/** How a refusal names a move (a restore names itself by its checkpoint). */
const operationOf = (reason: MoveReason, isMove: boolean): { readonly operation?: "undo" | "redo" | "switch" } =>
  isMove && (reason === "undo" || reason === "redo" || reason === "switch") ? { operation: reason } : {}

export const make = Effect.gen(function*() {
  const checkpointer = yield* Checkpointer
  const workspace = yield* Workspace
  const states = yield* SessionStates.fromContextOrNew
  const capture = Option.getOrUndefined(yield* Effect.serviceOption(WorkspaceCapture))
  const hub = yield* PubSub.unbounded<RestoreProgress>()
  const publish = (progress: RestoreProgress) => PubSub.publish(hub, progress)
  const preflight = Preflight.make(workspace, checkpointer)
  const intents = RestoreIntent.make(checkpointer, preflight)
  const applier = RestoreFiles.make(workspace)
  const recordRestore = makeRecordRestore({ checkpointer, states, workspace, capture })
  const reporting = (sessionId: string, seq: number) => ({
    onProgress: (completed: number, total: number, path: string) =>
      publish({ type: "checkpoint_restore", phase: "progress", sessionId, seq, completed, total, path }),
    onFailure: (error: RestoreFailedError) => publish({ type: "checkpoint_restore", phase: "error", sessionId, seq, error })
  })

  /**
   * Carry out a planned restore or move: preflight every file, then (unless a dry run, or refused)
   * log the intent, change the files and commit — the leaf moved (`conversation`), or the intent
   * closed. `pendingRefusals`: why a restore cut short blocks this one (none when this one is it).
   */
  const execute = (run: {
    readonly sessionId: string
    /** The checkpoint restored to, or the leaf moved to: what progress and refusals name. */
    readonly seq: number
    readonly state: Session.SessionState
    readonly plan: FilesPlan
    readonly pendingRefusals: ReadonlyArray<Refusal>
    readonly intent: { readonly checkpoint: number } | { readonly move: { readonly reason: MoveReason; readonly to: number } }
    /** Move the session's leaf to `plan.leafAfter` (with this reason), or keep the conversation (files only). */
    readonly conversation: boolean
    readonly reason: MoveReason
    readonly dryRun: boolean
    readonly signal: AbortSignal | undefined
  }) =>
    Effect.gen(function*() {
      const { plan, sessionId, seq, state } = run
      // A restore cut short is finished by the same restore; anything else waits until it is.
      const pending = state.pendingRestore
      const resuming = pending !== undefined
      const { alreadyRestored, operations, recorded, refusals: diskRefusals } = yield* preflight.files(
        sessionId,
        plan.files,
        RestoreIntent.statesBefore(pending)
      )
      const refusals = [...run.pendingRefusals, ...plan.refusals, ...diskRefusals]
      const report = {
        unverifiedFiles: plan.unverifiedFiles,
        commandsNotUndone: plan.commandsNotUndone,
        notCovered: plan.notCovered,
        plan: plannedFiles(plan, refusals, alreadyRestored),
        refusals,
        resumed: resuming
      }
      if (run.dryRun) {
        return { ...report, restoredFiles: [], conversationRestored: false, dryRun: true } satisfies RestoreResult
      }
      if (refusals.length > 0) {
        const error = new RestoreRefusedError({ sessionId, seq, refusals, ...operationOf(run.reason, "move" in run.intent) })
        yield* publish({ type: "checkpoint_restore", phase: "error", sessionId, seq, error })
        return yield* error
      }

      // The intent first, before any file changes (a restore cut short can then be finished or
      // undone); its append with the expected head also claims the session against another restorer.
      let head = plan.head
      let startedSeq = pending?.seq
      if (pending === undefined && operations.length > 0) {
        head = yield* intents.start(sessionId, { ...run.intent, conversation: run.conversation, files: recorded }, plan.head).pipe(
          Effect.tapError((error) => publish({ type: "checkpoint_restore", phase: "error", sessionId, seq, error }))
        )
        startedSeq = head
      }
      if (pending !== undefined) yield* applier.removeWriteTemps(pending.event.files.map((file) => file.path))
      const mode = resuming ? "finish" : "checkpoint" in run.intent ? "restore" : "move"
      yield* publish({ type: "checkpoint_restore", phase: "start", sessionId, seq, total: operations.length, mode })

      const applied = yield* applier.apply(operations, {
        sessionId,
        seq,
        commit: intents.commit(sessionId, {
          conversation: run.conversation,
          reason: run.reason,
          leafBefore: state.leaf,
          leafAfter: plan.leafAfter,
          startedSeq,
          head
        }),
        signal: run.signal,
        // Put back after a failure, a fresh restore's intent is closed too; a resumed one stays open
        // (its files are as the interrupted restore left them).
        afterPutBack: resuming || startedSeq === undefined ? Effect.succeed(undefined) : intents.closeAfterPutBack(sessionId, startedSeq),
        ...reporting(sessionId, seq)
      })

      const result: RestoreResult = {
        ...report,
        notCovered: [...report.notCovered, ...RestoreFiles.notRestored(applied)],
        restoredFiles: RestoreFiles.putBack(plan.files.map((file) => file.path), applied),
        conversationRestored: run.conversation,
        dryRun: false
      }
      // At the leaf moved to, the last capture of each covered path is its state there — what the
      // restore put back — except for a directory it had to keep.
      if (!run.conversation || applied.keptDirectories.length > 0) yield* recordRestore(sessionId, operations, applied)
      yield* publish({ type: "checkpoint_restore", phase: "done", sessionId, seq, result })
      return result
    })

  const restore = (sessionId: string, seq: number, input: RestoreOptions = {}) =>
    Effect.gen(function*() {
      const options = yield* decodeOptions(RestoreOptions, input, "restore options")
      yield* checkSeqArgument(sessionId, "seq", seq)
      // The shared fold: no re-read of the log. Its head is the expected head of what this writes.
      const { state } = yield* states.get(sessionId)
      // A checkpoint of another branch: the restore is a move to just before it, files and conversation.
      // Not when the session is there already (the same restore again, or finishing one a crash cut short).
      const node = Session.checkpointNode(state, seq)
      if (typeof node === "object" && !node.onBranch && node.before !== state.leaf && state.pendingRestore === undefined) {
        return yield* restoreOnOtherBranch(sessionId, state, seq, node.before, options)
      }
      // Only what changes files belongs to a workdir: the conversation alone is restored anywhere.
      if (options.files === false) return yield* restoreFrom(sessionId, state, seq, options)
      return yield* restoreFrom(sessionId, yield* homed(sessionId, state, "restore", options), seq, options)
    })

  /** The session's state once it may change files here: refused when its log names another workdir, unless re-homed. */
  const homed = (sessionId: string, state: Session.SessionState, operation: string, options: MoveOptions) =>
    homedState(checkpointer, states, { sessionId, state, workdir: workspace.root, operation, rehome: options.rehome ?? false, dryRun: options.dryRun ?? false })

  /**
   * Restore to just before checkpoint `seq` of a branch that is not the current one: the session
   * moves there as a switch does (its undo comes back). Conversation and files go together: one
   * without the other would mix two branches.
   */
  const restoreOnOtherBranch = (sessionId: string, state: Session.SessionState, seq: number, before: number, options: RestoreOptions) =>
    Effect.gen(function*() {
      if (options.files === false || options.conversation === false) {
        return yield* new RestoreRefusedError({
          sessionId,
          seq,
          refusals: [{
            reason: "other_branch",
            detail: `seq ${seq} is a checkpoint of another branch of session "${sessionId}": a restore there moves the conversation ` +
              `and the files together (files: false and conversation: false are for the current branch's checkpoints)`
          }]
        })
      }
      return yield* moveTo(sessionId, yield* homed(sessionId, state, "restore", options), "switch", before, options)
    })

  /** Restore the session, folded to `state`, to just before checkpoint `seq`. */
  const restoreFrom = (sessionId: string, state: Session.SessionState, seq: number, options: RestoreOptions) => {
    const files = options.files ?? true
    const conversation = options.conversation ?? true
    return execute({
      sessionId,
      seq,
      state,
      plan: planRestore(sessionId, state, seq, { files, conversation, includeUserEdits: options.includeUserEdits ?? false }),
      pendingRefusals: RestoreIntent.pendingRefusals(sessionId, state.pendingRestore, { checkpoint: seq, conversation, files }),
      intent: { checkpoint: seq },
      conversation,
      reason: "restore",
      dryRun: options.dryRun ?? false,
      signal: options.signal
    })
  }

  /**
   * Undo the last move of the session's leaf (a restore, a switch, a redo), or redo the last
   * undo: the leaf goes back to where that move started, with the workspace as the session knew
   * it there; a path edited outside since is refused.
   */
  const moveAlongHistory = (sessionId: string, reason: "undo" | "redo", input: MoveOptions = {}) =>
    Effect.gen(function*() {
      const options = yield* decodeOptions(MoveOptions, input, `${reason} options`)
      const state = yield* homed(sessionId, (yield* states.get(sessionId)).state, reason, options)
      const reversed = (reason === "undo" ? state.undoable : state.redoable).at(-1)
      if (reversed === undefined) {
        const error = new RestoreRefusedError({
          sessionId,
          seq: 0,
          operation: reason,
          refusals: [{
            reason: reason === "undo" ? "nothing_to_undo" : "nothing_to_redo",
            detail: reason === "undo"
              ? `session "${sessionId}" has no restore, switch or redo to undo`
              : `session "${sessionId}" has no undo to redo (a restore or a switch since empties what redo can do)`
          }]
        })
        return yield* error
      }
      return yield* moveTo(sessionId, state, reason, reversed.from, options)
    })

  /** Move the session's leaf to `to` (a leaf a move may go to), the workspace with it. */
  const moveTo = (sessionId: string, state: Session.SessionState, reason: "undo" | "redo" | "switch", to: number, options: MoveOptions) =>
    Effect.gen(function*() {
      // The state at the target: the fold of the move itself, as it will be logged.
      const target = Session.step(state, { seq: state.head + 1, ts: state.lastTs ?? 0, event: new LeafMoved({ from: state.leaf, to, reason }) })
      return yield* execute({
        sessionId,
        seq: to,
        state,
        plan: planMove(state, target, { includeUserEdits: options.includeUserEdits ?? false }),
        pendingRefusals: RestoreIntent.pendingRefusals(sessionId, state.pendingRestore, { move: { reason, to } }),
        intent: { move: { reason, to } },
        conversation: true,
        reason,
        dryRun: options.dryRun ?? false,
        signal: options.signal
      })
    })

  /** Switch to another branch of the session: its leaf `leaf` (a branch's tip, from `tree`), conversation and workspace. */
  const switchBranch = (sessionId: string, leaf: number, input: MoveOptions = {}) =>
    Effect.gen(function*() {
      const options = yield* decodeOptions(MoveOptions, input, "switch options")
      yield* checkSeqArgument(sessionId, "leaf", leaf)
      const state = yield* homed(sessionId, (yield* states.get(sessionId)).state, "switch", options)
      if (!state.kept.isTarget(leaf) || leaf === state.leaf) {
        return yield* new RestoreRefusedError({
          sessionId,
          seq: leaf,
          operation: "switch",
          refusals: [{
            reason: "not_a_branch",
            detail: leaf === state.leaf
              ? `seq ${leaf} is already the current leaf of session "${sessionId}"`
              : `seq ${leaf} is not the tip of a branch of session "${sessionId}" (nor the point before a prompt)`
          }]
        })
      }
      return yield* moveTo(sessionId, state, "switch", leaf, options)
    })

  /** Name a node (a checkpoint, a branch's tip); an empty name removes it. */
  const label = (sessionId: string, seq: number, name: string) =>
    Effect.gen(function*() {
      yield* checkSeqArgument(sessionId, "seq", seq)
      if (typeof name !== "string" || name.length > MAX_LABEL_LENGTH) {
        return yield* new ConfigurationError({
          option: "label",
          detail: `a label is a string of at most ${MAX_LABEL_LENGTH} characters; got ${typeof name === "string" ? `${name.length} characters` : typeof name}`
        })
      }
      const { state } = yield* states.get(sessionId)
      if (seq > state.head || (state.parents.at(seq - 1) ?? Session.NOT_A_NODE) === Session.NOT_A_NODE) {
        return yield* new InvalidSeqError({ sessionId, argument: "seq", value: seq, reason: "not a node of the session (a message, a capture, a file record)" })
      }
      yield* checkpointer.append(sessionId, [new BranchLabeled({ seq, label: name })])
    })

  /** Put every file an interrupted restore changed back to what it held when the restore began, and close its intent. */
  const undoInterruptedRestore = (sessionId: string) =>
    Effect.gen(function*() {
      // Its files are half way in the session's own workdir: put back there, never re-homed.
      const state = yield* homed(sessionId, (yield* states.get(sessionId)).state, "undoInterruptedRestore", {})
      const pending = state.pendingRestore
      if (pending === undefined) {
        return yield* new RestoreRefusedError({
          sessionId,
          seq: 0,
          refusals: [{ reason: "no_interrupted_restore", detail: `session "${sessionId}" has no restore that was cut short` }]
        })
      }
      const seq = pending.event.checkpoint ?? pending.event.move?.to ?? 0
      const { operations, refusals } = yield* intents.planUndo(sessionId, pending)
      if (refusals.length > 0) {
        const error = new RestoreRefusedError({ sessionId, seq, refusals })
        yield* publish({ type: "checkpoint_restore", phase: "error", sessionId, seq, error })
        return yield* error
      }
      yield* applier.removeWriteTemps(pending.event.files.map((file) => file.path))
      yield* publish({ type: "checkpoint_restore", phase: "start", sessionId, seq, total: operations.length, mode: "undo" })
      const undone = yield* applier.apply(operations, {
        sessionId,
        seq,
        commit: intents.close(sessionId, pending.seq, "undone", state.head),
        signal: undefined,
        afterPutBack: Effect.succeed(undefined),
        ...reporting(sessionId, seq)
      })
      yield* recordRestore(sessionId, operations, undone)
      // Its result, as before, lists no kept directory: only the paths another process changed meanwhile.
      const changedOnly = { keptDirectories: [], changedMeanwhile: undone.changedMeanwhile }
      const result: RestoreResult = {
        ...nothingRestored,
        notCovered: RestoreFiles.notRestored(changedOnly),
        restoredFiles: RestoreFiles.putBack(operations.map((operation) => operation.path), changedOnly),
        resumed: true
      }
      yield* publish({ type: "checkpoint_restore", phase: "done", sessionId, seq, result })
      return result
    })

  const forks = ForkSession.make({
    checkpointer,
    states,
    workspace,
    restore: (sessionId, state, seq, options) => restoreFrom(sessionId, state, seq, options),
    switchTo: (sessionId, state, leaf, options) => moveTo(sessionId, state, "switch", leaf, options)
  })

  const service: TimeTravelService = {
    listCheckpoints: (sessionId) => Effect.map(states.get(sessionId), ({ state }) => Session.checkpoints(state)),
    interruptedRestore: (sessionId) => Effect.map(states.get(sessionId), ({ state }) => Session.interruptedRestore(state)),
    restore: (sessionId, seq, options) => restore(sessionId, seq, options),
    undo: (sessionId, options) => moveAlongHistory(sessionId, "undo", options),
    redo: (sessionId, options) => moveAlongHistory(sessionId, "redo", options),
    switchBranch,
    fork: forks.fork,
    tree: (sessionId) => Effect.map(states.get(sessionId), ({ state }) => Session.tree(state)),
    label,
    undoInterruptedRestore,
    progress: Stream.fromPubSub(hub),
    subscribe: PubSub.subscribe(hub)
  }
  return service
})

export const layer: Layer.Layer<TimeTravel, never, Checkpointer | Workspace> = Layer.effect(TimeTravel, make)
