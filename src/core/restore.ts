/**
 * The restore planner: pure, from the folded state. It says, for every path changed after
 * a checkpoint, what the path goes back to, what the agent left there (to detect outside
 * edits), and every reason the restore must be refused. Checking the disk is the caller's
 * job (preflight); this module never does I/O.
 */
import { HashMap, Option } from "effect"
import { inputWithStoredNotes, type JsonValue } from "./events.js"
import type { Refusal } from "./errors.js"
import { type NotCovered, pathAtCheckpoint, pathsChangedAfter, type PathRestore, type RecordedState, type SessionState } from "./session.js"

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

export interface RestorePlan {
  readonly sessionId: string
  readonly seq: number
  /** The leaf the conversation goes back to: the node just before the checkpoint's prompt. */
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

  const anchors = state.anchors.toArray()
  const isCheckpoint = anchors.find((anchor) => anchor.seq === seq) !== undefined
  if (!isCheckpoint) {
    refusals.push({ reason: "not_a_checkpoint", detail: `seq ${seq} is not a checkpoint (user prompt) of this session` })
    return done()
  }

  const messages = state.messages.toArray()
  // Tool calls made after the checkpoint, in turns the workspace capture did not cover, that restore cannot undo.
  const capturedTurnAt = (at: number) => {
    let turn: (typeof anchors)[number] | undefined
    for (const anchor of anchors) if (anchor.seq <= at) turn = anchor
    return turn?.workspaceCaptured === true
  }
  for (const { event, seq: at } of messages) {
    if (at <= seq || event._tag !== "AssistantMessage" || capturedTurnAt(at)) continue
    for (const block of event.content) {
      if (block.type === "tool_use" && !FILE_TOOLS.has(block.name)) {
        commandsNotUndone.push({ seq: at, tool: block.name, input: inputWithStoredNotes(block) })
      }
    }
  }

  if (options.conversation) {
    // A tool call made before the cut whose result lands after it would be cut in half.
    const openBeforeCut = new Map<string, { readonly name: string; readonly seq: number }>()
    for (const { event, seq: at } of messages) {
      if (at >= seq) break
      if (event._tag === "AssistantMessage") {
        for (const block of event.content) if (block.type === "tool_use") openBeforeCut.set(block.id, { name: block.name, seq: at })
      } else if (event._tag === "ToolResult") {
        openBeforeCut.delete(event.toolUseId)
      }
    }
    const resultsAfter = new Set(messages.flatMap(({ event, seq: at }) =>
      at >= seq && event._tag === "ToolResult" ? [event.toolUseId] : []
    ))
    for (const [toolUseId, call] of openBeforeCut) {
      if (resultsAfter.has(toolUseId)) {
        refusals.push({
          reason: "tool_call_cut",
          detail: `tool call ${toolUseId} (${call.name}) at seq ${call.seq} has its result after the checkpoint`
        })
      }
    }
  }

  if (!options.files) return done()

  // Only the paths changed after the checkpoint (a whole-workspace capture knows every path of the workdir).
  for (const path of pathsChangedAfter(state, seq)) {
    const history = Option.getOrThrow(HashMap.get(state.files, path))
    const outcome = pathAtCheckpoint(history.toArray(), seq, state.coveredFrom)
    if (outcome === undefined) continue
    if (outcome.kind === "refused") {
      refusals.push({ path, reason: outcome.refusal.reason, detail: outcome.refusal.detail })
      continue
    }
    if (outcome.kind === "notCovered") {
      notCovered.push({ path, reason: outcome.reason })
      continue
    }
    if (outcome.userEdits.length > 0 && options.includeUserEdits !== true) {
      refusals.push({
        path,
        reason: "modified_externally",
        detail: `changed outside the session between turns (seen by the capture at seq ${outcome.userEdits.join(", ")}, before a prompt); ` +
          "pass includeUserEdits to undo that too"
      })
      continue
    }
    if (outcome.expected === undefined) unverifiedFiles.push(path)
    files.push({ path, action: outcome.action, expected: outcome.expected })
  }
  return done()
}
