/**
 * A session is a pure fold over its log. `step` adds one stored event; `fold` adds many.
 * The state uses persistent collections, so `step` is cheap and old states stay valid;
 * everything else (the conversation, the checkpoints list) is a projection of it.
 */
import { Data, HashMap, Option } from "effect"
import { AppendOnly } from "./internal/appendOnly.js"
import {
  type AssistantMessage,
  type BackgroundCompleted,
  type CapturedState,
  type Compaction,
  contentText,
  type JsonValue,
  type RestoreStarted,
  type RuntimeMessage,
  type StoredEvent,
  type TokenUsage,
  type ToolResult,
  type UserMessage,
  type WorkspaceCaptured
} from "./events.js"
import { type FileHistoryEntry, type NotCovered, pathAtCheckpoint } from "./pathHistory.js"
import { isUserCheckpoint } from "./userCheckpoint.js"

export {
  type FileHistoryEntry,
  type NotCovered,
  pathAtCheckpoint,
  type PathOutcome,
  type PathRestore,
  type RecordedState
} from "./pathHistory.js"

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
  /** Whether the workspace was captured right before it (its turn's shell effects are then covered). */
  readonly workspaceCaptured: boolean
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

/** What the session's last capture saw at a path (a file by its hash; its bytes are in the snapshot store). */
export type KnownPathState =
  | { readonly _tag: "stored"; readonly sha256: string; readonly size: number; readonly mode: number }
  | Extract<CapturedState, { readonly _tag: "link" | "directory" | "unavailable" }>

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
  /**
   * What the last workspace capture saw at every covered path that holds something (a path
   * captured as missing is not in it). Empty until the session's first capture.
   */
  readonly workspace: HashMap.HashMap<string, KnownPathState>
  /** The coverage digest of the session's last capture; undefined before its first. */
  readonly coverage: string | undefined
  /** The seq of the session's first capture: the workspace is known from there on. */
  readonly coveredFrom: number | undefined
  /** The seq of the last capture taken before a prompt (`checkpoint` cause). */
  readonly lastCheckpointCapture: number | undefined
  /** The seq of the session's last capture, whatever its cause. */
  readonly lastCapture: number | undefined
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
  pendingRestore: undefined,
  workspace: HashMap.empty(),
  coverage: undefined,
  coveredFrom: undefined,
  lastCheckpointCapture: undefined,
  lastCapture: undefined
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

/** Whether two states of a path, as the session knows them (undefined: nothing there), are the same. */
export const sameKnownState = (a: KnownPathState | undefined, b: KnownPathState | undefined): boolean => {
  if (a === undefined || b === undefined) return a === b
  switch (a._tag) {
    case "stored":
      return b._tag === "stored" && a.sha256 === b.sha256 && a.size === b.size && a.mode === b.mode
    case "link":
      return b._tag === "link" && a.target === b.target
    case "directory":
      return b._tag === "directory" && a.mode === b.mode
    case "unavailable":
      return b._tag === "unavailable" && a.reason === b.reason && a.size === b.size
  }
}

/** A captured state as the session keeps it (a file by its hash; nothing for `missing`). */
export const knownStateOf = (state: CapturedState): KnownPathState | undefined =>
  state._tag === "missing"
    ? undefined
    : state._tag === "content"
    ? Data.struct({ _tag: "stored", sha256: state.sha256, size: state.size, mode: state.mode })
    : state

const applyCapture = (draft: Draft, seq: number, event: WorkspaceCaptured) => {
  let workspace = draft.workspace
  for (const change of event.changes) {
    draft.files = withFileEntry(draft, change.path, {
      kind: "captured",
      seq,
      cause: event.cause,
      state: change.state,
      firstSeen: change.firstSeen === true
    })
    const known = knownStateOf(change.state)
    workspace = known === undefined ? HashMap.remove(workspace, change.path) : HashMap.set(workspace, change.path, known)
  }
  draft.workspace = workspace
  draft.coverage = event.coverage
  draft.coveredFrom ??= seq
  draft.lastCapture = seq
  if (event.cause._tag === "checkpoint") draft.lastCheckpointCapture = seq
}

/** Fold one stored event into a draft. Never throws. */
const apply = (draft: Draft, stored: StoredEvent): void => {
  draft.head = stored.seq
  draft.lastTs = stored.ts
  const event = stored.event
  switch (event._tag) {
    case "UserMessage": {
      if (isUserCheckpoint(event, HashMap.size(draft.pendingToolCalls))) {
        draft.anchors = draft.anchors.append(Data.struct({
          seq: stored.seq,
          ts: stored.ts,
          prompt: contentText(event.content),
          workspaceCaptured: draft.lastCheckpointCapture === stored.seq - 1
        }))
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
    case "WorkspaceCaptured":
      applyCapture(draft, stored.seq, event)
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
  /** The paths of `unavailableFiles` that the workspace capture does not cover, with why (a restore leaves them as they are). */
  readonly notCovered: ReadonlyArray<NotCovered>
}

/** The rollback anchors, one per real user prompt, oldest first. */
export const checkpoints = (state: SessionState): ReadonlyArray<Checkpoint> => {
  const histories = HashMap.toEntries(state.files).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  return state.anchors.toArray().map((anchor) => {
    const files: Array<string> = []
    const unavailableFiles: Array<string> = []
    const notCovered: Array<NotCovered> = []
    for (const [path, history] of histories) {
      const outcome = pathAtCheckpoint(history.toArray(), anchor.seq, state.coveredFrom)
      if (outcome === undefined) continue
      if (outcome.kind === "restore") files.push(path)
      else unavailableFiles.push(path)
      if (outcome.kind === "notCovered") notCovered.push({ path, reason: outcome.reason })
    }
    return { seq: anchor.seq, prompt: anchor.prompt, ts: anchor.ts, files, unavailableFiles, notCovered }
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
