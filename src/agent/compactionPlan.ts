/**
 * What a compaction summarizes and what it keeps, decided from the fold alone. Pure.
 *
 * The conversation the model sees (after any earlier compaction: its summary and the kept
 * messages) is cut in two at a boundary: the messages before it are summarized, the ones from
 * it on are kept verbatim. A boundary never separates a tool call from its result. The kept
 * tail is the longest one within `keepRecentTokens` (estimated), or the shortest possible when
 * even that is larger. Nothing is removed from the log: the `Compaction` event only says which
 * messages the model sees from then on.
 */
import { contentText, type SessionEvent } from "../core/events.js"
import { inputWithStoredNotes } from "../core/events.js"
import * as Session from "../core/session.js"
import { estimateTokens } from "./tokens.js"

/** Fewer summarized messages than this (and no earlier summary) are not worth a model call. */
export const MIN_SUMMARIZED_MESSAGES = 2

/** Tool outputs longer than this are cut (head and tail kept) before the summarizer sees them. */
export const SUMMARIZER_TOOL_OUTPUT_CHARS = 2_000

/** Tool inputs longer than this are cut the same way. */
export const SUMMARIZER_TOOL_INPUT_CHARS = 1_000

/**
 * The summarizer's transcript at most (about 100 000 tokens): when the summarized part is
 * larger, its middle is left out — so compacting never fails because the context is already
 * full. What is left out stays in the log, and the user's requests are in the appendix anyway.
 */
export const SUMMARIZER_TRANSCRIPT_CHARS = 400_000

/** What the summary appendix quotes of each user request at most, and of all of them together. */
export const APPENDIX_REQUEST_CHARS = 1_000
export const APPENDIX_REQUESTS_CHARS = 12_000
/** Files listed in the summary appendix at most (the most recently changed). */
export const APPENDIX_FILES = 100

export interface CompactionPlan {
  /** The summary of the compaction before, if any: summarized again with the messages after it. */
  readonly previousSummary: string | undefined
  /** The messages the summary replaces, oldest first. */
  readonly summarized: ReadonlyArray<Session.ConversationEntry>
  /** The messages kept verbatim after the summary. */
  readonly kept: ReadonlyArray<Session.ConversationEntry>
  /** Seq of the first kept message; undefined when none is kept. */
  readonly keptFromSeq: number | undefined
}

/** Characters of an event as the model reads it (for the estimate that picks the boundary). */
export const eventCharacters = (event: SessionEvent): number => {
  switch (event._tag) {
    case "UserMessage":
    case "RuntimeMessage":
      return contentText(event.content).length
    case "ToolResult":
      return contentText(event.content).length
    case "BackgroundCompleted":
      return event.command.length + event.output.length + 64
    case "AssistantMessage":
      return event.content.reduce(
        (total, block) => total + (block.type === "text" ? block.text.length : JSON.stringify(inputWithStoredNotes(block)).length + block.name.length),
        0
      )
    default:
      return 0
  }
}

/**
 * Where the conversation may be cut: index `i` (0 < i <= length) such that no tool call before
 * `i` has its result at or after `i`. A call never answered does not pin anything.
 */
export const boundaries = (entries: ReadonlyArray<Session.ConversationEntry>): Array<number> => {
  const callAt = new Map<string, number>()
  entries.forEach(({ event }, index) => {
    if (event._tag === "AssistantMessage") {
      for (const block of event.content) if (block.type === "tool_use") callAt.set(block.id, index)
    }
  })
  // blocked[i] > 0: some call before i is answered at or after i.
  const delta = new Array<number>(entries.length + 2).fill(0)
  entries.forEach(({ event }, index) => {
    if (event._tag !== "ToolResult") return
    const call = callAt.get(event.toolUseId)
    if (call === undefined || call >= index) return
    delta[call + 1]! += 1
    delta[index + 1]! -= 1
  })
  const result: Array<number> = []
  let blocked = 0
  for (let i = 1; i <= entries.length; i++) {
    blocked += delta[i]!
    if (blocked === 0) result.push(i)
  }
  return result
}

