/**
 * A restore's preflight: every path it would change checked against the disk before any is
 * changed (path safety, outside edits, a file already at its target), and the bytes it would
 * write fetched from the snapshot store — a problem with either is a refusal, not a failure.
 */
import { Effect } from "effect"
import type { CheckpointerService } from "../core/Checkpointer.js"
import { type CheckpointerError, type Refusal, SnapshotBlobError } from "../core/errors.js"
import type { FileAfterState, RestoreBefore, RestoreFile } from "../core/events.js"
import type { FileAction, FilePlan } from "../core/restore.js"
import { sha256Hex } from "../core/internal/sha256.js"
import { UnsafePathError, type WorkspaceIOError } from "./errors.js"
import type { FileOperation } from "./restoreFiles.js"
import type { AbsentState, FileState, WorkspaceService } from "./Workspace.js"

/** A state as a refusal's detail names it. */
const describeState = (state: FileAfterState) =>
  state._tag === "absent" ? "missing" : `sha-256 ${state.sha256.slice(0, 12)}…, mode ${state.mode.toString(8)}`

/** What a planned file goes back to, as a state to compare the disk with. */
const targetOf = (action: FileAction): FileAfterState =>
  action.kind === "write" ? { _tag: "file", sha256: action.sha256, size: action.size, mode: action.mode } : { _tag: "absent" }

/** What a file held before a restore, as a state to compare the disk with. */
export const beforeStateOf = (before: RestoreBefore): FileAfterState =>
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

/** The result of checking one path against the disk before anything changes. */
export type Checked =
  | { readonly kind: "refused"; readonly refusal: Refusal }
  /** Already holds what the restore puts there. */
  | { readonly kind: "done" }
  /** `found` is `disk` as a state. */
  | { readonly kind: "ready"; readonly disk: FileState | AbsentState; readonly found: FileAfterState }

export const blobRefusal = (path: string, error: SnapshotBlobError): Refusal => ({
  reason: error.reason === "missing" ? "snapshot_missing" : "snapshot_truncated",
  path,
  detail: error.message
})

export interface Preflight {
  /**
   * Check one path against the disk before anything changes: `done` when it already holds
   * `target` (as a restore cut short leaves the files it got to: not an outside edit); `ready`
   * when it holds one of the `allowed` states (what the agent left; what it held when an
   * interrupted restore began) or there is nothing to check it against; otherwise refused
   * (`whoLeftIt` says who left the first allowed state, for the refusal's detail).
   */
  readonly check: (
    path: string,
    target: FileAfterState,
    allowed: ReadonlyArray<FileAfterState>,
    whoLeftIt: string
  ) => Effect.Effect<Checked, WorkspaceIOError>
  /** A blob's bytes from the snapshot store, or why they cannot be had (a refusal, not a failure). */
  readonly storedBytes: (sessionId: string, sha256: string) => Effect.Effect<Uint8Array | SnapshotBlobError, CheckpointerError>
  /**
   * Check each of a plan's files (against what the agent left, or what it held when the pending
   * intent began, `statesBefore`) and fetch the bytes it writes: what the restore then changes,
   * as operations and as its intent records them, or why it cannot.
   */
  readonly files: (
    sessionId: string,
    files: ReadonlyArray<FilePlan>,
    statesBefore: ReadonlyMap<string, FileAfterState>
  ) => Effect.Effect<PreflightResult, CheckpointerError | WorkspaceIOError>
}

export interface PreflightResult {
  readonly operations: ReadonlyArray<FileOperation>
  /** The same files, as the intent records them. */
  readonly recorded: ReadonlyArray<RestoreFile>
  readonly refusals: ReadonlyArray<Refusal>
  /** Paths already at their target: nothing to do for them. */
  readonly alreadyRestored: ReadonlySet<string>
}

export const make = (workspace: WorkspaceService, checkpointer: CheckpointerService): Preflight => {
  const check: Preflight["check"] = (path, target, allowed, whoLeftIt) =>
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

  const storedBytes: Preflight["storedBytes"] = (sessionId, sha256) =>
    checkpointer.readSnapshot(sessionId, sha256).pipe(
      Effect.catchIf((error): error is SnapshotBlobError => error instanceof SnapshotBlobError, (error) => Effect.succeed(error))
    )

  const files: Preflight["files"] = (sessionId, planned, statesBefore) =>
    Effect.gen(function*() {
      const refusals: Array<Refusal> = []
      const operations: Array<FileOperation> = []
      const recorded: Array<RestoreFile> = []
      const alreadyRestored = new Set<string>()
      for (const file of planned) {
        const target = targetOf(file.action)
        const allowed = [file.expected, statesBefore.get(file.path)].filter((state) => state !== undefined)
        const checked = yield* check(file.path, target, allowed, "the agent")
        if (checked.kind === "done") {
          alreadyRestored.add(file.path)
          continue
        }
        if (checked.kind === "refused") {
          refusals.push(checked.refusal)
          continue
        }
        const action = file.action
        if (action.kind === "write") {
          const data = action.data ?? (yield* storedBytes(sessionId, action.sha256))
          if (data instanceof SnapshotBlobError) {
            refusals.push(blobRefusal(file.path, data))
            continue
          }
          operations.push({ path: file.path, kind: "write", data, mode: action.mode })
        } else operations.push({ path: file.path, kind: "delete" })
        recorded.push({ path: file.path, before: recordedBefore(checked.disk, checked.found), target })
      }
      return { operations, recorded, refusals, alreadyRestored }
    })

  return { check, storedBytes, files }
}
