/**
 * A session is a pure fold over its log. `step` adds one stored event; `fold` adds many.
 * The state uses persistent collections, so `step` is cheap and old states stay valid;
 * everything else (the conversation, the checkpoints list) is a projection of it.
 */
import { Data, HashMap, Option } from "effect"
import { sha256Hex } from "./internal/sha256.js"
import type { RefusalReason } from "./errors.js"
import { AppendOnly } from "./internal/appendOnly.js"
import {
  type AssistantMessage,
  type BackgroundCompleted,
  type Compaction,
  contentText,
  type FileAfterState,
  type FileChange,
  type FileSnapshotState,
  type JsonValue,
  type RestoreStarted,
  type RuntimeMessage,
  type StoredEvent,
  type TokenUsage,
  type ToolResult,
  type UserMessage
} from "./events.js"
import { isUserCheckpoint } from "./userCheckpoint.js"

export type ConversationEvent = UserMessage | RuntimeMessage | AssistantMessage | ToolResult | BackgroundCompleted

/** A message in the conversation, with where it sits in the log. */
export interface ConversationEntry {
  readonly seq: number
  readonly ts: number
  readonly event: ConversationEvent
}

/** A rollback anchor: a real user prompt. */
export interface CheckpointAnchor {
  readonly seq: number
  readonly ts: number
  readonly prompt: string
}

export interface PendingToolCall {
  readonly toolUseId: string
  readonly name: string
  readonly input: JsonValue
  /** Seq of the assistant message that asked for it. */
  readonly seq: number
  /** Position of the call among that message's blocks. */
  readonly blockIndex: number
}

export type FileHistoryEntry =
  | { readonly kind: "snapshot"; readonly seq: number; readonly toolUseId: string; readonly state: FileSnapshotState }
  | {
    readonly kind: "change"
    readonly seq: number
    readonly toolUseId: string
    readonly operation: FileChange["operation"]
    readonly after: FileAfterState | undefined
  }

export interface SessionMetadataState {
  readonly formatVersion: number | undefined
  readonly title: string | undefined
  readonly workdir: string | undefined
  readonly model: string | undefined
  readonly labels: HashMap.HashMap<string, string>
}

export interface PendingRestore {
  /** The seq of its `RestoreStarted`. */
  readonly seq: number
  readonly event: RestoreStarted
}

export interface CompactionBoundary {
  readonly seq: number
  readonly event: Compaction
}

interface SessionStateFields {
  /** Seq of the last event folded in; 0 for an empty session. */
  readonly head: number
  /** `ts` of the last event, or `undefined` for an empty session. */
  readonly lastTs: number | undefined
  /** Every message ever appended, compacted ones included (see {@link conversation}). */
  readonly messages: AppendOnly<ConversationEntry>
  readonly compaction: CompactionBoundary | undefined
  readonly anchors: AppendOnly<CheckpointAnchor>
  /** Tool calls the assistant made that have no result yet, by tool-use id. */
  readonly pendingToolCalls: HashMap.HashMap<string, PendingToolCall>
  /** Snapshot and change records per path, oldest first. */
  readonly files: HashMap.HashMap<string, AppendOnly<FileHistoryEntry>>
  readonly metadata: SessionMetadataState
  readonly usage: TokenUsage
  /** A restore whose intent is in the log and not closed: it was cut short (or is under way). */
  readonly pendingRestore: PendingRestore | undefined
}

export class SessionState extends Data.Class<SessionStateFields> {}

export const emptySessionState: SessionState = new SessionState({
  head: 0,
  lastTs: undefined,
  messages: AppendOnly.empty(),
  compaction: undefined,
  anchors: AppendOnly.empty(),
  pendingToolCalls: HashMap.empty(),
  files: HashMap.empty(),
  metadata: Data.struct({
    formatVersion: undefined,
    title: undefined,
    workdir: undefined,
    model: undefined,
    labels: HashMap.empty<string, string>()
  }),
  usage: Data.struct({ inputTokens: 0, outputTokens: 0 }),
  pendingRestore: undefined
})

