/**
 * A session is a pure fold over its log (sessionFold.ts: `step` adds one stored event, `fold`
 * many) into a state (sessionState.ts); everything else — the conversation, the checkpoints
 * list — is a projection of it, here.
 */
import { HashMap, Option } from "effect"
import type { MoveReason } from "./events.js"
import { type FileHistoryEntry, type NotCovered, pathAtCheckpoint, type PathOutcome } from "./pathHistory.js"
import type { ConversationEntry, PendingRestore, PendingToolCall, SessionState } from "./sessionState.js"

export {
  type FileHistoryEntry,
  type NotCovered,
  pathAtCheckpoint,
  type PathOutcome,
  type PathRestore,
  type RecordedState
} from "./pathHistory.js"
export { fold, step } from "./sessionFold.js"
export { checkpointNode, type CheckpointNode, type SessionTree, tree, type TreeBranch, type TreeCheckpoint } from "./sessionTree.js"
export {
  type CheckpointAnchor,
  type CompactionBoundary,
  type ConversationEntry,
  type ConversationEvent,
  emptySessionState,
  type ForkOrigin,
  isPruned,
  KeptStates,
  knownStateOf,
  type KnownPathState,
  type LeafMove,
  NOT_A_NODE,
  type PathChange,
  type PendingRestore,
  type PendingToolCall,
  type PromptNode,
  sameKnownState,
  type SessionMetadataState,
  SessionState
} from "./sessionState.js"

// ---------------------------------------------------------------------------
// Projections
// ---------------------------------------------------------------------------

export interface Conversation {
  /** The summary that replaces everything before the compaction boundary, if any. */
  readonly summary: string | undefined
  /** The messages the model sees after the summary, oldest first. */
  readonly entries: ReadonlyArray<ConversationEntry>
}

/** The conversation the model sees: after the last compaction, its summary and the kept messages. */
export const conversation = (state: SessionState): Conversation => {
  const all = state.messages.toArray()
  if (state.compaction === undefined) return { summary: undefined, entries: all }
  const keptFrom = state.compaction.event.keptFromSeq ?? state.compaction.seq + 1
  return { summary: state.compaction.event.summary, entries: all.filter((entry) => entry.seq >= keptFrom) }
}

/** A restore cut short: its intent is in the log and its files may be half restored. */
export interface InterruptedRestore {
  /** The checkpoint a restore goes back to (absent for an undo, redo or switch: see `move`). */
  readonly checkpoint?: number
  /** An undo, redo or switch: the leaf it moves the session to. */
  readonly move?: { readonly reason: MoveReason; readonly to: number }
  /** The seq of its intent (`RestoreStarted`). */
  readonly startedSeq: number
  readonly conversation: boolean
  /** The files it set out to change. */
  readonly files: ReadonlyArray<string>
}

/** A restore's intent, as the restore it describes. */
export const interruptedRestoreOf = (pending: PendingRestore): InterruptedRestore => ({
  ...(pending.event.checkpoint === undefined ? {} : { checkpoint: pending.event.checkpoint }),
  ...(pending.event.move === undefined ? {} : { move: pending.event.move }),
  startedSeq: pending.seq,
  conversation: pending.event.conversation,
  files: pending.event.files.map((file) => file.path)
})

/** The session's restore that was cut short (or is under way), if any. */
export const interruptedRestore = (state: SessionState): InterruptedRestore | undefined =>
  state.pendingRestore === undefined ? undefined : interruptedRestoreOf(state.pendingRestore)

export interface Checkpoint {
  readonly seq: number
  readonly prompt: string
  readonly ts: number
  /** Paths changed after this checkpoint that restore can put back. */
  readonly files: ReadonlyArray<string>
  /** Paths changed after this checkpoint whose earlier state was not (usably) recorded. */
  readonly unavailableFiles: ReadonlyArray<string>
  /** The paths of `unavailableFiles` that the workspace capture does not cover, with why (a restore leaves them as they are). */
  readonly notCovered: ReadonlyArray<NotCovered>
}

