/**
 * The restore planner: pure, from the folded state. It says, for every path changed after
 * a checkpoint, what the path goes back to, what the agent left there (to detect outside
 * edits), and every reason the restore must be refused. Checking the disk is the caller's
 * job (preflight); this module never does I/O.
 */
import { HashMap, Option } from "effect"
import { inputWithStoredNotes, type JsonValue } from "./events.js"
import type { Refusal } from "./errors.js"
import { type FileHistoryEntry, lastRecordedState, pathAtLeaf } from "./pathHistory.js"
import {
  type CheckpointAnchor,
  type ConversationEntry,
  type NotCovered,
  pathAtCheckpoint,
  pathsChangedAfter,
  type PathOutcome,
  type PathRestore,
  isPruned,
  type PendingToolCall,
  type RecordedState,
  type SessionState
} from "./session.js"

/** Tools whose effects restore undoes (through snapshots); anything else is reported, not undone. */
export const FILE_TOOLS: ReadonlySet<string> = new Set(["read_file", "write_file", "edit_file", "delete_file", "list_files", "chmod_file"])

export type FileAction = PathRestore

export interface FilePlan {
  readonly path: string
  /** What the path goes back to. */
  readonly action: FileAction
  /** What the session last recorded there (a change record or a capture), or undefined when no hash was recorded. */
  readonly expected: RecordedState | undefined
}

export interface CommandAfterCheckpoint {
  readonly seq: number
  readonly tool: string
  readonly input: JsonValue
}

/** What a restore or a move of the session's leaf does to the files, and where the leaf goes. */
export interface FilesPlan {
  /** The leaf the session goes to (for a restore: the node just before the checkpoint's prompt). */
  readonly leafAfter: number
  /** The head the plan was made from; the move expects it. */
  readonly head: number
  readonly files: ReadonlyArray<FilePlan>
  /** Reasons found without looking at the disk. */
  readonly refusals: ReadonlyArray<Refusal>
  /** Paths whose last change record has no hash: outside edits to them cannot be detected. */
  readonly unverifiedFiles: ReadonlyArray<string>
  /** Shell commands and other non-file tools called after the checkpoint in turns the workspace capture did not cover: not undone. */
  readonly commandsNotUndone: ReadonlyArray<CommandAfterCheckpoint>
  /** Paths changed after the checkpoint that the workspace capture does not cover: left as they are. */
  readonly notCovered: ReadonlyArray<NotCovered>
}

export interface RestorePlan extends FilesPlan {
  readonly sessionId: string
  readonly seq: number
}


/**
 * Plan a restore of `state` to just before checkpoint `seq`. The fold holds every message
 * with its seq, so the plan needs nothing but the state (not the log).
 */
export const planRestore = (
  sessionId: string,
  state: SessionState,
  seq: number,
  options: {
    readonly files: boolean
    readonly conversation: boolean
    /** Undo the user's own edits between turns too (seen by a capture before a prompt); refused otherwise. */
    readonly includeUserEdits?: boolean
  }
): RestorePlan => {
  const refusals: Array<Refusal> = []
  const files: Array<FilePlan> = []
  const unverifiedFiles: Array<string> = []
  const commandsNotUndone: Array<CommandAfterCheckpoint> = []
  const notCovered: Array<NotCovered> = []
  const base = { sessionId, seq, leafAfter: Math.max(0, state.parents.at(seq - 1) ?? seq - 1), head: state.head }
  const done = () => ({ ...base, files, refusals, unverifiedFiles, commandsNotUndone, notCovered })

  // The checkpoint and the turns after it, found from the end: a restore costs what it undoes.
  const anchorsAfter: Array<CheckpointAnchor> = []
  let isCheckpoint = false
  for (let index = state.anchors.length - 1; index >= 0; index--) {
    const anchor = state.anchors.at(index)!
    if (anchor.seq < seq) break
    if (anchor.seq === seq) isCheckpoint = true
    anchorsAfter.unshift(anchor)
  }
  if (!isCheckpoint && isPruned(state, seq)) {
    refusals.push({ reason: "branch_pruned", detail: `seq ${seq} is on a branch that was pruned: it is shown in the tree, but no restore goes there` })
    return done()
  }
  if (!isCheckpoint) {
    refusals.push({ reason: "not_a_checkpoint", detail: `seq ${seq} is not a checkpoint (user prompt) of this session` })
    return done()
  }

  const messagesAfter: Array<ConversationEntry> = []
  for (let index = state.messages.length - 1; index >= 0; index--) {
    const entry = state.messages.at(index)!
    if (entry.seq <= seq) break
    messagesAfter.unshift(entry)
  }
  // Tool calls made after the checkpoint, in turns the workspace capture did not cover, that restore cannot undo.
  const capturedTurnAt = (at: number) => {
    let turn: CheckpointAnchor | undefined
    for (const anchor of anchorsAfter) if (anchor.seq <= at) turn = anchor
    return turn?.workspaceCaptured === true
  }
  for (const { event, seq: at } of messagesAfter) {
    if (event._tag !== "AssistantMessage" || capturedTurnAt(at)) continue
    for (const block of event.content) {
      if (block.type === "tool_use" && !FILE_TOOLS.has(block.name)) {
        commandsNotUndone.push({ seq: at, tool: block.name, input: inputWithStoredNotes(block) })
      }
    }
  }

  if (options.conversation) {
    // A tool call made before the cut whose result lands after it would be cut in half: one still
    // waiting just before the checkpoint that is not waiting any more.
    for (const call of openAt(state, base.leafAfter, seq)) {
      if (!HashMap.has(state.pendingToolCalls, call.toolUseId)) {
        refusals.push({
          reason: "tool_call_cut",
          detail: `tool call ${call.toolUseId} (${call.name}) at seq ${call.seq} has its result after the checkpoint`
        })
      }
    }
  }

  if (!options.files) return done()
  const failed = captureFailedRefusal(state)
  if (failed !== undefined) {
    refusals.push(failed)
    return done()
  }

  // Only the paths changed after the checkpoint (a whole-workspace capture knows every path of the workdir).
  const plan = { files, refusals, unverifiedFiles, notCovered }
  for (const path of pathsChangedAfter(state, seq)) {
    addPath(plan, path, pathAtCheckpoint(historyOf(state, path), seq, state.coveredFrom), options.includeUserEdits === true)
  }
  return done()
}