/**
 * A state being built: the fields of a `SessionState`, changed in place. `fold` applies all of
 * its events to one draft and makes one state at the end, rather than a state per event (this
 * runs once per event of a replay). The persistent parts (`AppendOnly`, `HashMap`) are never
 * changed in place, so a draft never alters the state it started from.
 */
type Draft = { -readonly [K in keyof SessionStateFields]: SessionStateFields[K] }

/** A state's fields as a draft (its own properties are exactly its fields). */
const draftOf = (state: SessionState): Draft => ({ ...state })

const withMessage = (draft: Draft, stored: StoredEvent, event: ConversationEvent) =>
  draft.messages.append(Data.struct({ seq: stored.seq, ts: stored.ts, event }))

const withFileEntry = (draft: Draft, path: string, entry: FileHistoryEntry) => {
  const history = Option.getOrElse(HashMap.get(draft.files, path), () => AppendOnly.empty<FileHistoryEntry>())
  return HashMap.set(draft.files, path, history.append(Data.struct(entry)))
}

/** Fold one stored event into a draft. Never throws. */
const apply = (draft: Draft, stored: StoredEvent): void => {
  draft.head = stored.seq
  draft.lastTs = stored.ts
  const event = stored.event
  switch (event._tag) {
    case "UserMessage": {
      if (isUserCheckpoint(event, HashMap.size(draft.pendingToolCalls))) {
        draft.anchors = draft.anchors.append(Data.struct({ seq: stored.seq, ts: stored.ts, prompt: contentText(event.content) }))
      }
      draft.messages = withMessage(draft, stored, event)
      return
    }
    case "RuntimeMessage":
    case "BackgroundCompleted":
      draft.messages = withMessage(draft, stored, event)
      return
    case "AssistantMessage": {
      let pendingToolCalls = draft.pendingToolCalls
      event.content.forEach((block, blockIndex) => {
        if (block.type === "tool_use") {
          pendingToolCalls = HashMap.set(
            pendingToolCalls,
            block.id,
            Data.struct({ toolUseId: block.id, name: block.name, input: block.input, seq: stored.seq, blockIndex })
          )
        }
      })
      if (event.usage !== undefined) {
        draft.usage = Data.struct({
          inputTokens: draft.usage.inputTokens + event.usage.inputTokens,
          outputTokens: draft.usage.outputTokens + event.usage.outputTokens
        })
      }
      draft.messages = withMessage(draft, stored, event)
      draft.pendingToolCalls = pendingToolCalls
      return
    }
    case "ToolResult":
      draft.messages = withMessage(draft, stored, event)
      draft.pendingToolCalls = HashMap.remove(draft.pendingToolCalls, event.toolUseId)
      return
    case "FileSnapshot":
      draft.files = withFileEntry(draft, event.path, {
        kind: "snapshot",
        seq: stored.seq,
        toolUseId: event.toolUseId,
        state: event.state
      })
      return
    case "FileChange":
      draft.files = withFileEntry(draft, event.path, {
        kind: "change",
        seq: stored.seq,
        toolUseId: event.toolUseId,
        operation: event.operation,
        after: event.after
      })
      return
    case "Compaction":
      draft.compaction = Data.struct({ seq: stored.seq, event })
      return
    case "RestoreStarted":
      draft.pendingRestore = Data.struct({ seq: stored.seq, event })
      return
    case "RestoreEnded":
      if (draft.pendingRestore?.seq === event.startedSeq) draft.pendingRestore = undefined
      return
    case "SessionMetadata": {
      const previous = draft.metadata
      let labels = previous.labels
      for (const [key, value] of Object.entries(event.labels ?? {})) labels = HashMap.set(labels, key, value)
      draft.metadata = Data.struct({
        formatVersion: event.formatVersion,
        title: event.title ?? previous.title,
        workdir: event.workdir ?? previous.workdir,
        model: event.model ?? previous.model,
        labels
      })
      return
    }
  }
}

