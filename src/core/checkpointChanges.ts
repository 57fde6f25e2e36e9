/**
 * What a checkpoint's turn did, for someone looking at a session: the branch a checkpoint (or a
 * branch's tip) is on, folded; the conversation on it up to the end of that turn; and every path
 * the turn changed, with what it held just before the checkpoint and just after the turn, as far
 * as the session recorded it (by hash: the bytes are in the snapshot store). Pure.
 */
import { HashMap, Option } from "effect"
import { type FileSnapshotState, LeafMoved } from "./events.js"
import { type FileHistoryEntry, pathAtCheckpoint, pathAtLeaf, type PathOutcome } from "./pathHistory.js"
import type { ConversationEntry, SessionState } from "./sessionState.js"
import { NOT_A_NODE } from "./sessionState.js"
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
export const nextCheckpoint = (branch: SessionState, seq: number): number | undefined =>
  branch.anchors.toArray().find((anchor) => anchor.seq > seq)?.seq

/** The branch's conversation (the whole of its messages, compacted ones included) up to the end of the turn of `seq`. */
export const conversationThrough = (branch: SessionState, seq: number): ReadonlyArray<ConversationEntry> => {
  const end = nextCheckpoint(branch, seq)
  const entries = branch.messages.toArray()
  return end === undefined ? entries : entries.filter((entry) => entry.seq < end)
}

const recorded = (outcome: PathOutcome | undefined, history: ReadonlyArray<FileHistoryEntry>): RecordedPath => {
  // No record after the point: the path is as its history last left it.
  const resolved = outcome ?? pathAtLeaf(history)
  switch (resolved.kind) {
    case "refused":
      return { kind: "unknown", reason: resolved.refusal.detail }
    case "notCovered":
      return { kind: "unknown", reason: resolved.reason }
    case "restore": {
      const action = resolved.action
      if (action.kind === "write") return { kind: "file", sha256: action.sha256, size: action.size, mode: action.mode, data: action.data }
      if (action.kind === "link") return { kind: "link", target: action.target }
      if (action.kind === "directory") return { kind: "directory" }
      return { kind: "absent" }
    }
  }
}

const snapshotted = (state: FileSnapshotState): RecordedPath => {
  switch (state._tag) {
    case "content":
      return { kind: "file", sha256: state.sha256, size: state.size, mode: state.mode, data: state.data }
    case "stored":
      return { kind: "file", sha256: state.sha256, size: state.size, mode: state.mode, data: undefined }
    case "missing":
      return { kind: "absent" }
    case "unavailable":
      return { kind: "unknown", reason: state.reason }
  }
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
  const paths = new Set<string>()
  for (const change of branch.pathChanges.toArray()) if (inTurn(change.seq)) paths.add(change.path)
  const changes: Array<PathChangeInTurn> = []
  for (const path of Array.from(paths).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
    const whole = Option.match(HashMap.get(branch.files, path), { onNone: () => [], onSome: (entries) => entries.toArray() })
    // The path's records up to the turn's end, without the person's edits made during it.
    const history = whole.filter((entry) => (end === undefined || entry.seq < end) && !(inTurn(entry.seq) && isUsersEdit(entry)))
    if (!history.some((entry) => inTurn(entry.seq))) continue
    // A file tool's snapshot taken in the turn is what the file held before it, even if the tool was cut short.
    const firstInTurn = history.find((entry) => inTurn(entry.seq))
    const before = firstInTurn?.kind === "snapshot"
      ? snapshotted(firstInTurn.state)
      : recorded(pathAtCheckpoint(history, seq, branch.coveredFrom), history)
    const after = recorded(undefined, history)
    if (!same(before, after)) changes.push({ path, before, after })
  }
  return changes
}
