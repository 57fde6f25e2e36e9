/**
 * A path's history and what it says about a checkpoint: how the path goes back to just before
 * it — from the file tools' snapshots and change records and the workspace captures — or why it
 * cannot (refused), or why it is left alone (not covered). Pure.
 */
import type { RefusalReason } from "./errors.js"
import type { CaptureCause, CapturedState, FileAfterState, FileChange, FileSnapshotState } from "./events.js"
import { sha256Hex } from "./internal/sha256.js"

export type FileHistoryEntry =
  | { readonly kind: "snapshot"; readonly seq: number; readonly toolUseId: string; readonly state: FileSnapshotState }
  | {
    readonly kind: "change"
    readonly seq: number
    readonly toolUseId: string
    readonly operation: FileChange["operation"]
    readonly after: FileAfterState | undefined
  }
  /** What a workspace capture saw at the path (see `WorkspaceCaptured`). */
  | {
    readonly kind: "captured"
    readonly seq: number
    readonly cause: CaptureCause
    readonly state: CapturedState
    /** Not covered by the capture before: what it held earlier is unknown. */
    readonly firstSeen: boolean
  }

export interface NotCovered {
  readonly path: string
  /** Why a restore leaves it as it is (over a cap, ignored, first captured after the checkpoint, …). */
  readonly reason: string
}

/**
 * What restoring one path to before a checkpoint does: put content back (with this hash, size
 * and mode), a link or a directory back, or delete what is there. The bytes are inline (`data`)
 * for logs from before the snapshot store; otherwise they are read from the store by hash when
 * the restore runs.
 */
export type PathRestore =
  | {
    readonly kind: "write"
    readonly sha256: string
    readonly size: number
    readonly mode: number
    readonly data: Uint8Array | undefined
  }
  | { readonly kind: "link"; readonly target: string }
  | { readonly kind: "directory"; readonly mode: number }
  | { readonly kind: "delete" }

/** What the session last recorded at a path (what a restore expects to find there). */
export type RecordedState =
  | FileAfterState
  | Extract<CapturedState, { readonly _tag: "link" | "directory" }>

type Refused = { readonly reason: Extract<RefusalReason, `snapshot_${string}` | "tool_interrupted">; readonly detail: string }

/** How one path goes back to a checkpoint, or why it cannot (a refusal), or why it is left alone (not covered). */
export type PathOutcome =
  | {
    readonly kind: "restore"
    readonly action: PathRestore
    /** What the session last recorded there; undefined when no hash was recorded (outside edits cannot be detected). */
    readonly expected: RecordedState | undefined
    /** Seqs of the captures that saw a change nobody in the session made (the user's edits between turns). */
    readonly userEdits: ReadonlyArray<number>
  }
  | { readonly kind: "refused"; readonly refusal: Refused }
  | { readonly kind: "notCovered"; readonly reason: string }

/** How a file tool's snapshot puts the path back, or why it cannot (a truncated or unusable snapshot). */
export const snapshotAction = (first: Extract<FileHistoryEntry, { kind: "snapshot" }>): PathRestore | Refused => {
  switch (first.state._tag) {
    case "missing":
      return { kind: "delete" }
    case "unavailable":
      return { reason: "snapshot_unavailable", detail: first.state.reason }
    case "content": {
      const { data, mode, sha256, size } = first.state
      if (data.length !== size || sha256Hex(data) !== sha256) {
        return {
          reason: "snapshot_truncated",
          detail: `the snapshot at seq ${first.seq} holds ${data.length} of ${size} bytes or does not match its hash`
        }
      }
      return { kind: "write", sha256, size, mode, data }
    }
    case "stored": {
      const { mode, sha256, size } = first.state
      return { kind: "write", sha256, size, mode, data: undefined }
    }
  }
}

/** The action that puts back a captured state, or why it cannot be put back. */
const capturedAction = (state: CapturedState): PathRestore | { readonly notCovered: string } => {
  switch (state._tag) {
    case "content":
    case "stored":
      return { kind: "write", sha256: state.sha256, size: state.size, mode: state.mode, data: undefined }
    case "missing":
      return { kind: "delete" }
    case "link":
      return { kind: "link", target: state.target }
    case "directory":
      return { kind: "directory", mode: state.mode }
    case "unavailable":
      return { notCovered: `it was not captured at the checkpoint: ${state.reason}` }
  }
}

/** The state an entry says the path was left in, when it says one. */
const recordedStateOf = (entry: FileHistoryEntry): RecordedState | undefined => {
  if (entry.kind === "change") return entry.after
  if (entry.kind !== "captured") return undefined
  const state = entry.state
  switch (state._tag) {
    case "content":
    case "stored":
      return { _tag: "file", sha256: state.sha256, size: state.size, mode: state.mode }
    case "missing":
      return { _tag: "absent" }
    case "link":
    case "directory":
      return state
    case "unavailable":
      return undefined
  }
}

