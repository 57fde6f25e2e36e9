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
 *    interruption put every changed file back (and close the intent); then truncate the log
 *    with the expected head, which takes the intent with it (a files-only restore cuts just the
 *    intent) — a conflict there puts the files back too.
 *
 * Not a file-system or database transaction, but a crash part-way leaves the intent in the log:
 * the session then refuses turns (`RestoreInterruptedError`) until the same restore finishes
 * it or `undoInterruptedRestore` puts every file back from the intent.
 */
import { posix } from "node:path"
import { Cause, Context, Data, Effect, Layer, PubSub, type Queue, Schema, type Scope, Stream } from "effect"
import { messageOf } from "../core/causes.js"
import { Checkpointer, checkSeqArgument } from "../core/Checkpointer.js"
import { AbortSignalOption, decodeOptions, Flag } from "../core/options.js"
import { type CheckpointerError, type ConfigurationError, type Refusal, SnapshotBlobError } from "../core/errors.js"
import { type FileAfterState, type RestoreBefore, RestoreEnded, type RestoreFile, RestoreStarted } from "../core/events.js"
import { RestoreFailedError, RestoreInterruptedError, RestoreRefusedError, UnsafePathError, type WorkspaceIOError } from "./errors.js"
import { type CommandAfterCheckpoint, type FileAction, planRestore } from "../core/restore.js"
import * as Session from "../core/session.js"
import { sha256Hex } from "../core/sha256.js"
import * as SessionStates from "./SessionStates.js"
import { type AbsentState, type FileState, isWriteTemp, type PathState, Workspace } from "./Workspace.js"

export const RestoreOptions = Schema.Struct({
  /** Put back the files the agent changed after the checkpoint. Default true. */
  files: Schema.optional(Flag),
  /** Cut the conversation back to just before the checkpoint. Default true. */
  conversation: Schema.optional(Flag),
  /** Only plan: return every file, its action and any refusal; change nothing. Default false. */
  dryRun: Schema.optional(Flag),
  /** Abort part-way: every file already changed is put back. */
  signal: Schema.optional(AbortSignalOption)
})
export interface RestoreOptions extends Schema.Schema.Type<typeof RestoreOptions> {}

export interface PlannedFile {
  readonly path: string
  readonly action: "write" | "delete" | "none"
  readonly refusal?: Refusal
  /** True when the agent recorded no hash for this path, so outside edits cannot be detected. */
  readonly unverified: boolean
  /** True when the disk already holds what the restore puts there (a retried restore): nothing to do for it. */
  readonly alreadyRestored: boolean
}

export interface RestoreResult {
  /** Paths put back (for a dry run: none). */
  readonly restoredFiles: ReadonlyArray<string>
  readonly conversationRestored: boolean
  /** Paths restored without an outside-edit check (written before change hashes were recorded). */
  readonly unverifiedFiles: ReadonlyArray<string>
  /** Shell commands and custom tools run after the checkpoint: their effects are not undone. */
  readonly commandsNotUndone: ReadonlyArray<CommandAfterCheckpoint>
  readonly dryRun: boolean
  /** Every file considered, with its action and any refusal. */
  readonly plan: ReadonlyArray<PlannedFile>
  /** Every reason to refuse (a dry run reports them instead of failing). */
  readonly refusals: ReadonlyArray<Refusal>
  /** True when this finished (or undid) a restore that had been cut short. */
  readonly resumed: boolean
}

export type { InterruptedRestore } from "../core/session.js"

export type RestoreProgress =
  | {
    readonly type: "checkpoint_restore"
    readonly phase: "start"
    readonly sessionId: string
    readonly seq: number
    readonly total: number
    /** `restore`: a new restore; `finish`: finishing one cut short; `undo`: putting one cut short back. */
    readonly mode: "restore" | "finish" | "undo"
  }
  | {
    readonly type: "checkpoint_restore"
    readonly phase: "progress"
    readonly sessionId: string
    readonly seq: number
    readonly completed: number
    readonly total: number
    readonly path: string
  }
  | { readonly type: "checkpoint_restore"; readonly phase: "done"; readonly sessionId: string; readonly seq: number; readonly result: RestoreResult }
  | { readonly type: "checkpoint_restore"; readonly phase: "error"; readonly sessionId: string; readonly seq: number; readonly error: unknown }

