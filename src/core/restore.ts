/**
 * The restore planner: pure, from the folded state. It says, for every path changed after
 * a checkpoint, what the path goes back to, what the agent left there (to detect outside
 * edits), and every reason the restore must be refused. Checking the disk is the caller's
 * job (preflight); this module never does I/O.
 */
import { HashMap } from "effect"
import { type FileAfterState, inputWithStoredNotes, type JsonValue } from "./events.js"
import type { Refusal } from "./errors.js"
import { type FileHistoryEntry, pathRestore, type PathRestore, type SessionState } from "./session.js"

/** Tools whose effects restore undoes (through snapshots); anything else is reported, not undone. */
export const FILE_TOOLS: ReadonlySet<string> = new Set(["read_file", "write_file", "edit_file", "delete_file", "list_files", "chmod_file"])

export type FileAction = PathRestore

export interface FilePlan {
  readonly path: string
  /** What the path goes back to. */
  readonly action: FileAction
  /** What the agent left there (the last change record), or undefined when no hash was recorded. */
  readonly expected: FileAfterState | undefined
}

export interface CommandAfterCheckpoint {
  readonly seq: number
  readonly tool: string
  readonly input: JsonValue
}

export interface RestorePlan {
  readonly sessionId: string
  readonly seq: number
  /** The log is cut back to this seq: just before the checkpoint's prompt. */
  readonly truncateTo: number
  /** The head the plan was made from; the truncate expects it. */
  readonly head: number
  readonly files: ReadonlyArray<FilePlan>
  /** Reasons found without looking at the disk. */
  readonly refusals: ReadonlyArray<Refusal>
  /** Paths whose last change record has no hash: outside edits to them cannot be detected. */
  readonly unverifiedFiles: ReadonlyArray<string>
  /** Shell commands and other non-file tools called after the checkpoint: not undone. */
  readonly commandsNotUndone: ReadonlyArray<CommandAfterCheckpoint>
}


/**
 * Plan a restore of `state` to just before checkpoint `seq`. The fold holds every message
 * with its seq, so the plan needs nothing but the state (not the log).
 */
export const planRestore = (
  sessionId: string,
  state: SessionState,
  seq: number,
  options: { readonly files: boolean; readonly conversation: boolean }
): RestorePlan => {
  const refusals: Array<Refusal> = []
  const files: Array<FilePlan> = []
  const unverifiedFiles: Array<string> = []
  const commandsNotUndone: Array<CommandAfterCheckpoint> = []
  const base = { sessionId, seq, truncateTo: Math.max(0, seq - 1), head: state.head }

  const isCheckpoint = state.anchors.find((anchor) => anchor.seq === seq) !== undefined
  if (!isCheckpoint) {
    refusals.push({ reason: "not_a_checkpoint", detail: `seq ${seq} is not a checkpoint (user prompt) of this session` })
    return { ...base, files, refusals, unverifiedFiles, commandsNotUndone }
  }

  const messages = state.messages.toArray()
  // Tool calls made after the checkpoint that restore cannot undo.
  for (const { event, seq: at } of messages) {
    if (at <= seq || event._tag !== "AssistantMessage") continue
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

  if (!options.files) return { ...base, files, refusals, unverifiedFiles, commandsNotUndone }

  const histories = HashMap.toEntries(state.files).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
  for (const [path, history] of histories) {
    const after = history.toArray().filter((entry) => entry.seq > seq)
    if (after.length === 0) continue
    const action = pathRestore(after)
    if (!("kind" in action)) {
      refusals.push({ path, reason: action.reason, detail: action.detail })
      continue
    }
    const lastChange = [...after].reverse().find(
      (entry): entry is Extract<FileHistoryEntry, { kind: "change" }> => entry.kind === "change"
    )
    const expected = lastChange?.after
    if (expected === undefined) unverifiedFiles.push(path)
    files.push({ path, action, expected })
  }
  return { ...base, files, refusals, unverifiedFiles, commandsNotUndone }
}
