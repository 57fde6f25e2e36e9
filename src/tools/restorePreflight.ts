/**
 * A restore's preflight: every path it would change checked against the disk before any is
 * changed (path safety, outside edits, a file already at its target), and the bytes it would
 * write fetched from the snapshot store — a problem with either is a refusal, not a failure.
 */
import { Effect } from "effect"
import type { CheckpointerService } from "../core/Checkpointer.js"
import { type CheckpointerError, type Refusal, SnapshotBlobError } from "../core/errors.js"
import type { RestoreBefore, RestoreFile } from "../core/events.js"
import { type FilePlan, stateLeftBy } from "../core/restore.js"
import type { RecordedState } from "../core/session.js"
import { sha256Hex } from "../core/internal/sha256.js"
import { UnsafePathError, type WorkspaceIOError } from "./errors.js"
import type { FileOperation } from "./restoreFiles.js"
import type { EntryState, WorkspaceService } from "./Workspace.js"

/** A path's state as a restore compares it: a file by hash, nothing, a link or a directory. */
type Comparable = RecordedState

/** A state as a refusal's detail names it. */
const describeState = (state: Comparable) => {
  switch (state._tag) {
    case "absent":
      return "missing"
    case "file":
      return `sha-256 ${state.sha256.slice(0, 12)}…, mode ${state.mode.toString(8)}`
    case "link":
      return `a link to ${JSON.stringify(state.target)}`
    case "directory":
      return `a directory (mode ${state.mode.toString(8)})`
  }
}

/** What a path held before a restore, as a state to compare the disk with. */
export const beforeStateOf = (before: RestoreBefore): Comparable =>
  before._tag === "missing"
    ? { _tag: "absent" }
    : before._tag === "link" || before._tag === "directory"
    ? before
    : { _tag: "file", sha256: before.sha256, size: before.size, mode: before.mode }

/** What is on disk, as a state (a file's bytes hashed once, however many states it is compared with). */
const stateOf = (disk: OnDisk): Comparable => {
  switch (disk.kind) {
    case "absent":
      return { _tag: "absent" }
    case "file":
      return { _tag: "file", sha256: sha256Hex(disk.data), size: disk.data.length, mode: disk.mode }
    case "link":
      return { _tag: "link", target: disk.target }
    case "directory":
      return { _tag: "directory", mode: disk.mode }
  }
}

const sameState = (a: Comparable, b: Comparable): boolean => {
  switch (a._tag) {
    case "absent":
      return b._tag === "absent"
    case "file":
      return b._tag === "file" && a.sha256 === b.sha256 && a.size === b.size && a.mode === b.mode
    case "link":
      return b._tag === "link" && a.target === b.target
    case "directory":
      return b._tag === "directory" && a.mode === b.mode
  }
}

/** A path's state as a restore's intent records it: a file's bytes (to the snapshot store), nothing, a link or a directory. */
const recordedBefore = (disk: OnDisk, found: Comparable): RestoreBefore => {
  if (disk.kind === "file" && found._tag === "file") {
    return { _tag: "content", data: disk.data, mode: found.mode, size: found.size, sha256: found.sha256 }
  }
  return found._tag === "link" || found._tag === "directory" ? found : { _tag: "missing" }
}

/** What can be on disk where a restore acts (anything else is refused). */
type OnDisk = Exclude<EntryState, { readonly kind: "other" }>

/** The result of checking one path against the disk before anything changes. */
export type Checked =
  | { readonly kind: "refused"; readonly refusal: Refusal }
  /** Already holds what the restore puts there. */
  | { readonly kind: "done" }
  /** `found` is `disk` as a state. */
  | { readonly kind: "ready"; readonly disk: OnDisk; readonly found: Comparable }

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
    target: Comparable,
    allowed: ReadonlyArray<Comparable>,
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
    statesBefore: ReadonlyMap<string, Comparable>
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

const depth = (path: string) => path.split("/").length

/**
 * The order operations can be applied in: what goes deleted first (children first, so a
 * directory is empty by its turn, and a path that changes kind is free), then directories made
 * (parents first), then files and links written.
 */
export const inApplyOrder = (operations: ReadonlyArray<FileOperation>): ReadonlyArray<FileOperation> => {
  const rank = (operation: FileOperation) => (operation.kind === "delete" ? 0 : operation.kind === "directory" ? 1 : 2)
  return [...operations].sort((a, b) =>
    rank(a) - rank(b) ||
    (a.kind === "delete" ? depth(b.path) - depth(a.path) : depth(a.path) - depth(b.path)) ||
    (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)
  )
}

export const make = (workspace: WorkspaceService, checkpointer: CheckpointerService): Preflight => {
  /** How what is on disk at a path compares with the restore's target and the states it may replace. */
  const compared = (path: string, disk: OnDisk, target: Comparable, allowed: ReadonlyArray<Comparable>, whoLeftIt: string): Checked => {
    const found = stateOf(disk)
    if (sameState(found, target)) return { kind: "done" }
    if (allowed.length === 0 || allowed.some((state) => sameState(found, state))) return { kind: "ready", disk, found }
    const left = allowed[0]!._tag === "absent" ? "deleted it" : `left ${describeState(allowed[0]!)}`
    return {
      kind: "refused",
      refusal: { reason: "modified_externally", path, detail: `${whoLeftIt} ${left}; the disk now has ${describeState(found)}` }
    }
  }

  const check: Preflight["check"] = (path, target, allowed, whoLeftIt) =>
    Effect.gen(function*() {
      const current = yield* Effect.either(workspace.entry(path))
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
      // A file replaced by a link since: never written through, refused as unsafe (as every file path is).
      if (disk.kind === "link" && target._tag !== "link" && allowed.every((state) => state._tag !== "link")) {
        return { kind: "refused", refusal: { reason: "unsafe_path", path, detail: `${path} is a symbolic link` } } as const
      }
      return compared(path, disk, target, allowed, whoLeftIt)
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
      // Paths the plan makes something other than a link: one that is a link on disk now goes
      // before anything under it is written, so what is under it is not there for this restore
      // (a directory the agent replaced by a link comes back; nothing is done through the link).
      const replacedByPlan = new Set(planned.flatMap((file) => (file.action.kind === "link" ? [] : [file.path])))
      const underALinkThatGoes = (path: string) =>
        Effect.gen(function*() {
          for (let at = path.indexOf("/"); at >= 0; at = path.indexOf("/", at + 1)) {
            const ancestor = path.slice(0, at)
            if (!replacedByPlan.has(ancestor)) continue
            const onDisk = yield* Effect.either(workspace.entry(ancestor))
            if (onDisk._tag === "Right" && onDisk.right.kind === "link") return true
          }
          return false
        })
      for (const file of planned) {
        const target = stateLeftBy(file.action)
        const allowed = [file.expected, statesBefore.get(file.path)].filter((state) => state !== undefined)
        let checked = yield* check(file.path, target, allowed, "the agent")
        if (checked.kind === "refused" && checked.refusal.reason === "unsafe_path" && (yield* underALinkThatGoes(file.path))) {
          checked = compared(file.path, { kind: "absent" }, target, allowed, "the agent")
        }
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
        } else operations.push({ path: file.path, ...action })
        recorded.push({ path: file.path, before: recordedBefore(checked.disk, checked.found), target })
      }
      return { operations: inApplyOrder(operations), recorded, refusals, alreadyRestored }
    })

  return { check, storedBytes, files }
}