export type RestoreError = RestoreRefusedError | RestoreFailedError | CheckpointerError | WorkspaceIOError | ConfigurationError

export interface TimeTravelService {
  readonly listCheckpoints: (sessionId: string) => Effect.Effect<ReadonlyArray<Session.Checkpoint>, CheckpointerError>
  readonly restore: (sessionId: string, seq: number, options?: RestoreOptions) => Effect.Effect<RestoreResult, RestoreError>
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

/** A state as a refusal's detail names it. */
const describeState = (state: FileAfterState) =>
  state._tag === "absent" ? "missing" : `sha-256 ${state.sha256.slice(0, 12)}…, mode ${state.mode.toString(8)}`

/** What a planned file goes back to, as a state to compare the disk with. */
const targetOf = (action: FileAction): FileAfterState =>
  action.kind === "write" ? { _tag: "file", sha256: action.sha256, size: action.size, mode: action.mode } : { _tag: "absent" }

/** What a file held before a restore, as a state to compare the disk with. */
const beforeStateOf = (before: RestoreBefore): FileAfterState =>
  before._tag === "missing" ? { _tag: "absent" } : { _tag: "file", sha256: before.sha256, size: before.size, mode: before.mode }

/** What is on disk, as a state (its bytes hashed once, however many states it is compared with). */
const stateOf = (disk: FileState | AbsentState): FileAfterState =>
  disk.kind === "absent" ? { _tag: "absent" } : { _tag: "file", sha256: sha256Hex(disk.data), size: disk.data.length, mode: disk.mode }

const sameState = (a: FileAfterState, b: FileAfterState): boolean =>
  a._tag === "absent" ? b._tag === "absent" : b._tag === "file" && a.sha256 === b.sha256 && a.size === b.size && a.mode === b.mode

/** A path's state as a restore's intent records it: its bytes (to the snapshot store), or nothing. */
const recordedBefore = (disk: FileState | AbsentState, found: FileAfterState): RestoreBefore =>
  disk.kind === "absent" || found._tag === "absent"
    ? { _tag: "missing" }
    : { _tag: "content", data: disk.data, mode: found.mode, size: found.size, sha256: found.sha256 }

/** One change to the workspace: write these bytes, or delete. */
type FileOperation =
  | { readonly path: string; readonly kind: "write"; readonly data: Uint8Array; readonly mode: number }
  | { readonly path: string; readonly kind: "delete" }

/** The result of checking one path against the disk before anything changes. */
type Checked =
  | { readonly kind: "refused"; readonly refusal: Refusal }
  /** Already holds what the restore puts there. */
  | { readonly kind: "done" }
  /** `found` is `disk` as a state. */
  | { readonly kind: "ready"; readonly disk: FileState | AbsentState; readonly found: FileAfterState }

export const make = Effect.gen(function*() {
  const checkpointer = yield* Checkpointer
  const workspace = yield* Workspace
  const states = yield* SessionStates.fromContextOrNew
  const hub = yield* PubSub.unbounded<RestoreProgress>()
  const publish = (progress: RestoreProgress) => PubSub.publish(hub, progress)

  /**
   * Check one path against the disk before anything changes: `done` when it already holds
   * `target` (as a restore cut short leaves the files it got to: not an outside edit); `ready`
   * when it holds one of the `allowed` states (what the agent left; what it held when an
   * interrupted restore began) or there is nothing to check it against; otherwise refused
   * (`whoLeftIt` says who left the first allowed state, for the refusal's detail).
   */
  const check = (
    path: string,
    target: FileAfterState,
    allowed: ReadonlyArray<FileAfterState>,
    whoLeftIt: string
  ): Effect.Effect<Checked, WorkspaceIOError> =>
    Effect.gen(function*() {
      const current = yield* Effect.either(workspace.inspect(path))
      if (current._tag === "Left") {
        if (current.left instanceof UnsafePathError) {
          return { kind: "refused", refusal: { reason: "unsafe_path", path, detail: current.left.reason } } as const
        }
        return yield* Effect.fail(current.left)
      }
      const disk = current.right
      if (disk.kind === "other") {
        return { kind: "refused", refusal: { reason: "unsafe_path", path, detail: `the path is now ${disk.description}` } } as const
      }
      const found = stateOf(disk)
      if (sameState(found, target)) return { kind: "done" } as const
      if (allowed.length === 0 || allowed.some((state) => sameState(found, state))) return { kind: "ready", disk, found } as const
      const left = allowed[0]!._tag === "absent" ? "deleted it" : `left ${describeState(allowed[0]!)}`
      return {
        kind: "refused",
        refusal: { reason: "modified_externally", path, detail: `${whoLeftIt} ${left}; the disk now has ${describeState(found)}` }
      } as const
    })

  /**
   * Close the intent at `startedSeq` after its files were finished or put back: cut it off the
   * log when it is the last event (the log is then exactly as before), or else mark it ended.
   */
  const closeIntent = (sessionId: string, startedSeq: number, outcome: "finished" | "undone", head: number) =>
    head === startedSeq
      ? Effect.asVoid(checkpointer.truncate(sessionId, startedSeq - 1, head))
      : Effect.asVoid(checkpointer.append(sessionId, [new RestoreEnded({ startedSeq, outcome })], head))

  /**
   * Apply `operations` in order, then `commit`. A failure, an abort or an interruption before
   * the commit is through puts every file changed back as it was, runs `afterPutBack` (when all
   * of them could be) and fails with `RestoreFailedError`.
   */
  const applyFiles = (
    target: { readonly sessionId: string; readonly seq: number },
    operations: ReadonlyArray<FileOperation>,
    commit: Effect.Effect<void, CheckpointerError>,
    signal: AbortSignal | undefined,
    afterPutBack: Effect.Effect<string | undefined>
  ): Effect.Effect<void, RestoreFailedError> => {
    const { seq, sessionId } = target
    const total = operations.length
    // What each path held before this restore touched it, to put it back on failure.
    const replaced: Array<{ readonly path: string; readonly before: PathState }> = []
    const putBack = Effect.gen(function*() {
      const failed: Array<string> = []
      for (const { before, path } of [...replaced].reverse()) {
        const undone = before.kind === "file"
          ? workspace.write(path, before.data, before.mode)
          : before.kind === "absent"
          ? workspace.remove(path)
          : Effect.void
        if ((yield* Effect.either(undone))._tag === "Left") failed.push(path)
      }
      return failed
    })
    const checkAbort = Effect.suspend(() => (signal?.aborted === true ? Effect.fail(new RestoreAborted()) : Effect.void))
    const execute = Effect.gen(function*() {
      let completed = 0
      for (const operation of operations) {
        yield* checkAbort
        const before = yield* workspace.inspect(operation.path)
        replaced.push({ path: operation.path, before })
        yield* operation.kind === "write"
          ? workspace.write(operation.path, operation.data, operation.mode)
          : workspace.remove(operation.path)
        completed++
        yield* publish({ type: "checkpoint_restore", phase: "progress", sessionId, seq, completed, total, path: operation.path })
        // Let listeners, an abort and an interruption in between files.
        yield* Effect.yieldNow()
      }
      yield* checkAbort
    })
    // The commit runs uninterruptibly once the files are in place, so it either commits with
    // them in place or fails and they are put back.
    return Effect.uninterruptibleMask((restoreInterruptibility) =>
      Effect.gen(function*() {
        const outcome = yield* Effect.exit(Effect.zipRight(restoreInterruptibility(execute), commit))
        if (outcome._tag === "Success") return
        const notRolledBack = yield* putBack
        const note = notRolledBack.length === 0 ? yield* afterPutBack : undefined
        const error = new RestoreFailedError({
          sessionId,
          seq,
          detail: describeCause(outcome.cause) + (note === undefined ? "" : `; ${note}`),
          notRolledBack,
          cause: Cause.squash(outcome.cause)
        })
        yield* publish({ type: "checkpoint_restore", phase: "error", sessionId, seq, error })
        return yield* error
      })
    )
  }

  /**
   * Remove the temporary files that writes cut short by the crash left beside the files of an
   * interrupted restore (a restore that completes leaves none). Best effort: one that cannot be
   * listed or removed is left.
   */
  const removeWriteTemps = (paths: ReadonlyArray<string>) =>
    Effect.forEach(
      new Set(paths.map((file) => posix.dirname(file))),
      (directory) =>
        workspace.list(directory).pipe(
          Effect.flatMap((names) =>
            Effect.forEach(
              names.filter(isWriteTemp),
              (name) => workspace.remove(directory === "." ? name : `${directory}/${name}`),
              { discard: true }
            )
          ),
          Effect.ignore
        ),
      { discard: true }
    )

  /** A blob's bytes from the snapshot store, or why they cannot be had (a refusal, not a failure). */
  const storedBytes = (sessionId: string, sha256: string): Effect.Effect<Uint8Array | SnapshotBlobError, CheckpointerError> =>
    checkpointer.readSnapshot(sessionId, sha256).pipe(
      Effect.catchIf((error): error is SnapshotBlobError => error instanceof SnapshotBlobError, (error) => Effect.succeed(error))
    )
  const blobRefusal = (path: string, error: SnapshotBlobError): Refusal => ({
    reason: error.reason === "missing" ? "snapshot_missing" : "snapshot_truncated",
    path,
    detail: error.message
  })

  const restore = (sessionId: string, seq: number, input: RestoreOptions = {}) =>
    Effect.gen(function*() {
      const options = yield* decodeOptions(RestoreOptions, input, "restore options")
      yield* checkSeqArgument(sessionId, "seq", seq)
      const files = options.files ?? true
      const conversation = options.conversation ?? true
      const dryRun = options.dryRun ?? false
      // The shared fold: no re-read of the log. Its head is the expected head of what this writes.
      const { state } = yield* states.get(sessionId)
      const plan = planRestore(sessionId, state, seq, { files, conversation })
      // A restore cut short is finished by the same restore; anything else waits until it is.
      const pending = state.pendingRestore
      const resuming = pending !== undefined
      const interruptedRefusal: ReadonlyArray<Refusal> =
        pending === undefined || (pending.event.checkpoint === seq && pending.event.conversation === conversation && files)
          ? []
          : [{ reason: "restore_interrupted", detail: new RestoreInterruptedError({ sessionId, checkpoint: pending.event.checkpoint, startedSeq: pending.seq }).message }]
      const beforeInIntent = new Map(pending?.event.files.map((file) => [file.path, beforeStateOf(file.before)]) ?? [])

      const diskRefusals: Array<Refusal> = []
      const operations: Array<FileOperation> = []
      const recorded: Array<RestoreFile> = []
      const alreadyRestored = new Set<string>()
      for (const file of plan.files) {
        const target = targetOf(file.action)
        const allowed = [file.expected, beforeInIntent.get(file.path)].filter((state) => state !== undefined)
        const checked = yield* check(file.path, target, allowed, "the agent")
        if (checked.kind === "done") {
          alreadyRestored.add(file.path)
          continue
        }
        if (checked.kind === "refused") {
          diskRefusals.push(checked.refusal)
          continue
        }
        const action = file.action
        if (action.kind === "write") {
          const data = action.data ?? (yield* storedBytes(sessionId, action.sha256))
          if (data instanceof SnapshotBlobError) {
            diskRefusals.push(blobRefusal(file.path, data))
            continue
          }
          operations.push({ path: file.path, kind: "write", data, mode: action.mode })
        } else operations.push({ path: file.path, kind: "delete" })
        recorded.push({ path: file.path, before: recordedBefore(checked.disk, checked.found), target })
      }
      const refusals = [...interruptedRefusal, ...plan.refusals, ...diskRefusals]
      const refusalFor = (path: string) => refusals.find((refusal) => refusal.path === path)
      const planned: Array<PlannedFile> = [
        ...plan.files.map((file) => {
          const refusal = refusalFor(file.path)
          return {
            path: file.path,
            action: file.action.kind,
            ...(refusal === undefined ? {} : { refusal }),
            unverified: file.expected === undefined,
            alreadyRestored: alreadyRestored.has(file.path)
          }
        }),
        ...plan.refusals.flatMap((refusal) =>
          refusal.path === undefined ? [] : [{ path: refusal.path, action: "none" as const, refusal, unverified: false, alreadyRestored: false }]
        )
      ].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
      const report = {
        unverifiedFiles: plan.unverifiedFiles,
        commandsNotUndone: plan.commandsNotUndone,
        plan: planned,
        refusals,
        resumed: resuming
      }
      if (dryRun) {
        return { ...report, restoredFiles: [], conversationRestored: false, dryRun: true } satisfies RestoreResult
      }
      if (refusals.length > 0) {
        const error = new RestoreRefusedError({ sessionId, seq, refusals })
        yield* publish({ type: "checkpoint_restore", phase: "error", sessionId, seq, error })
        return yield* error
      }

      // The intent first, before any file changes (a restore cut short can then be finished or
      // undone); its append with the expected head also claims the session against another restorer.
      let head = plan.head
      let startedSeq = pending?.seq
      if (pending === undefined && operations.length > 0) {
        head = yield* checkpointer.append(sessionId, [new RestoreStarted({ checkpoint: seq, conversation, files: recorded })], plan.head).pipe(
          Effect.tapError((error) => publish({ type: "checkpoint_restore", phase: "error", sessionId, seq, error }))
        )
        startedSeq = head
      }
      if (pending !== undefined) yield* removeWriteTemps(pending.event.files.map((file) => file.path))
      yield* publish({ type: "checkpoint_restore", phase: "start", sessionId, seq, total: operations.length, mode: resuming ? "finish" : "restore" })

      // The commit point: the conversation cut back (the intent goes with it), or the intent closed.
      const commit: Effect.Effect<void, CheckpointerError> = conversation
        ? Effect.asVoid(checkpointer.truncate(sessionId, plan.truncateTo, head))
        : startedSeq === undefined
        ? Effect.void
        : closeIntent(sessionId, startedSeq, "finished", head)
      // Put back after a failure, a fresh restore's intent is closed too; a resumed one stays open
      // (its files are as the interrupted restore left them).
      const afterPutBack: Effect.Effect<string | undefined> = resuming || startedSeq === undefined
        ? Effect.succeed(undefined)
        : Effect.flatMap(checkpointer.head(sessionId), (now) => closeIntent(sessionId, startedSeq, "undone", now)).pipe(
          Effect.as(undefined),
          Effect.catchAll((error) =>
            Effect.succeed(`its intent stays in the log (${error.message}): undoInterruptedRestore closes it`)
          )
        )
      yield* applyFiles({ sessionId, seq }, operations, commit, options.signal, afterPutBack)

      const result: RestoreResult = {
        ...report,
        restoredFiles: plan.files.map((file) => file.path),
        conversationRestored: conversation,
        dryRun: false
      }
      // Blobs only the cut events (or the closed intent) referenced go now; a failure here loses nothing (the next sweep retries).
      if (conversation || startedSeq !== undefined) yield* sweep(sessionId)
      yield* publish({ type: "checkpoint_restore", phase: "done", sessionId, seq, result })
      return result
    })

  const sweep = (sessionId: string) =>
    checkpointer.sweepSnapshots(sessionId).pipe(
      Effect.asVoid,
      Effect.catchAll((error) => Effect.logWarning(`restore of "${sessionId}": sweeping unreferenced snapshots failed`, error))
    )

  /** Put every file an interrupted restore changed back to what it held when the restore began, and close its intent. */
  const undoInterruptedRestore = (sessionId: string) =>
    Effect.gen(function*() {
      const { state } = yield* states.get(sessionId)
      const pending = state.pendingRestore
      if (pending === undefined) {
        return yield* new RestoreRefusedError({
          sessionId,
          seq: 0,
          refusals: [{ reason: "no_interrupted_restore", detail: `session "${sessionId}" has no restore that was cut short` }]
        })
      }
      const seq = pending.event.checkpoint
      const refusals: Array<Refusal> = []
      const operations: Array<FileOperation> = []
      for (const file of pending.event.files) {
        const before = beforeStateOf(file.before)
        const checked = yield* check(file.path, before, [file.target], "the interrupted restore")
        if (checked.kind === "refused") refusals.push(checked.refusal)
        if (checked.kind !== "ready") continue
        if (file.before._tag === "missing") {
          operations.push({ path: file.path, kind: "delete" })
          continue
        }
        const data = file.before._tag === "content" ? file.before.data : yield* storedBytes(sessionId, file.before.sha256)
        if (data instanceof SnapshotBlobError) refusals.push(blobRefusal(file.path, data))
        else operations.push({ path: file.path, kind: "write", data, mode: file.before.mode })
      }
      if (refusals.length > 0) {
        const error = new RestoreRefusedError({ sessionId, seq, refusals })
        yield* publish({ type: "checkpoint_restore", phase: "error", sessionId, seq, error })
        return yield* error
      }
      yield* removeWriteTemps(pending.event.files.map((file) => file.path))
      yield* publish({ type: "checkpoint_restore", phase: "start", sessionId, seq, total: operations.length, mode: "undo" })
      yield* applyFiles({ sessionId, seq }, operations, closeIntent(sessionId, pending.seq, "undone", state.head), undefined, Effect.succeed(undefined))
      yield* sweep(sessionId)
      const result: RestoreResult = {
        restoredFiles: operations.map((operation) => operation.path),
        conversationRestored: false,
        unverifiedFiles: [],
        commandsNotUndone: [],
        dryRun: false,
        plan: [],
        refusals: [],
        resumed: true
      }
      yield* publish({ type: "checkpoint_restore", phase: "done", sessionId, seq, result })
      return result
    })

  const service: TimeTravelService = {
    listCheckpoints: (sessionId) => Effect.map(states.get(sessionId), ({ state }) => Session.checkpoints(state)),
    interruptedRestore: (sessionId) => Effect.map(states.get(sessionId), ({ state }) => Session.interruptedRestore(state)),
    restore: (sessionId, seq, options) => restore(sessionId, seq, options),
    undoInterruptedRestore,
    progress: Stream.fromPubSub(hub),
    subscribe: PubSub.subscribe(hub)
  }
  return service
})

/** An `AbortSignal` fired: turned into a `RestoreFailedError` after the files are put back. */
class RestoreAborted extends Data.TaggedError("RestoreAborted") {
  override get message() {
    return "aborted"
  }
}

const describeCause = (cause: Cause.Cause<unknown>): string => {
  if (Cause.isInterruptedOnly(cause)) return "interrupted"
  return messageOf(Cause.squash(cause))
}

export const layer: Layer.Layer<TimeTravel, never, Checkpointer | Workspace> = Layer.effect(TimeTravel, make)