/** A branch whose last capture failed cannot say what changed since the one before: refuse rather than miss a change. */
const captureFailedRefusal = (state: SessionState): Refusal | undefined =>
  state.captureFailed === undefined ? undefined : {
    reason: "capture_failed",
    detail: `the workspace capture at seq ${state.captureFailed.seq} failed (${state.captureFailed.detail}): ` +
      "what changed since the capture before it is not known until the next capture (the next prompt takes one); " +
      "restore only the conversation with files: false"
  }

/** The state a path's restore leaves there, as the session records states (what a preflight compares the disk with). */
export const stateLeftBy = (action: PathRestore): RecordedState => {
  switch (action.kind) {
    case "write":
      return { _tag: "file", sha256: action.sha256, size: action.size, mode: action.mode }
    case "delete":
      return { _tag: "absent" }
    case "link":
      return { _tag: "link", target: action.target }
    case "directory":
      return { _tag: "directory", mode: action.mode }
  }
}

/**
 * The tool calls waiting for a result just before checkpoint `seq` (whose node before it is
 * `leaf`): as the state kept there says, or, for a state folded without it, from the messages.
 */
const openAt = (state: SessionState, leaf: number, seq: number): ReadonlyArray<PendingToolCall> => {
  const kept = state.kept.stateAt(leaf)
  if (kept !== undefined) return Array.from(HashMap.values(kept.pendingToolCalls)).sort((a, b) => a.seq - b.seq || a.blockIndex - b.blockIndex)
  const open = new Map<string, PendingToolCall>()
  for (const { event, seq: at } of state.messages) {
    if (at >= seq) break
    if (event._tag === "AssistantMessage") {
      event.content.forEach((block, blockIndex) => {
        if (block.type === "tool_use") open.set(block.id, { toolUseId: block.id, name: block.name, input: block.input, seq: at, blockIndex })
      })
    } else if (event._tag === "ToolResult") {
      open.delete(event.toolUseId)
    }
  }
  return Array.from(open.values())
}

const historyOf = (state: SessionState, path: string): ReadonlyArray<FileHistoryEntry> =>
  Option.match(HashMap.get(state.files, path), { onNone: () => [], onSome: (history) => history.toArray() })

/** Add what one path's outcome says to a plan: a file to change, a refusal, or a path left as it is. */
const addPath = (
  plan: {
    readonly files: Array<FilePlan>
    readonly refusals: Array<Refusal>
    readonly unverifiedFiles: Array<string>
    readonly notCovered: Array<NotCovered>
  },
  path: string,
  outcome: PathOutcome | undefined,
  includeUserEdits: boolean
) => {
  if (outcome === undefined) return
  if (outcome.kind === "refused") {
    plan.refusals.push({ path, reason: outcome.refusal.reason, detail: outcome.refusal.detail })
    return
  }
  if (outcome.kind === "notCovered") {
    plan.notCovered.push({ path, reason: outcome.reason })
    return
  }
  if (outcome.userEdits.length > 0 && !includeUserEdits) {
    plan.refusals.push({
      path,
      reason: "modified_externally",
      detail: `changed outside the session between turns (seen by the capture at seq ${outcome.userEdits.join(", ")}, before a prompt); ` +
        "pass includeUserEdits to undo that too"
    })
    return
  }
  if (outcome.expected === undefined) plan.unverifiedFiles.push(path)
  plan.files.push({ path, action: outcome.action, expected: outcome.expected })
}