/** The plan, or why there is nothing to reduce. */
export const planCompaction = (
  state: Session.SessionState,
  keepRecentTokens: number
): CompactionPlan | { readonly nothingToReduce: string } => {
  const { entries, summary } = Session.conversation(state)
  // Cut where the user speaks (or after everything), so a prompt stays with its answer.
  const cuts = boundaries(entries).filter((index) => index === entries.length || entries[index]!.event._tag === "UserMessage")
  if (cuts.length === 0) return { nothingToReduce: "the conversation has no messages to summarize" }
  // Estimated tokens from each index to the end.
  const tail = new Array<number>(entries.length + 1).fill(0)
  for (let i = entries.length - 1; i >= 0; i--) tail[i] = tail[i + 1]! + estimateTokens(eventCharacters(entries[i]!.event))
  const cut = cuts.find((index) => tail[index]! <= keepRecentTokens) ?? cuts[cuts.length - 1]!
  const summarized = entries.slice(0, cut)
  if (summary === undefined && summarized.length < MIN_SUMMARIZED_MESSAGES) {
    return { nothingToReduce: `only ${summarized.length} message(s) could be summarized` }
  }
  const kept = entries.slice(cut)
  return { previousSummary: summary, summarized, kept, keptFromSeq: kept[0]?.seq }
}

// ---------------------------------------------------------------------------
// What the summarizer reads
// ---------------------------------------------------------------------------

/** One message of the summarized part, as the summarizer reads it. */
export interface TranscriptItem {
  readonly role: "user" | "assistant" | "tool call" | "tool result" | "runtime" | "background task"
  readonly text: string
  /** For tool calls and results: which call. */
  readonly toolUseId?: string
  readonly toolName?: string
}

/** A message's transcript items (an assistant message gives its text and each of its calls). */
export const transcriptItems = (event: SessionEvent): Array<TranscriptItem> => {
  switch (event._tag) {
    case "UserMessage":
      return [{ role: "user", text: contentText(event.content) }]
    case "RuntimeMessage":
      return [{ role: "runtime", text: contentText(event.content) }]
    case "BackgroundCompleted":
      return [{
        role: "background task",
        text: `${event.taskId} (\`${event.command}\`) ended with ${event.exitCode ?? event.signal ?? "no exit code"}:\n${event.output}`
      }]
    case "ToolResult":
      return [{
        role: "tool result",
        text: `${event.isError ? "error: " : ""}${contentText(event.content)}`,
        toolUseId: event.toolUseId,
        toolName: event.toolName
      }]
    case "AssistantMessage":
      return event.content.flatMap((block): Array<TranscriptItem> =>
        block.type === "text"
          ? block.text.trim().length === 0 ? [] : [{ role: "assistant", text: block.text }]
          : [{ role: "tool call", text: JSON.stringify(inputWithStoredNotes(block)), toolUseId: block.id, toolName: block.name }]
      )
    default:
      return []
  }
}

/** `text` cut to `limit` characters: its start and end, with what was cut said in between. */
export const cutMiddle = (text: string, limit: number): string => {
  if (text.length <= limit) return text
  const head = Math.floor(limit * 0.75)
  const tailLength = limit - head
  return `${text.slice(0, head)}\n[… ${text.length - limit} characters cut for the summary …]\n${text.slice(text.length - tailLength)}`
}

export interface NormalizedTranscript {
  readonly items: ReadonlyArray<TranscriptItem>
  /** Tool outputs and inputs cut to their limits. */
  readonly cut: number
  /** Calls without a result, closed as the crash repair closes them. */
  readonly closedCalls: number
  /** Items left out of the middle to fit the transcript budget. */
  readonly omitted: number
}

export const UNANSWERED_CALL_NOTE = "no result was recorded (the run stopped before this call finished)"

/**
 * Oversized tool text cut, every call answered (right after it) when the log has no result for
 * it, and the whole kept within `budgetChars` (its start and its end; the middle said to be left out).
 */
