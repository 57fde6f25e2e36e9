/**
 * The edge between our log and `@effect/ai`: the conversation the fold projects becomes the
 * prompt a `LanguageModel` takes. Pure. The persisted format never depends on `@effect/ai`'s
 * message types; only this mapping does.
 *
 * Providers (Anthropic's in particular) require every tool call to be answered by a tool
 * result in the very next user turn, results before any text. A log may not hold that shape
 * exactly — a background completion can land between two steps, a crash can leave a call
 * unanswered — so the mapping groups each user turn, puts its tool results first, and answers
 * any call left without a result with a failure the model can read.
 */
import * as Prompt from "@effect/ai/Prompt"
import { contentText, inputWithStoredNotes, type SessionEvent, type ToolUseBlock } from "../core/events.js"
import * as Session from "../core/session.js"

/** Consecutive events that become one side's turn: the model's, or the user's (tool results included). */
interface Group {
  readonly role: "user" | "assistant"
  readonly events: Array<SessionEvent>
  /** The compaction summary opening the conversation (only ever on the first group). */
  readonly summary?: string
}

/** How runtime-originated text is shown to the model, so it is never mistaken for the user's words. */
const runtimeNote = (label: string, text: string) => `[lite-agent ${label}]\n${text}`

export const UNANSWERED_TOOL_CALL = "no result was recorded for this tool call (the run stopped before it finished)"

const unanswered = (call: ToolUseBlock): Prompt.ToolResultPartEncoded => ({
  type: "tool-result",
  id: call.id,
  name: call.name,
  isFailure: true,
  result: UNANSWERED_TOOL_CALL,
  providerExecuted: false
})

/** Providers reject empty and whitespace-only text blocks. */
const textsOf = (events: ReadonlyArray<SessionEvent>): Array<string> =>
  events.flatMap((event) =>
    event._tag === "AssistantMessage"
      ? event.content.flatMap((block) => (block.type === "text" && block.text.trim().length > 0 ? [block.text] : []))
      : []
  )

const callsOf = (events: ReadonlyArray<SessionEvent>): Array<ToolUseBlock> =>
  events.flatMap((event) =>
    event._tag === "AssistantMessage" ? event.content.flatMap((block) => (block.type === "tool_use" ? [block] : [])) : []
  )

const saysSomething = (event: SessionEvent): boolean =>
  event._tag === "AssistantMessage" &&
  event.content.some((block) => block.type === "tool_use" || block.text.trim().length > 0)

const assistantMessages = (group: Group): Array<Prompt.MessageEncoded> => [{
  role: "assistant",
  content: [
    ...textsOf(group.events).map((text) => ({ type: "text" as const, text })),
    ...callsOf(group.events).map((call) => ({
      type: "tool-call" as const,
      id: call.id,
      name: call.name,
      params: inputWithStoredNotes(call),
      providerExecuted: false
    }))
  ]
}]

/** A user turn: results for the calls the model just made (each answered), then its texts. */
const userMessages = (group: Group, asked: ReadonlyArray<ToolUseBlock>): Array<Prompt.MessageEncoded> => {
  const results: Array<Prompt.ToolResultPartEncoded> = []
  const texts: Array<string> = []
  if (group.summary !== undefined) texts.push(runtimeNote("summary of the earlier conversation", group.summary))
  else if (group.events.length === 0) texts.push(runtimeNote("note", "the conversation continues"))
  for (const event of group.events) {
    switch (event._tag) {
      case "UserMessage":
        texts.push(contentText(event.content))
        break
      case "RuntimeMessage":
        texts.push(runtimeNote(event.kind.replace("_", " "), contentText(event.content)))
        break
      case "BackgroundCompleted": {
        const ended = event.exitCode !== null
          ? `exit code ${event.exitCode}`
          : event.signal !== undefined
          ? `killed by ${event.signal}`
          : "no exit code"
        const truncated = event.outputTruncated ? " (output truncated)" : ""
        texts.push(
          runtimeNote(
            "background task completed",
            `Task ${event.taskId} (\`${event.command}\`) ended: ${ended}. Output${truncated}:\n${event.output}`
          )
        )
        break
      }
      case "ToolResult":
        results.push({
          type: "tool-result",
          id: event.toolUseId,
          name: event.toolName,
          isFailure: event.isError,
          result: contentText(event.content),
          providerExecuted: false
        })
        break
    }
  }
  const isAsked = (result: Prompt.ToolResultPartEncoded) => asked.some((call) => call.id === result.id)
  const answered = new Set(results.map((result) => result.id))
  const toolResults = [
    // Only results for calls the model just made; others would be rejected by the provider.
    ...results.filter(isAsked),
    ...asked.filter((call) => !answered.has(call.id)).map(unanswered)
  ]
  const allTexts = [
    ...results.filter((result) => !isAsked(result)).map((result) =>
      runtimeNote(`result of an earlier ${result.name} call`, String(result.result))
    ),
    ...texts
  ]
  const messages: Array<Prompt.MessageEncoded> = []
  if (toolResults.length > 0) messages.push({ role: "tool", content: toolResults })
  if (allTexts.length > 0) messages.push({ role: "user", content: allTexts.map((text) => ({ type: "text" as const, text })) })
  return messages
}

const roleOf = (event: SessionEvent): Group["role"] | undefined =>
  event._tag === "AssistantMessage"
    ? saysSomething(event) ? "assistant" : undefined
    : event._tag === "UserMessage" || event._tag === "RuntimeMessage" || event._tag === "BackgroundCompleted" ||
        event._tag === "ToolResult"
    ? "user"
    : undefined

