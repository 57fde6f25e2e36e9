/**
 * What a checkpoint's turn did, for someone looking at a session: the branch a checkpoint (or a
 * branch's tip) is on, folded; the conversation on it up to the end of that turn; and every path
 * the turn changed, with what it held just before the checkpoint and just after the turn, as far
 * as the session recorded it (by hash: the bytes are in the snapshot store). Pure.
 */
import { HashMap, Option } from "effect"
import { LeafMoved } from "./events.js"
import { type FileHistoryEntry, pathAtCheckpoint, pathAtLeaf, type PathOutcome, type PathRestore, snapshotAction } from "./pathHistory.js"
import type { ConversationEntry, SessionState } from "./sessionState.js"
import { NOT_A_NODE } from "./sessionState.js"
import { pathsChangedAfter } from "./session.js"
import { step } from "./sessionFold.js"
import { tree } from "./sessionTree.js"

/** What a path held at one point, as far as the session recorded it. */
export type RecordedPath =
  | { readonly kind: "file"; readonly sha256: string; readonly size: number; readonly mode: number; readonly data: Uint8Array | undefined }
  | { readonly kind: "link"; readonly target: string }
  | { readonly kind: "directory" }
  | { readonly kind: "absent" }
  /** Not recorded (or not usably): the reason says why. */
  | { readonly kind: "unknown"; readonly reason: string }

export interface PathChangeInTurn {
  readonly path: string
  /** Just before the checkpoint's prompt. */
  readonly before: RecordedPath
  /** When the turn was over: at the next checkpoint of the branch, or at its tip. */
  readonly after: RecordedPath
}

const isOn = (state: SessionState, leaf: number, seq: number) => {
  for (let at = leaf; at >= seq && at > 0; at = state.parents.at(at - 1) ?? NOT_A_NODE) if (at === seq) return true
  return false
}

/**
 * The session folded along a branch that goes through `seq` (a node: a checkpoint or a branch's
 * tip): the current branch when it is on it, else the first branch that is; undefined when no
 * branch goes through it.
 */
export const branchThrough = (state: SessionState, seq: number): SessionState | undefined => {
  if (isOn(state, state.leaf, seq)) return state
  const branch = tree(state).branches.find((candidate) => isOn(state, candidate.leaf, seq))
  if (branch === undefined) return undefined
  // As a switch to that branch would leave the session (nothing is written).
  const moved = step(state, { seq: state.head + 1, ts: state.lastTs ?? 0, event: new LeafMoved({ from: state.leaf, to: branch.leaf, reason: "switch" }) })
  // A branch the fold could not rebuild (a fold begun in the middle of a log) is none to show.
  return moved.leaf === branch.leaf && !moved.branchUnknown ? moved : undefined
}

/** The seq of the checkpoint after `seq` on the folded branch, if any: where the turn of `seq` ends (else it goes on to the tip). */
const nextCheckpoint = (branch: SessionState, seq: number): number | undefined =>
  branch.anchors.toArray().find((anchor) => anchor.seq > seq)?.seq

/**
 * The branch's conversation (the whole of its messages, compacted ones included) up to the end of
 * the turn of `seq`, and that end (the next checkpoint's seq; undefined: the turn runs to the tip).
 */
export const conversationThrough = (
  branch: SessionState,
  seq: number
): { readonly entries: ReadonlyArray<ConversationEntry>; readonly end: number | undefined } => {
  const end = nextCheckpoint(branch, seq)
  const entries = branch.messages.toArray()
  return { entries: end === undefined ? entries : entries.filter((entry) => entry.seq < end), end }
}

/** What restoring `action` would put back: what the path held. */
const heldBy = (action: PathRestore): RecordedPath =>
  action.kind === "write"
    ? { kind: "file", sha256: action.sha256, size: action.size, mode: action.mode, data: action.data }
    : action.kind === "link"
    ? { kind: "link", target: action.target }
    : action.kind === "directory"
    ? { kind: "directory" }
    : { kind: "absent" }

const recorded = (outcome: PathOutcome | undefined, history: ReadonlyArray<FileHistoryEntry>): RecordedPath => {
  // No record after the point: the path is as its history last left it.
  const resolved = outcome ?? pathAtLeaf(history)
  switch (resolved.kind) {
    case "refused":
      return { kind: "unknown", reason: resolved.refusal.detail }
    case "notCovered":
      return { kind: "unknown", reason: resolved.reason }
    case "restore":
      return heldBy(resolved.action)
  }
}

/** What a file tool's snapshot says the path held (unknown when the snapshot is unusable). */
const snapshotted = (entry: Extract<FileHistoryEntry, { kind: "snapshot" }>): RecordedPath => {
  const action = snapshotAction(entry)
  return "kind" in action ? heldBy(action) : { kind: "unknown", reason: action.detail }
}

/** The same recorded content; what is unknown is never the same as anything. */
const same = (a: RecordedPath, b: RecordedPath) =>
  a.kind !== "unknown" && a.kind === b.kind &&
  (a.kind !== "file" || (b.kind === "file" && a.sha256 === b.sha256 && a.mode === b.mode)) &&
  (a.kind !== "link" || (b.kind === "link" && a.target === b.target))

/**
 * What the person changed, not the agent: a capture taken before a prompt (or while a question
 * waited), which records the edits made between turns.
 */
const isUsersEdit = (entry: FileHistoryEntry) => entry.kind === "captured" && entry.cause._tag === "checkpoint"

/**
 * The paths the turn of checkpoint `seq` changed on the folded branch (`branchThrough`), sorted,
 * each with what it held before and after; a path recorded again with the same content is left
 * out. Only the turn's own records count: what later turns did (an interrupted tool, a file that
 * grew past the capture's cap) does not change what this one shows, and the person's edits
 * between turns are not the turn's.
 */
export const checkpointChanges = (branch: SessionState, seq: number): ReadonlyArray<PathChangeInTurn> => {
  const end = nextCheckpoint(branch, seq)
  const inTurn = (entrySeq: number) => entrySeq > seq && (end === undefined || entrySeq < end)
  const changes: Array<PathChangeInTurn> = []
  // Read from the branch's end back to the checkpoint: what changed after it, sorted.
  for (const path of pathsChangedAfter(branch, seq)) {
    const whole = Option.match(HashMap.get(branch.files, path), { onNone: () => [], onSome: (entries) => entries.toArray() })
    // The path's records up to the turn's end, without the person's edits made during it.
    const history = whole.filter((entry) => (end === undefined || entry.seq < end) && !(inTurn(entry.seq) && isUsersEdit(entry)))
    if (!history.some((entry) => inTurn(entry.seq))) continue
    // A file tool's snapshot taken in the turn is what the file held before it, even if the tool was cut short.
    const firstInTurn = history.find((entry) => inTurn(entry.seq))
    const before = firstInTurn?.kind === "snapshot"
      ? snapshotted(firstInTurn)
      : recorded(pathAtCheckpoint(history, seq, branch.coveredFrom), history)
    const after = recorded(undefined, history)
    if (!same(before, after)) changes.push({ path, before, after })
  }
  return changes
}
