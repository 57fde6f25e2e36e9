/**
 * Time travel: list a session's checkpoints, and restore it to just before one — the files
 * the agent changed and/or the conversation — or refuse, with a reason per file.
 *
 * 1. plan (pure, `planRestore`) from the folded log;
 * 2. preflight every file on disk (path safety, outside edits) before changing any; a file
 *    already at its target (a retried restore) needs nothing;
 * 3. execute: write each file atomically, keeping what it replaced; on any failure,
 *    abort or interruption put every changed file back; then truncate the log with the
 *    expected head — a conflict there puts the files back too.
 *
 * Not a file-system or database transaction: a crash of the process part-way leaves
 * what was done so far.
 */
import { Cause, Context, Data, Effect, Layer, PubSub, type Queue, Schema, type Scope, Stream } from "effect"
import { messageOf } from "../core/causes.js"
import { Checkpointer, checkSeqArgument } from "../core/Checkpointer.js"
import { AbortSignalOption, decodeOptions, Flag } from "../core/options.js"
import { type CheckpointerError, type ConfigurationError, type Refusal, SnapshotBlobError } from "../core/errors.js"
import { RestoreFailedError, RestoreRefusedError, UnsafePathError, type WorkspaceIOError } from "./errors.js"
import { type CommandAfterCheckpoint, type FilePlan, planRestore } from "../core/restore.js"
import * as Session from "../core/session.js"
import { sha256Hex } from "../core/sha256.js"
import * as SessionStates from "./SessionStates.js"
import { type PathState, Workspace } from "./Workspace.js"

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
}

export type RestoreProgress =
  | { readonly type: "checkpoint_restore"; readonly phase: "start"; readonly sessionId: string; readonly seq: number; readonly total: number }
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
  /** `checkpoint_restore` progress of every restore, for as long as the stream is consumed. */
  readonly progress: Stream.Stream<RestoreProgress>
  /** The same progress through a queue subscribed when this effect runs (nothing published later is missed). */
  readonly subscribe: Effect.Effect<Queue.Dequeue<RestoreProgress>, never, Scope.Scope>
}

export class TimeTravel extends Context.Tag("@lite-agent/tools/TimeTravel")<TimeTravel, TimeTravelService>() {}

const describeState = (state: PathState) =>
  state.kind === "absent"
    ? "missing"
    : state.kind === "other"
    ? state.description
    : `sha-256 ${sha256Hex(state.data).slice(0, 12)}…, mode ${state.mode.toString(8)}`