/** Fold one stored event into the state. Pure; never throws. */
export const step = (state: SessionState, stored: StoredEvent): SessionState => {
  const draft = draftOf(state)
  apply(draft, stored)
  return new SessionState(draft)
}

/** Fold stored events (in seq order) onto `from` (default: the empty session). */
export const fold = (events: Iterable<StoredEvent>, from: SessionState = emptySessionState): SessionState => {
  let draft: Draft | undefined
  for (const stored of events) apply(draft ??= draftOf(from), stored)
  return draft === undefined ? from : new SessionState(draft)
}

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
  /** The checkpoint it goes back to. */
  readonly checkpoint: number
  /** The seq of its intent (`RestoreStarted`). */
  readonly startedSeq: number
  readonly conversation: boolean
  /** The files it set out to change. */
  readonly files: ReadonlyArray<string>
}

/** The session's restore that was cut short (or is under way), if any. */
export const interruptedRestore = (state: SessionState): InterruptedRestore | undefined => {
  const pending = state.pendingRestore
  return pending === undefined ? undefined : {
    checkpoint: pending.event.checkpoint,
    startedSeq: pending.seq,
    conversation: pending.event.conversation,
    files: pending.event.files.map((file) => file.path)
  }
}

export interface Checkpoint {
  readonly seq: number
  readonly prompt: string
  readonly ts: number
  /** Paths changed after this checkpoint that restore can put back. */
  readonly files: ReadonlyArray<string>
  /** Paths changed after this checkpoint whose earlier state was not (usably) recorded. */
  readonly unavailableFiles: ReadonlyArray<string>
}

/**
 * What restoring one path to before a checkpoint does: put content back (with this hash, size
 * and mode), or delete it. The bytes are inline (`data`) for logs from before the snapshot
 * store; otherwise they are read from the store by hash when the restore runs.
 */
export type PathRestore =
  | {
    readonly kind: "write"
    readonly sha256: string
    readonly size: number
    readonly mode: number
    readonly data: Uint8Array | undefined
  }
  | { readonly kind: "delete" }

/**
 * How a path can be put back to before a checkpoint, given its history entries after that
 * checkpoint (oldest first) — or why it cannot. The one rule used by both `checkpoints`
 * (which files restore can put back) and the restore planner.
 */
export const pathRestore = (
  after: ReadonlyArray<FileHistoryEntry>
): PathRestore | { readonly reason: Extract<RefusalReason, `snapshot_${string}` | "tool_interrupted">; readonly detail: string } => {
  const interrupted = after.find((entry, index) =>
    entry.kind === "snapshot" &&
    !after.slice(index + 1).some((later) => later.kind === "change" && later.toolUseId === entry.toolUseId)
  )
  if (interrupted !== undefined) {
    return {
      reason: "tool_interrupted",
      detail: `tool call ${interrupted.toolUseId} snapshotted the file at seq ${interrupted.seq} but never recorded its change`
    }
  }
  const first = after[0]
  if (first === undefined || first.kind !== "snapshot") {
    return { reason: "snapshot_missing", detail: `changed at seq ${first?.seq ?? "?"} with no snapshot taken before` }
  }
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

/** The rollback anchors, one per real user prompt, oldest first. */
export const checkpoints = (state: SessionState): ReadonlyArray<Checkpoint> => {
  const histories = HashMap.toEntries(state.files).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  return state.anchors.toArray().map((anchor) => {
    const files: Array<string> = []
    const unavailableFiles: Array<string> = []
    for (const [path, history] of histories) {
      const after = history.toArray().filter((entry) => entry.seq > anchor.seq)
      if (after.length === 0) continue
      ;("kind" in pathRestore(after) ? files : unavailableFiles).push(path)
    }
    return { seq: anchor.seq, prompt: anchor.prompt, ts: anchor.ts, files, unavailableFiles }
  })
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