/**
 * Plan a move of the session's leaf from `current` to the state `target` folds to (an undo, a
 * redo, a switch to another branch). Below their fork point both branches agree; above it, a
 * path the target's branch changed goes to what that branch left there, and a path only the
 * current branch changed goes back to its state at the fork point — each checked, as for a
 * restore, against what the current branch last recorded there (outside edits), and refused
 * when the current branch saw the user change it between turns (unless `includeUserEdits`).
 */
export const planMove = (
  current: SessionState,
  target: SessionState,
  options: { readonly includeUserEdits?: boolean }
): FilesPlan => {
  // The fork point: a parent's seq is below its child's, so step up from the later of the two
  // until they meet — as far as the branches differ, not as far as the root.
  const parentOf = (seq: number) => Math.max(0, current.parents.at(seq - 1) ?? 0)
  let mine = current.leaf
  let theirs = target.leaf
  while (mine !== theirs) {
    if (mine > theirs) mine = parentOf(mine)
    else theirs = parentOf(theirs)
  }
  const fork = mine
  const plan = { files: [] as Array<FilePlan>, refusals: [] as Array<Refusal>, unverifiedFiles: [] as Array<string>, notCovered: [] as Array<NotCovered> }
  if (isPruned(current, target.leaf)) {
    const pruned: Refusal = { reason: "branch_pruned", detail: `seq ${target.leaf} is on a branch that was pruned: it is shown in the tree, but no move goes there` }
    return { ...plan, refusals: [pruned], leafAfter: target.leaf, head: current.head, commandsNotUndone: [] }
  }
  const failed = captureFailedRefusal(current)
  if (failed !== undefined) return { ...plan, refusals: [failed], leafAfter: target.leaf, head: current.head, commandsNotUndone: [] }
  const paths = new Set([...pathsChangedAfter(current, fork), ...pathsChangedAfter(target, fork)])
  for (const path of Array.from(paths).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
    const mine = historyOf(current, path)
    const theirs = historyOf(target, path)
    if (!theirs.some((entry) => entry.seq > fork)) {
      addPath(plan, path, pathAtCheckpoint(mine, fork, current.coveredFrom), options.includeUserEdits === true)
      continue
    }
    const left = pathAtLeaf(theirs)
    const changedHere = mine.some((entry) => entry.seq > fork)
    const userEdits = mine.flatMap((entry) =>
      entry.seq > fork && entry.kind === "captured" && entry.cause._tag === "checkpoint" ? [entry.seq] : []
    )
    // What the disk should hold now: what this branch last recorded there or, when it has not
    // changed the path since the fork, its state at the fork as the other branch recorded it.
    const atFork = changedHere ? undefined : pathAtCheckpoint(theirs, fork, target.coveredFrom)
    const expected = atFork?.kind === "restore" ? stateLeftBy(atFork.action) : lastRecordedState(mine)
    addPath(
      plan,
      path,
      left.kind === "restore" ? { kind: "restore", action: left.action, expected, userEdits } : left,
      options.includeUserEdits === true
    )
  }
  return { ...plan, leafAfter: target.leaf, head: current.head, commandsNotUndone: [] }
}

/** What putting a session's files, as they are at its leaf, into an empty directory takes (a fork elsewhere). */
export interface MaterialisePlan {
  /** Every path the session knows something is at, with what to put there (no deletes: the directory starts empty). */
  readonly files: ReadonlyArray<{ readonly path: string; readonly action: Exclude<PathRestore, { readonly kind: "delete" }> }>
  /** Paths whose state at the leaf is not known well enough to write (a tool call cut short, a snapshot missing). */
  readonly refusals: ReadonlyArray<Refusal>
  /** Paths the session knows of but cannot write (over the capture's cap, not a regular file): left out. */
  readonly notCovered: ReadonlyArray<NotCovered>
}

/**
 * The session's files as they are at its leaf, for a directory of their own: each path's last
 * record on the branch (a capture, a tool's change), in path order. Only what the session
 * recorded — covered files and the ones its file tools changed; an ignored path is not there.
 */
export const planMaterialise = (state: SessionState): MaterialisePlan => {
  const files: Array<MaterialisePlan["files"][number]> = []
  const refusals: Array<Refusal> = []
  const notCovered: Array<NotCovered> = []
  const paths = Array.from(HashMap.keys(state.files)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
  for (const path of paths) {
    const outcome = pathAtLeaf(historyOf(state, path))
    if (outcome.kind === "refused") refusals.push({ path, reason: outcome.refusal.reason, detail: outcome.refusal.detail })
    else if (outcome.kind === "notCovered") notCovered.push({ path, reason: outcome.reason })
    else if (outcome.action.kind !== "delete") files.push({ path, action: outcome.action })
  }
  return { files, refusals, notCovered }
}