export const make = Effect.gen(function*() {
  const checkpointer = yield* Checkpointer
  const workspace = yield* Workspace
  const states = yield* SessionStates.fromContextOrNew
  const hub = yield* PubSub.unbounded<RestoreProgress>()

  /**
   * Check one planned file against the disk: a refusal; `"restored"` when the disk already holds
   * what the restore would put there (as a restore cut short leaves the files it got to, which
   * are then not outside edits); or nothing.
   */
  const preflight = (file: FilePlan): Effect.Effect<Refusal | "restored" | undefined, WorkspaceIOError> =>
    Effect.gen(function*() {
      const current = yield* Effect.either(workspace.inspect(file.path))
      if (current._tag === "Left") {
        if (current.left instanceof UnsafePathError) {
          return { reason: "unsafe_path", path: file.path, detail: current.left.reason } satisfies Refusal
        }
        return yield* Effect.fail(current.left)
      }
      const disk = current.right
      if (disk.kind === "other") {
        return { reason: "unsafe_path", path: file.path, detail: `the path is now ${disk.description}` } satisfies Refusal
      }
      const target = file.action
      const atTarget = target.kind === "delete"
        ? disk.kind === "absent"
        : disk.kind === "file" && disk.mode === target.mode && disk.data.length === target.size && sha256Hex(disk.data) === target.sha256
      if (atTarget) return "restored"
      const expected = file.expected
      if (expected === undefined) return undefined
      const matches = expected._tag === "absent"
        ? disk.kind === "absent"
        : disk.kind === "file" && disk.mode === expected.mode && sha256Hex(disk.data) === expected.sha256
      if (matches) return undefined
      const left = expected._tag === "absent"
        ? "deleted it"
        : `left sha-256 ${expected.sha256.slice(0, 12)}…, mode ${expected.mode.toString(8)}`
      return {
        reason: "modified_externally",
        path: file.path,
        detail: `the agent ${left}; the disk now has ${describeState(disk)}`
      } satisfies Refusal
    })

  const restore = (sessionId: string, seq: number, input: RestoreOptions = {}) =>
    Effect.gen(function*() {
      const options = yield* decodeOptions(RestoreOptions, input, "restore options")
      yield* checkSeqArgument(sessionId, "seq", seq)
      const files = options.files ?? true
      const conversation = options.conversation ?? true
      const dryRun = options.dryRun ?? false
      // The shared fold: no re-read of the log. Its head is the expected head of the truncate.
      const { state } = yield* states.get(sessionId)
      const plan = planRestore(sessionId, state, seq, { files, conversation })
      const diskRefusals: Array<Refusal> = []
      // The bytes each written path goes back to, read (and checked) before anything changes.
      const contents = new Map<string, Uint8Array>()
      const alreadyRestored = new Set<string>()
      for (const file of plan.files) {
        const checked = yield* preflight(file)
        if (checked === "restored") {
          alreadyRestored.add(file.path)
          continue
        }
        const refusal = checked
        if (refusal !== undefined) diskRefusals.push(refusal)
        if (file.action.kind !== "write") continue
        if (file.action.data !== undefined) {
          contents.set(file.path, file.action.data)
          continue
        }
        const stored = yield* Effect.either(checkpointer.readSnapshot(sessionId, file.action.sha256))
        if (stored._tag === "Right") contents.set(file.path, stored.right)
        else if (stored.left instanceof SnapshotBlobError) {
          if (refusal === undefined) {
            diskRefusals.push({
              reason: stored.left.reason === "missing" ? "snapshot_missing" : "snapshot_truncated",
              path: file.path,
              detail: stored.left.message
            })
          }
        } else return yield* stored.left
      }
      const refusals = [...plan.refusals, ...diskRefusals]
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
        refusals
      }
      if (dryRun) {
        return { ...report, restoredFiles: [], conversationRestored: false, dryRun: true } satisfies RestoreResult
      }
      const publish = (progress: RestoreProgress) => PubSub.publish(hub, progress)
      if (refusals.length > 0) {
        const error = new RestoreRefusedError({ sessionId, seq, refusals })
        yield* publish({ type: "checkpoint_restore", phase: "error", sessionId, seq, error })
        return yield* error
      }

      const total = plan.files.length
      yield* publish({ type: "checkpoint_restore", phase: "start", sessionId, seq, total })

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
      const checkAbort = Effect.suspend(() =>
        options.signal?.aborted === true ? Effect.fail(new RestoreAborted()) : Effect.void
      )

      const execute = Effect.gen(function*() {
        let completed = 0
        for (const file of plan.files) {
          yield* checkAbort
          if (alreadyRestored.has(file.path)) {
            completed++
            yield* publish({ type: "checkpoint_restore", phase: "progress", sessionId, seq, completed, total, path: file.path })
            continue
          }
          const before = yield* workspace.inspect(file.path)
          replaced.push({ path: file.path, before })
          if (file.action.kind === "write") {
            const data = contents.get(file.path)
            // Preflight read every written path's content or refused the restore.
            if (data === undefined) return yield* Effect.dieMessage(`restore: no content was read for ${file.path}`)
            yield* workspace.write(file.path, data, file.action.mode)
          } else {
            yield* workspace.remove(file.path)
          }
          completed++
          yield* publish({ type: "checkpoint_restore", phase: "progress", sessionId, seq, completed, total, path: file.path })
          // Let listeners, an abort and an interruption in between files.
          yield* Effect.yieldNow()
        }
        yield* checkAbort
      })
      // The commit point. It runs uninterruptibly after the files are in place, so it either
      // commits with the files restored or fails (a conflict) and the files are put back.
      const commit: Effect.Effect<void, CheckpointerError> = conversation
        ? Effect.asVoid(checkpointer.truncate(sessionId, plan.truncateTo, plan.head))
        : Effect.void

      // Files are changed while interruptible; a failure, an abort or an interruption puts them back.
      return yield* Effect.uninterruptibleMask((restoreInterruptibility) =>
        Effect.gen(function*() {
          const outcome = yield* Effect.exit(
            Effect.zipRight(restoreInterruptibility(execute), commit)
          )
          if (outcome._tag === "Failure") {
            const notRolledBack = yield* putBack
            const error = new RestoreFailedError({
              sessionId,
              seq,
              detail: describeCause(outcome.cause),
              notRolledBack,
              cause: Cause.squash(outcome.cause)
            })
            yield* publish({ type: "checkpoint_restore", phase: "error", sessionId, seq, error })
            return yield* error
          }
          const result: RestoreResult = {
            ...report,
            restoredFiles: plan.files.map((file) => file.path),
            conversationRestored: conversation,
            dryRun: false
          }
          // Blobs only the cut events referenced go now; a failure here loses nothing (the next sweep retries).
          if (conversation) {
            yield* checkpointer.sweepSnapshots(sessionId).pipe(
              Effect.catchAll((error) => Effect.logWarning(`restore of "${sessionId}": sweeping unreferenced snapshots failed`, error))
            )
          }
          yield* publish({ type: "checkpoint_restore", phase: "done", sessionId, seq, result })
          return result
        })
      )
    })

  const service: TimeTravelService = {
    listCheckpoints: (sessionId) => Effect.map(states.get(sessionId), ({ state }) => Session.checkpoints(state)),
    restore: (sessionId, seq, options) => restore(sessionId, seq, options),
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