/**
 * How a path goes back to just before checkpoint `checkpointSeq`, given its whole history
 * (oldest first); `coveredFrom` is the seq of the session's first workspace capture. The one
 * rule used by both `checkpoints` and the restore planner:
 *
 * - nothing after the checkpoint: nothing to do (`undefined`);
 * - a file tool's snapshot without its change record after it, or a change first with no
 *   snapshot: refused, as the spec says;
 * - a path the last capture could not cover (over a cap, ignored now, changing): left alone;
 * - otherwise its state at the checkpoint is the first tool snapshot after it, or else the last
 *   state recorded before it (a capture, or what a file tool left); a path first captured after
 *   the checkpoint, when the workspace was covered from before it and the path was not newly
 *   covered, did not exist then (it is deleted).
 */
export const pathAtCheckpoint = (
  history: ReadonlyArray<FileHistoryEntry>,
  checkpointSeq: number,
  coveredFrom: number | undefined
): PathOutcome | undefined => {
  const firstAfter = history.findIndex((entry) => entry.seq > checkpointSeq)
  if (firstAfter < 0) return undefined
  const after = history.slice(firstAfter)
  const refused = (refusal: Refused): PathOutcome => ({ kind: "refused", refusal })
  const interrupted = after.find((entry, index) =>
    entry.kind === "snapshot" &&
    !after.slice(index + 1).some((later) => later.kind === "change" && later.toolUseId === entry.toolUseId)
  )
  if (interrupted !== undefined && interrupted.kind === "snapshot") {
    return refused({
      reason: "tool_interrupted",
      detail: `tool call ${interrupted.toolUseId} snapshotted the file at seq ${interrupted.seq} but never recorded its change`
    })
  }
  const latest = after[after.length - 1]!
  if (latest.kind === "captured" && latest.state._tag === "unavailable") {
    return { kind: "notCovered", reason: latest.state.reason }
  }
  // What the session last recorded there: a change record without a hash leaves it unknown.
  const expected = lastRecordedState(after)
  const userEdits = after.flatMap((entry) => (entry.kind === "captured" && entry.cause._tag === "checkpoint" ? [entry.seq] : []))
  const restore = (action: PathRestore): PathOutcome => ({ kind: "restore", action, expected, userEdits })

  const first = after[0]!
  if (first.kind === "snapshot") {
    const action = snapshotAction(first)
    return "kind" in action ? restore(action) : refused(action)
  }
  // A file tool's change with no snapshot before it: the rule of the spec, whatever was recorded earlier.
  if (first.kind === "change") {
    return refused({ reason: "snapshot_missing", detail: `changed at seq ${first.seq} with no snapshot taken before` })
  }
  const known = history.slice(0, firstAfter).reverse().find((entry) => entry.kind !== "snapshot")
  if (known?.kind === "captured") {
    const action = capturedAction(known.state)
    return "kind" in action ? restore(action) : { kind: "notCovered", reason: action.notCovered }
  }
  if (known?.kind === "change" && known.after !== undefined) {
    return restore(
      known.after._tag === "absent"
        ? { kind: "delete" }
        : { kind: "write", sha256: known.after.sha256, size: known.after.size, mode: known.after.mode, data: undefined }
    )
  }
  if (known === undefined) {
    // Not captured before the checkpoint by a capture that covered it: it did not exist then.
    return first.firstSeen || coveredFrom === undefined || coveredFrom > checkpointSeq
      ? { kind: "notCovered", reason: "it was first captured after this checkpoint: what it held then is unknown" }
      : restore({ kind: "delete" })
  }
  return refused({ reason: "snapshot_missing", detail: `changed at seq ${first.seq}; what it held before was not recorded` })
}

/** What the session last recorded at a path, over its whole history (undefined: no hash recorded). */
export const lastRecordedState = (history: ReadonlyArray<FileHistoryEntry>): RecordedState | undefined => {
  let recorded: RecordedState | undefined
  for (const entry of history) recorded = recordedStateOf(entry) ?? (entry.kind === "change" ? undefined : recorded)
  return recorded
}

/**
 * How a path goes to the state a branch left it in — what the last entry of its history (on
 * that branch) records — for a move to the end of that branch; or why it cannot.
 */
export const pathAtLeaf = (
  history: ReadonlyArray<FileHistoryEntry>
): { readonly kind: "restore"; readonly action: PathRestore } | { readonly kind: "refused"; readonly refusal: Refused } | {
  readonly kind: "notCovered"
  readonly reason: string
} => {
  const last = history[history.length - 1]
  if (last === undefined || last.kind === "snapshot") {
    return {
      kind: "refused",
      refusal: {
        reason: "tool_interrupted",
        detail: last === undefined
          ? "nothing was recorded there on the branch"
          : `tool call ${last.toolUseId} snapshotted the file at seq ${last.seq} but never recorded its change`
      }
    }
  }
  if (last.kind === "captured") {
    const action = capturedAction(last.state)
    return "kind" in action ? { kind: "restore", action } : { kind: "notCovered", reason: action.notCovered }
  }
  if (last.after === undefined) {
    return { kind: "refused", refusal: { reason: "snapshot_missing", detail: `changed at seq ${last.seq} with no record of what was left there` } }
  }
  return {
    kind: "restore",
    action: last.after._tag === "absent"
      ? { kind: "delete" }
      : { kind: "write", sha256: last.after.sha256, size: last.after.size, mode: last.after.mode, data: undefined }
  }
}