export const normalizeTranscript = (
  items: ReadonlyArray<TranscriptItem>,
  budgetChars: number = SUMMARIZER_TRANSCRIPT_CHARS
): NormalizedTranscript => {
  const answered = new Set(items.flatMap((item) => (item.role === "tool result" && item.toolUseId !== undefined ? [item.toolUseId] : [])))
  let cut = 0
  let closedCalls = 0
  const normalized: Array<TranscriptItem> = []
  for (const item of items) {
    const limit = item.role === "tool result" ? SUMMARIZER_TOOL_OUTPUT_CHARS : item.role === "tool call" ? SUMMARIZER_TOOL_INPUT_CHARS : undefined
    const text = limit === undefined ? item.text : cutMiddle(item.text, limit)
    if (text !== item.text) cut++
    normalized.push(text === item.text ? item : { ...item, text })
    if (item.role === "tool call" && item.toolUseId !== undefined && !answered.has(item.toolUseId)) {
      closedCalls++
      normalized.push({ role: "tool result", text: `error: ${UNANSWERED_CALL_NOTE}`, toolUseId: item.toolUseId, ...(item.toolName === undefined ? {} : { toolName: item.toolName }) })
    }
  }
  const { items: fitted, omitted } = withinBudget(normalized, budgetChars)
  return { items: fitted, cut, closedCalls, omitted }
}

const itemChars = (item: TranscriptItem) => item.text.length + 40

/** The first items up to a fifth of the budget and the last ones in the rest, with a note between. */
const withinBudget = (
  items: ReadonlyArray<TranscriptItem>,
  budgetChars: number
): { readonly items: ReadonlyArray<TranscriptItem>; readonly omitted: number } => {
  const total = items.reduce((sum, item) => sum + itemChars(item), 0)
  if (total <= budgetChars) return { items, omitted: 0 }
  let head = 0
  for (let used = 0; head < items.length && used + itemChars(items[head]!) <= budgetChars / 5; head++) used += itemChars(items[head]!)
  let tail = items.length
  for (let used = 0; tail > head && used + itemChars(items[tail - 1]!) <= (budgetChars * 4) / 5; tail--) used += itemChars(items[tail - 1]!)
  const omitted = tail - head
  const note: TranscriptItem = {
    role: "runtime",
    text: `[${omitted} message(s) left out here for length; they remain in the session log, and the user's requests are listed after the summary]`
  }
  return { items: [...items.slice(0, head), note, ...items.slice(tail)], omitted }
}

const itemLine = (item: TranscriptItem): string =>
  item.role === "tool call"
    ? `[tool call ${item.toolName ?? "?"} ${item.toolUseId ?? ""}] ${item.text}`
    : item.role === "tool result"
    ? `[tool result ${item.toolName ?? "?"} ${item.toolUseId ?? ""}] ${item.text}`
    : `[${item.role}] ${item.text}`

export const SUMMARIZER_SYSTEM_PROMPT = [
  "You summarize the earlier part of a coding agent's conversation so the agent can continue the work without it.",
  "Write a concise, factual summary in plain text. Keep:",
  "- every request, constraint and preference the user stated (quote them when short);",
  "- the files that were read, created, changed or deleted, and what state each was left in;",
  "- decisions made and why, errors met and how they were resolved;",
  "- the work still open or in progress, and the next step.",
  "Do not invent anything that is not in the conversation. Do not address the user."
].join("\n")

/** The summarizer's request: the earlier summary, the transcript, and the user's instructions. */
export const summarizerRequest = (
  previousSummary: string | undefined,
  transcript: NormalizedTranscript,
  instructions: string | undefined
): string =>
  [
    previousSummary === undefined ? [] : ["The summary of the conversation before this part:", "<summary>", previousSummary, "</summary>", ""],
    ["The conversation to summarize:", "<conversation>", ...transcript.items.map(itemLine), "</conversation>"],
    instructions === undefined || instructions.trim().length === 0
      ? []
      : ["", "Instructions from the user for this summary:", instructions]
  ].flat().join("\n")

// ---------------------------------------------------------------------------
// What the summary always carries, whatever the model wrote
// ---------------------------------------------------------------------------

