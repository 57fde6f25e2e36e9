/**
 * The fold: `step` adds one stored event to a state, `fold` many. The state uses persistent
 * collections, so a step is cheap and old states stay valid. A log is a tree (see `LeafMoved`):
 * each node continues the branch ending at the current leaf, and a move takes the state kept at
 * its target — so a restore, an undo or a redo costs what an append costs.
 */
import { Data, HashMap, HashSet, Option } from "effect"
import { AppendOnly } from "./internal/appendOnly.js"
import { contentText, type LeafMoved, type StoredEvent, type WorkspaceCaptured } from "./events.js"
import type { FileHistoryEntry } from "./pathHistory.js"
import {
  type BranchState,
  type ConversationEvent,
  emptySessionState,
  KeptStates,
  knownStateOf,
  type LeafMove,
  NOT_A_NODE,
  type PromptNode,
  SessionState,
  type SessionStateFields
} from "./sessionState.js"
import { isUserCheckpoint } from "./userCheckpoint.js"

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

const addFileEntry = (draft: Draft, path: string, entry: FileHistoryEntry) => {
  const history = Option.getOrElse(HashMap.get(draft.files, path), () => AppendOnly.empty<FileHistoryEntry>())
  draft.files = HashMap.set(draft.files, path, history.append(Data.struct(entry)))
  draft.pathChanges = draft.pathChanges.append(Data.struct({ seq: entry.seq, path }))
}