const messagesOf = (group: Group, previous: Group | undefined): Array<Prompt.MessageEncoded> =>
  group.role === "assistant"
    ? assistantMessages(group)
    : userMessages(group, previous?.role === "assistant" ? callsOf(previous.events) : [])

/**
 * A conversation grouped into turns, with the messages of every turn but the last (which can
 * still grow) already made. Kept between calls and extended with the entries added since:
 * the prompt is rebuilt at every model call, and a long session's would otherwise cost
 * O(conversation) each time.
 */
interface Projection {
  readonly summary: string | undefined
  entries: ReadonlyArray<Session.ConversationEntry>
  readonly groups: Array<Group>
  readonly closedMessages: Array<Prompt.MessageEncoded>
  readonly closedBuilt: Array<Prompt.Message>
}

/** By the conversation's first entry; entries are immutable, and a projection is reused only for the exact same prefix. */
const projections = new WeakMap<Session.ConversationEntry, Projection>()

const continuedBy = (projection: Projection, summary: string | undefined, entries: ReadonlyArray<Session.ConversationEntry>) =>
  projection.summary === summary && projection.entries.length <= entries.length &&
  projection.entries.every((entry, index) => entry === entries[index])

const project = (state: Session.SessionState): Projection => {
  const { entries, summary } = Session.conversation(state)
  const first = entries[0]
  const cached = first === undefined ? undefined : projections.get(first)
  const projection: Projection = cached !== undefined && continuedBy(cached, summary, entries)
    ? cached
    : {
      summary,
      entries: [],
      groups: summary === undefined ? [] : [{ role: "user", events: [], summary }],
      closedMessages: [],
      closedBuilt: []
    }
  const { groups } = projection
  for (let index = projection.entries.length; index < entries.length; index++) {
    const event = entries[index]!.event
    const role = roleOf(event)
    if (role === undefined) continue
    const last = groups[groups.length - 1]
    if (last?.role === role) {
      last.events.push(event)
      continue
    }
    // A conversation must open with the user (a compaction can keep messages from an assistant turn on).
    if (last === undefined && role === "assistant") groups.push({ role: "user", events: [] })
    const closed = groups[groups.length - 1]
    if (closed !== undefined) projection.closedMessages.push(...messagesOf(closed, groups[groups.length - 2]))
    groups.push({ role, events: [event] })
  }
  projection.entries = entries
  if (first !== undefined) projections.set(first, projection)
  return projection
}

/** The messages after the closed turns: the open turn's, and answers for calls it left unanswered. */
const openMessages = (groups: ReadonlyArray<Group>): Array<Prompt.MessageEncoded> => {
  const last = groups[groups.length - 1]
  if (last === undefined) return []
  const messages = messagesOf(last, groups[groups.length - 2])
  // The last turn was the model's, with calls and no user turn after it: answer them too.
  if (last.role === "assistant") {
    const calls = callsOf(last.events)
    if (calls.length > 0) messages.push({ role: "tool", content: calls.map(unanswered) })
  }
  return messages
}

const systemMessages = (systemPrompt: string | undefined): Array<Prompt.MessageEncoded> =>
  systemPrompt !== undefined && systemPrompt.length > 0 ? [{ role: "system", content: systemPrompt }] : []

/** The `@effect/ai` prompt for a session's conversation, after an optional system prompt. */
export const promptFromSession = (
  state: Session.SessionState,
  systemPrompt: string | undefined
): Array<Prompt.MessageEncoded> => {
  const projection = project(state)
  return [...systemMessages(systemPrompt), ...projection.closedMessages, ...openMessages(projection.groups)]
}

const build = (message: Prompt.MessageEncoded): Prompt.Message => {
  switch (message.role) {
    case "system":
      return Prompt.systemMessage({ content: message.content })
    case "user":
      return Prompt.userMessage({
        content: typeof message.content === "string"
          ? [Prompt.textPart({ text: message.content })]
          : message.content.flatMap((part) => (part.type === "text" ? [Prompt.textPart({ text: part.text })] : []))
      })
    case "assistant":
      return Prompt.assistantMessage({
        content: typeof message.content === "string"
          ? [Prompt.textPart({ text: message.content })]
          : message.content.flatMap((part): Array<Prompt.AssistantMessagePart> =>
            part.type === "text"
              ? [Prompt.textPart({ text: part.text })]
              : part.type === "tool-call"
              ? [Prompt.toolCallPart({ id: part.id, name: part.name, params: part.params, providerExecuted: false })]
              : []
          )
      })
    case "tool":
      return Prompt.toolMessage({
        content: message.content.map((part) =>
          Prompt.toolResultPart({
            id: part.id,
            name: part.name,
            isFailure: part.isFailure,
            result: part.result,
            providerExecuted: false
          })
        )
      })
  }
}

/**
 * The same prompt as a built `Prompt`, made with the constructors: `LanguageModel` takes it as
 * it is, where encoded messages would be decoded again on every model call (a cost that grows
 * with the conversation). Closed turns are built once.
 */
export const promptOf = (state: Session.SessionState, systemPrompt: string | undefined): Prompt.Prompt => {
  const projection = project(state)
  const { closedBuilt, closedMessages } = projection
  for (let index = closedBuilt.length; index < closedMessages.length; index++) closedBuilt.push(build(closedMessages[index]!))
  return Prompt.fromMessages([
    ...systemMessages(systemPrompt).map(build),
    ...closedBuilt,
    ...openMessages(projection.groups).map(build)
  ])
}
