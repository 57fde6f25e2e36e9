/**
 * A session's folded state: what the log says about the current branch (its conversation,
 * checkpoints, file histories, the workspace as last captured) and about the log as a whole (its
 * head, the tree's parents, the undo and redo histories, a restore under way, metadata). Built
 * by the fold (sessionFold.ts); read through the projections (session.ts).
 */
import { Data, Equal, Hash, HashMap, HashSet } from "effect"
import { AppendOnly } from "./internal/appendOnly.js"
import type {
  AssistantMessage,
  BackgroundCompleted,
  CapturedState,
  Compaction,
  JsonValue,
  RestoreStarted,
  RuntimeMessage,
  SeqRange,
  StoredEvent,
  TokenUsage,
  ToolResult,
  UserMessage
} from "./events.js"
import type { FileHistoryEntry } from "./pathHistory.js"

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

/** Where a fork came from: the session, and how many of its events the fork starts with. */
export interface ForkOrigin {
  readonly session: string
  readonly at: number
}

/** A move of the session's leaf, as the undo and redo histories keep it. */
export interface LeafMove {
  /** The seq of its `LeafMoved`. */
  readonly seq: number
  readonly from: number
  readonly to: number
}

/** The fields that describe the current branch; a move takes them from the state kept where it goes. */
export type BranchState = Pick<
  SessionStateFields,
  | "leaf"
  | "messages"
  | "compaction"
  | "anchors"
  | "pendingToolCalls"
  | "files"
  | "usage"
  | "workspace"
  | "coverage"
  | "coveredFrom"
  | "lastCheckpointCapture"
  | "lastCapture"
  | "captureFailed"
  | "pathChanges"
>

/**
 * What makes a move as cheap as an append: the branch's state at each leaf a move can go to
 * that the fold has passed, the log a whole-log fold read (it folds only the current branch: a
 * move to another folds the rest of the way from the nearest kept state), and which leaves a
 * move may go to at all. Lists, appended to once per user message or move and searched only
 * by a move. Derived from the log, not part of the session's value: any two are equal.
 */
export class KeptStates implements Equal.Equal {
  constructor(
    readonly states: AppendOnly<BranchState>,
    /** The log a whole-log fold folded, by seq − 1 (empty when folded event by event). */
    readonly unfolded: ReadonlyArray<StoredEvent>,
    /**
     * Leaves a move may go to besides those kept (and 0): a whole-log fold finds them all — the
     * node before each user message, the leaf each move left — on branches it does not fold.
     * (Folding event by event keeps a state at each of them as it passes.)
     */
    readonly targets: AppendOnly<number>
  ) {}

  /** The branch kept at `leaf`, if any. */
  stateAt(leaf: number): BranchState | undefined {
    for (let index = this.states.length - 1; index >= 0; index--) {
      const kept = this.states.at(index)!
      if (kept.leaf === leaf) return kept
    }
    return undefined
  }

  /** Whether a move may go to `leaf` (a move anywhere else is not followed, by either fold). */
  isTarget(leaf: number): boolean {
    if (leaf === 0 || this.stateAt(leaf) !== undefined) return true
    for (let index = this.targets.length - 1; index >= 0; index--) if (this.targets.at(index) === leaf) return true
    return false
  }

  [Equal.symbol](that: Equal.Equal): boolean {
    return that instanceof KeptStates
  }
  [Hash.symbol](): number {
    return 0
  }
}

/** A user message of any branch, as the tree shows it (as it was stored). */
export type PromptNode = StoredEvent & { readonly event: UserMessage }

/** A log position that is not a node of the tree: a move, a restore's intent or end, metadata. */
export const NOT_A_NODE = -1

export interface SessionStateFields {
  /** Seq of the last event folded in (of whatever branch): the log's head; 0 for an empty session. */
  readonly head: number
  /** `ts` of the last event, or `undefined` for an empty session. */
  readonly lastTs: number | undefined
  /** The last node of the current branch (0: none): the events appended next continue it. */
  readonly leaf: number
  /** Each seq's parent node (0: the root), or `NOT_A_NODE`, at index seq − 1. */
  readonly parents: AppendOnly<number>
  /** Moves an undo can reverse, the last on top. */
  readonly undoable: ReadonlyArray<LeafMove>
  /** Undos a redo can reverse, the last on top (emptied by a restore or a switch). */
  readonly redoable: ReadonlyArray<LeafMove>
  /** Every user message of every branch, in log order (what the tree shows of branches not folded). */
  readonly prompts: AppendOnly<PromptNode>
  /** The session this one was forked from (`SessionForked`), if it is a fork. */
  readonly forkedFrom: ForkOrigin | undefined
  /** The forks made of this session (`ForkMade`), oldest first: each fork's id and the events it shares. */
  readonly forks: AppendOnly<ForkOrigin>
  /** Tools a permission decision allowed for the rest of the session (`PermissionDecided` with `remember`). */
  readonly rememberedTools: HashSet.HashSet<string>
  /** The names given to nodes (`BranchLabeled`), by seq. */
  readonly nodeLabels: HashMap.HashMap<number, string>
  /** The seq ranges whose nodes were pruned (`BranchesPruned`), in log order: see `isPruned`. */
  readonly pruned: AppendOnly<SeqRange>
  readonly kept: KeptStates
  /**
   * A move went to a leaf whose branch this state cannot rebuild (it was folded from the middle
   * of a log): fold the log again from the start. Never set by a fold of a whole log.
   */
  readonly branchUnknown: boolean
  /** Per covered change, in the branch's order: which paths changed after a seq, without looking at every path. */
  readonly pathChanges: AppendOnly<PathChange>
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
  /** The branch's last capture failed as a whole: what changed since the one before is unknown until the next. */
  readonly captureFailed: { readonly seq: number; readonly detail: string } | undefined
}

export class SessionState extends Data.Class<SessionStateFields> {}

/** Whether `seq` is a node of a branch that was pruned (`BranchesPruned`): no move goes there, and gc does not keep what only it references. */
export const isPruned = (state: SessionStateFields, seq: number): boolean => {
  if ((state.parents.at(seq - 1) ?? NOT_A_NODE) === NOT_A_NODE) return false
  for (let index = state.pruned.length - 1; index >= 0; index--) {
    const range = state.pruned.at(index)!
    if (range.from <= seq && seq <= range.to) return true
  }
  return false
}

/** A path a history entry was added for, and the entry's seq. */
export interface PathChange {
  readonly seq: number
  readonly path: string
}


export const emptySessionState: SessionState = new SessionState({
  head: 0,
  lastTs: undefined,
  leaf: 0,
  parents: AppendOnly.empty(),
  undoable: Data.array([]),
  redoable: Data.array([]),
  prompts: AppendOnly.empty(),
  forkedFrom: undefined,
  forks: AppendOnly.empty(),
  rememberedTools: HashSet.empty(),
  nodeLabels: HashMap.empty(),
  pruned: AppendOnly.empty(),
  kept: new KeptStates(AppendOnly.empty(), [], AppendOnly.empty()),
  branchUnknown: false,
  pathChanges: AppendOnly.empty(),
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
  lastCapture: undefined,
  captureFailed: undefined
})

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