const fileLine = (path: string, entry: Session.FileHistoryEntry | undefined): string => {
  if (entry?.kind === "captured") {
    const state = entry.state
    switch (state._tag) {
      case "content":
      case "stored":
        return `- ${path}: changed, ${state.size} bytes, mode ${state.mode.toString(8)}, sha256 ${state.sha256.slice(0, 12)}`
      case "missing":
        return `- ${path}: deleted`
      case "link":
        return `- ${path}: now a link to ${state.target}`
      case "directory":
        return `- ${path}: a directory`
      case "unavailable":
        return `- ${path}: changed (not captured: ${state.reason})`
    }
  }
  if (entry === undefined || entry.kind !== "change") return `- ${path}: snapshotted, change not recorded`
  if (entry.after === undefined) return `- ${path}: ${entry.operation} (state after not recorded)`
  return entry.after._tag === "absent"
    ? `- ${path}: deleted`
    : `- ${path}: ${entry.operation === "chmod" ? "mode changed" : "written"}, ${entry.after.size} bytes, mode ${
      entry.after.mode.toString(8)
    }, sha256 ${entry.after.sha256.slice(0, 12)}`
}

/** Whether an entry records the agent's doing: a file tool's record, or a capture after a tool call or a background task. */
const byTheAgent = (entry: Session.FileHistoryEntry) =>
  entry.kind !== "captured" || entry.cause._tag === "tool" || entry.cause._tag === "task"

/**
 * The user's own requests before the kept messages (verbatim, long ones cut; the first — usually
 * the task — and the latest kept when there are too many) and every file the tools changed with
 * its last known state: appended to the model's summary, so neither depends on the model.
 */
export const summaryAppendix = (state: Session.SessionState, keptFromSeq: number | undefined): string => {
  const before = keptFromSeq ?? Number.POSITIVE_INFINITY
  const requests = [...state.anchors].filter((anchor) => anchor.seq < before).map((anchor) => ({
    seq: anchor.seq,
    text: cutMiddle(anchor.prompt, APPENDIX_REQUEST_CHARS)
  }))
  const chosen: Array<{ readonly seq: number; readonly text: string }> = []
  let used = 0
  // The first request, then the latest ones back in time, while they fit.
  const order = requests.length === 0 ? [] : [requests[0]!, ...requests.slice(1).reverse()]
  for (const request of order) {
    if (chosen.length > 0 && used + request.text.length > APPENDIX_REQUESTS_CHARS) break
    chosen.push(request)
    used += request.text.length
  }
  chosen.sort((a, b) => a.seq - b.seq)
  const omitted = requests.length - chosen.length
  // What the agent's tools and commands changed (not what a capture merely saw: the user's edits, the workdir's first capture).
  const files = [...state.files]
    .flatMap(([path, history]) => {
      const entries = history.toArray()
      const last = [...entries].reverse().find(byTheAgent)
      // A capture right after a file tool's change says the same thing less precisely: the tool's record is the line.
      const cause = last?.kind === "captured" ? last.cause : undefined
      const toolRecord = cause?._tag === "tool"
        ? entries.find((entry) => entry.kind === "change" && entry.toolUseId === cause.toolUseId)
        : undefined
      const line = toolRecord ?? last
      return line === undefined ? [] : [{ path, last: line }]
    })
    .sort((a, b) => b.last.seq - a.last.seq)
  const lines = [
    "## The user's requests so far (verbatim)",
    ...(requests.length === 0 ? ["(none)"] : []),
    ...chosen.map((request) => `- (seq ${request.seq}) ${request.text.replaceAll("\n", "\n  ")}`),
    ...(omitted > 0 ? [`- (${omitted} more, between these, are in the session log)`] : []),
    "",
    "## Files changed by the agent's tools (latest first)",
    ...(files.length === 0 ? ["(none)"] : []),
    ...files.slice(0, APPENDIX_FILES).map(({ last, path }) => fileLine(path, last)),
    ...(files.length > APPENDIX_FILES ? [`- (${files.length - APPENDIX_FILES} more in the session log)`] : [])
  ]
  return lines.join("\n")
}

/** The summary as stored: the model's text, then the appendix. */
export const summaryText = (modelSummary: string, appendix: string): string =>
  `${modelSummary.trim()}\n\n${appendix}`