const applyCapture = (draft: Draft, seq: number, event: WorkspaceCaptured) => {
  if (event.failure !== undefined) {
    draft.captureFailed = Data.struct({ seq, detail: event.failure })
    return
  }
  draft.captureFailed = undefined
  let workspace = draft.workspace
  for (const change of event.changes) {
    addFileEntry(draft, change.path, {
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

/** Events about the log as a whole rather than a step of the conversation or the workspace: not nodes of the tree. */
type LogEvent = Extract<
  StoredEvent["event"],
  { readonly _tag: "LeafMoved" | "BranchLabeled" | "RestoreStarted" | "RestoreEnded" | "SessionMetadata" | "SessionForked" | "ForkMade" | "PermissionDecided" | "BranchesPruned" }
>
type NodeEvent = Exclude<StoredEvent["event"], LogEvent>

const LOG_EVENT_TAGS: ReadonlySet<string> = new Set([
  "LeafMoved",
  "BranchLabeled",
  "RestoreStarted",
  "RestoreEnded",
  "SessionMetadata",
  "SessionForked",
  "ForkMade",
  "PermissionDecided",
  "BranchesPruned"
])

/** Whether an event of this kind is a node of the tree (a step of the conversation or the workspace), not an event about the log. */
export const isNodeTag = (tag: string): boolean => !LOG_EVENT_TAGS.has(tag)

// One read of the tag and a set lookup: reading `_tag` across a dozen event classes is the slow part.
const isLogEvent = (event: StoredEvent["event"]): event is LogEvent => LOG_EVENT_TAGS.has(event._tag)

/** Note a user message of whichever branch for the tree. */
const notePrompt = (draft: Draft, stored: StoredEvent) => {
  if (isPrompt(stored)) draft.prompts = draft.prompts.append(stored)
}

const isPrompt = (stored: StoredEvent): stored is PromptNode => stored.event._tag === "UserMessage"

/** The branch fields of a draft. */
const branchOf = (draft: Draft): BranchState => ({
  leaf: draft.leaf,
  messages: draft.messages,
  compaction: draft.compaction,
  anchors: draft.anchors,
  pendingToolCalls: draft.pendingToolCalls,
  files: draft.files,
  usage: draft.usage,
  workspace: draft.workspace,
  coverage: draft.coverage,
  coveredFrom: draft.coveredFrom,
  lastCheckpointCapture: draft.lastCheckpointCapture,
  lastCapture: draft.lastCapture,
  captureFailed: draft.captureFailed,
  pathChanges: draft.pathChanges
})

/** Keep the draft's current branch as the state at its leaf, for a move there later. */
const keepCurrent = (draft: Draft) => {
  const kept = draft.kept
  draft.kept = new KeptStates(kept.states.append(branchOf(draft)), kept.unfolded, kept.targets)
}

const withParent = (parents: AppendOnly<number>, seq: number, parent: number) => {
  // A fold that starts in the middle of a log: the positions before it are unknown, not nodes.
  let padded = parents
  while (padded.length < seq - 1) padded = padded.append(NOT_A_NODE)
  return padded.append(parent)
}

/** Take the branch fields of `target` (the state at the leaf a move goes to: made by `branchOf`, those fields only). */
const takeBranch = (draft: Draft, target: BranchState) => {
  Object.assign(draft, target)
}

/** Add a node to the current branch (the caller sets the leaf after). Never throws. */
const applyNode = (draft: Draft, stored: StoredEvent, event: NodeEvent): void => {
  switch (event._tag) {
    case "UserMessage": {
      // The state just before a user message: where a restore to it goes.
      keepCurrent(draft)
      if (isUserCheckpoint(event, HashMap.size(draft.pendingToolCalls))) {
        draft.anchors = draft.anchors.append(Data.struct({
          seq: stored.seq,
          ts: stored.ts,
          prompt: contentText(event.content),
          workspaceCaptured: draft.lastCheckpointCapture === draft.leaf
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
      addFileEntry(draft, event.path, {
        kind: "snapshot",
        seq: stored.seq,
        toolUseId: event.toolUseId,
        state: event.state
      })
      return
    case "FileChange":
      addFileEntry(draft, event.path, {
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
  }
}

/**
 * Apply an event about the log as a whole, but for moving the branch (a move's caller does that,
 * and passes the leaf it left as `leafBefore`).
 */
const applyLogEvent = (draft: Draft, stored: StoredEvent, event: LogEvent, leafBefore: number): void => {
  switch (event._tag) {
    case "LeafMoved": {
      // What a valid move does beside moving the branch (the caller checked it is valid).
      const move: LeafMove = Data.struct({ seq: stored.seq, from: leafBefore, to: event.to })
      if (event.reason === "undo") {
        draft.undoable = Data.array(draft.undoable.slice(0, -1))
        draft.redoable = Data.array([...draft.redoable, move])
      } else if (event.reason === "redo") {
        draft.redoable = Data.array(draft.redoable.slice(0, -1))
        draft.undoable = Data.array([...draft.undoable, move])
      } else {
        draft.undoable = Data.array([...draft.undoable, move])
        draft.redoable = Data.array([])
      }
      if (event.restoreStarted !== undefined && draft.pendingRestore?.seq === event.restoreStarted) draft.pendingRestore = undefined
      return
    }
    case "RestoreStarted":
      draft.pendingRestore = Data.struct({ seq: stored.seq, event })
      return
    case "RestoreEnded":
      if (draft.pendingRestore?.seq === event.startedSeq) draft.pendingRestore = undefined
      return
    case "SessionForked":
      // A fork's history of moves starts here: what the source did before is not the fork's to undo.
      draft.forkedFrom = Data.struct({ session: event.from, at: event.at })
      draft.undoable = Data.array([])
      draft.redoable = Data.array([])
      return
    case "ForkMade":
      draft.forks = draft.forks.append(Data.struct({ session: event.fork, at: event.at }))
      return
    case "PermissionDecided":
      if (event.behavior === "allow" && event.remember === true) draft.rememberedTools = HashSet.add(draft.rememberedTools, event.toolName)
      return
    case "BranchesPruned": {
      let pruned = draft.pruned
      for (const branch of event.branches) for (const range of branch.nodes) pruned = pruned.append(Data.struct({ from: range.from, to: range.to }))
      draft.pruned = pruned
      return
    }
    case "BranchLabeled":
      draft.nodeLabels = event.label === "" ? HashMap.remove(draft.nodeLabels, event.seq) : HashMap.set(draft.nodeLabels, event.seq, event.label)
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

/**
 * The state at `leaf`, a move target: kept, or folded from the nearest kept state above it
 * through the events of branches not folded yet (keeping the move targets it passes); undefined
 * when those events are not at hand (a fold that started in the middle of a log).
 */
const stateAt = (draft: Draft, leaf: number): BranchState | undefined => {
  if (leaf === 0) return branchOf(draftOf(emptySessionState))
  const kept = draft.kept.stateAt(leaf)
  if (kept !== undefined) return kept
  const path: Array<StoredEvent> = []
  let at = leaf
  let base: BranchState | undefined
  while (base === undefined) {
    if (at === 0) {
      base = branchOf(draftOf(emptySessionState))
      break
    }
    base = draft.kept.stateAt(at)
    if (base !== undefined) break
    const stored = draft.kept.unfolded[at - 1]
    if (stored === undefined || stored.seq !== at || isLogEvent(stored.event)) return undefined
    path.push(stored)
    at = draft.parents.at(at - 1) ?? NOT_A_NODE
    if (at === NOT_A_NODE) return undefined
  }
  // Fold the way down on a draft of its own (the kept states and targets are shared).
  const branch: Draft = { ...draft, ...base }
  for (let index = path.length - 1; index >= 0; index--) {
    const stored = path[index]!
    applyNode(branch, stored, stored.event as NodeEvent)
    branch.leaf = stored.seq
    if (draft.kept.isTarget(stored.seq)) keepCurrent(branch)
  }
  draft.kept = branch.kept
  return branchOf(branch)
}

/** Fold one stored event into a draft, moving the branch with each valid move. Never throws. */
const apply = (draft: Draft, stored: StoredEvent): void => {
  draft.head = stored.seq
  draft.lastTs = stored.ts
  const event = stored.event
  if (!isLogEvent(event)) {
    draft.parents = withParent(draft.parents, stored.seq, draft.leaf)
    notePrompt(draft, stored)
    applyNode(draft, stored, event)
    draft.leaf = stored.seq
    return
  }
  draft.parents = withParent(draft.parents, stored.seq, NOT_A_NODE)
  if (event._tag !== "LeafMoved") {
    applyLogEvent(draft, stored, event, draft.leaf)
    return
  }
  if (!draft.kept.isTarget(event.to)) return
  const leafBefore = draft.leaf
  keepCurrent(draft)
  applyLogEvent(draft, stored, event, leafBefore)
  const target = stateAt(draft, event.to)
  if (target === undefined) draft.branchUnknown = true
  else takeBranch(draft, target)
}

/** Fold one stored event into the state. Pure; never throws. */
export const step = (state: SessionState, stored: StoredEvent): SessionState => {
  const draft = draftOf(state)
  apply(draft, stored)
  return new SessionState(draft)
}

/**
 * The first pass over a whole log: each node's parent, the moves that are followed (with the
 * leaf each left), the leaves a move may go to, the events about the log as a whole, the user
 * messages, and the final leaf. Undefined when the events are not a whole log from seq 1.
 */
const scanLog = (all: ReadonlyArray<StoredEvent>) => {
  const parents: Array<number> = []
  const moveTargets = new Set<number>([0])
  const targetList: Array<number> = [0]
  const leavesLeft = new Map<number, number>()
  const logEvents: Array<StoredEvent> = []
  const prompts: Array<PromptNode> = []
  let leaf = 0
  for (let index = 0; index < all.length; index++) {
    const stored = all[index]!
    if (stored.seq !== index + 1) return undefined
    const event = stored.event
    const tag = event._tag
    if (!LOG_EVENT_TAGS.has(tag)) {
      if (tag === "UserMessage") {
        moveTargets.add(leaf)
        targetList.push(leaf)
        prompts.push(stored as PromptNode)
      }
      parents.push(leaf)
      leaf = stored.seq
      continue
    }
    parents.push(NOT_A_NODE)
    logEvents.push(stored)
    if (tag === "LeafMoved" && moveTargets.has((event as LeafMoved).to)) {
      moveTargets.add(leaf)
      targetList.push(leaf)
      leavesLeft.set(stored.seq, leaf)
      leaf = (event as LeafMoved).to
    }
  }
  return { parents, moveTargets, targetList, leavesLeft, logEvents, prompts, leaf }
}

/**
 * Fold stored events (in seq order) onto `from` (default: the empty session). A whole log (from
 * seq 1 onto the empty session) is folded in two passes: the first finds each node's parent,
 * which moves are valid and the final leaf; the second folds only the branch that ends there —
 * what folding a linear session of that length costs, after one quick look at every event —
 * keeping the states at the move targets on it and, for moves to other branches later, the log.
 */
export const fold = (events: Iterable<StoredEvent>, from: SessionState = emptySessionState): SessionState => {
  const all = Array.isArray(events) ? (events as ReadonlyArray<StoredEvent>) : Array.from(events)
  const foldEach = () => {
    let draft: Draft | undefined
    for (const stored of all) apply(draft ??= draftOf(from), stored)
    return draft === undefined ? from : new SessionState(draft)
  }
  if (from.head !== 0 || from.parents.length !== 0) return foldEach()
  const scanned = scanLog(all)
  // Not a whole log (it does not start at seq 1, or has a gap): event by event.
  if (scanned === undefined) return foldEach()
  const { leavesLeft, logEvents, moveTargets, parents, prompts, targetList } = scanned
  const leaf = scanned.leaf
  // The nodes of the final branch, oldest first (a log no move ever left a branch of is one branch).
  let branch: ReadonlyArray<StoredEvent>
  if (leavesLeft.size === 0) {
    branch = logEvents.length === 0 ? all : all.filter((stored) => !isLogEvent(stored.event))
  } else {
    const nodes: Array<StoredEvent> = []
    for (let at = leaf; at > 0; at = parents[at - 1]!) nodes.push(all[at - 1]!)
    branch = nodes.reverse()
  }
  const draft = draftOf(from)
  draft.parents = AppendOnly.adopt(parents)
  draft.prompts = AppendOnly.adopt(prompts)
  draft.kept = new KeptStates(AppendOnly.empty(), [], AppendOnly.adopt(targetList))
  // Nothing about the log as a whole depends on the branch, nor the branch on it: each in its order.
  for (const stored of logEvents) {
    const event = stored.event as LogEvent
    const leafLeft = leavesLeft.get(stored.seq)
    if (event._tag !== "LeafMoved") applyLogEvent(draft, stored, event, 0)
    else if (leafLeft !== undefined) applyLogEvent(draft, stored, event, leafLeft)
  }
  for (const stored of branch) {
    applyNode(draft, stored, stored.event as NodeEvent)
    draft.leaf = stored.seq
    if (moveTargets.has(stored.seq)) keepCurrent(draft)
  }
  const last = all[all.length - 1]
  if (last !== undefined) {
    draft.head = last.seq
    draft.lastTs = last.ts
  }
  // Moves to other branches fold from the log itself (its events by seq).
  draft.kept = new KeptStates(draft.kept.states, all, draft.kept.targets)
  return new SessionState(draft)
}