/**
 * The paths of the current branch with a history entry after `seq`, sorted: found from the end of
 * the branch's changes, so it costs what changed after `seq`, not what the workspace holds.
 */
export const pathsChangedAfter = (state: SessionState, seq: number): ReadonlyArray<string> => {
  const paths = new Set<string>()
  for (let index = state.pathChanges.length - 1; index >= 0; index--) {
    const change = state.pathChanges.at(index)!
    if (change.seq <= seq) break
    paths.add(change.path)
  }
  return Array.from(paths).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
}

/** The rollback anchors, one per real user prompt, oldest first. */
export const checkpoints = (state: SessionState): ReadonlyArray<Checkpoint> => {
  const anchors = state.anchors.toArray()
  const listed: Array<Checkpoint> = new Array(anchors.length)
  // Latest checkpoint first: the paths changed after each grow as the branch's changes are read
  // backwards once. A path's outcome depends only on which of its records come after the
  // checkpoint (and whether the workspace was covered by then): checkpoints with the same ones
  // — all those before its first change, in a long session — share one answer.
  const perPath = new Map<string, { readonly history: ReadonlyArray<FileHistoryEntry>; readonly outcomes: Map<number, PathOutcome | undefined> }>()
  const outcomeAt = (path: string, seq: number) => {
    let known = perPath.get(path)
    if (known === undefined) {
      known = { history: Option.getOrThrow(HashMap.get(state.files, path)).toArray(), outcomes: new Map() }
      perPath.set(path, known)
    }
    const firstAfter = known.history.findIndex((entry) => entry.seq > seq)
    const key = firstAfter * 2 + (state.coveredFrom === undefined || state.coveredFrom > seq ? 1 : 0)
    if (known.outcomes.has(key)) return known.outcomes.get(key)
    const outcome = pathAtCheckpoint(known.history, seq, state.coveredFrom)
    known.outcomes.set(key, outcome)
    return outcome
  }
  const changedAfter = new Set<string>()
  let change = state.pathChanges.length - 1
  for (let index = anchors.length - 1; index >= 0; index--) {
    const anchor = anchors[index]!
    for (; change >= 0; change--) {
      const changed = state.pathChanges.at(change)!
      if (changed.seq <= anchor.seq) break
      changedAfter.add(changed.path)
    }
    const files: Array<string> = []
    const unavailableFiles: Array<string> = []
    const notCovered: Array<NotCovered> = []
    for (const path of Array.from(changedAfter).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
      const outcome = outcomeAt(path, anchor.seq)
      if (outcome === undefined) continue
      if (outcome.kind === "restore") files.push(path)
      else unavailableFiles.push(path)
      if (outcome.kind === "notCovered") notCovered.push({ path, reason: outcome.reason })
    }
    listed[index] = { seq: anchor.seq, prompt: anchor.prompt, ts: anchor.ts, files, unavailableFiles, notCovered }
  }
  return listed
}

/** Tool calls still waiting for a result, in the order they were made. */
export const pendingToolCalls = (state: SessionState): ReadonlyArray<PendingToolCall> =>
  Array.from(HashMap.values(state.pendingToolCalls)).sort((a, b) => a.seq - b.seq || a.blockIndex - b.blockIndex)

/** Snapshot and change records of one path, oldest first. */
export const fileHistory = (state: SessionState, path: string): ReadonlyArray<FileHistoryEntry> =>
  Option.match(HashMap.get(state.files, path), {
    onNone: () => [],
    onSome: (history) => history.toArray()
  })

/**
 * Must a tool snapshot `path` before changing it? Yes unless a snapshot of it was already
 * taken after the latest checkpoint (the first change after each checkpoint is the one
 * restore needs to undo).
 */
export const needsSnapshot = (state: SessionState, path: string): boolean => {
  const lastCheckpoint = state.anchors.at(state.anchors.length - 1)?.seq ?? 0
  const history = Option.getOrUndefined(HashMap.get(state.files, path))
  return history?.find((entry) => entry.kind === "snapshot" && entry.seq > lastCheckpoint) === undefined
}
