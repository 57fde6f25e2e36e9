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
import { contentText, type ToolUseBlock } from "../core/events.js"
import * as Session from "../core/session.js"

type UserSide = { readonly results: Array<Prompt.ToolResultPartEncoded>; readonly texts: Array<string> }
type Turn =
  | { readonly role: "assistant"; readonly texts: Array<string>; readonly calls: Array<ToolUseBlock> }
  | ({ readonly role: "user" } & UserSide)

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

/** The `@effect/ai` prompt for a session's conversation, after an optional system prompt. */
export const promptFromSession = (
  state: Session.SessionState,
  systemPrompt: string | undefined
): Array<Prompt.MessageEncoded> => {
  const { entries, summary } = Session.conversation(state)
  const turns: Array<Turn> = []
  const userTurn = (): UserSide => {
    const last = turns[turns.length - 1]
    if (last?.role === "user") return last
    const next = { role: "user" as const, results: [], texts: [] }
    turns.push(next)
    return next
  }
  if (summary !== undefined) userTurn().texts.push(runtimeNote("summary of the earlier conversation", summary))
  for (const { event } of entries) {
    switch (event._tag) {
      case "UserMessage":
        userTurn().texts.push(contentText(event.content))
        break
      case "RuntimeMessage":
        userTurn().texts.push(runtimeNote(event.kind.replace("_", " "), contentText(event.content)))
        break
      case "BackgroundCompleted": {
        const ended = event.exitCode !== null
          ? `exit code ${event.exitCode}`
          : event.signal !== undefined
          ? `killed by ${event.signal}`
          : "no exit code"
        const truncated = event.outputTruncated ? " (output truncated)" : ""
        userTurn().texts.push(
          runtimeNote(
            "background task completed",
            `Task ${event.taskId} (\`${event.command}\`) ended: ${ended}. Output${truncated}:\n${event.output}`
          )
        )
        break
      }
      case "ToolResult":
        userTurn().results.push({
          type: "tool-result",
          id: event.toolUseId,
          name: event.toolName,
          isFailure: event.isError,
          result: contentText(event.content),
          providerExecuted: false
        })
        break
      case "AssistantMessage": {
        // Providers reject empty and whitespace-only text blocks.
        const texts = event.content.flatMap((block) => (block.type === "text" && block.text.trim().length > 0 ? [block.text] : []))
        const calls = event.content.flatMap((block) => (block.type === "tool_use" ? [block] : []))
        if (texts.length === 0 && calls.length === 0) break
        const last = turns[turns.length - 1]
        if (last?.role === "assistant") {
          last.texts.push(...texts)
          last.calls.push(...calls)
        } else turns.push({ role: "assistant", texts, calls })
        break
      }
    }
  }

  // A conversation must open with the user (a compaction can keep messages from an assistant turn on).
  if (turns[0]?.role === "assistant") turns.unshift({ role: "user", results: [], texts: [runtimeNote("note", "the conversation continues")] })

  const messages: Array<Prompt.MessageEncoded> = []
  if (systemPrompt !== undefined && systemPrompt.length > 0) messages.push({ role: "system", content: systemPrompt })
  turns.forEach((turn, index) => {
    if (turn.role === "assistant") {
      messages.push({
        role: "assistant",
        content: [
          ...turn.texts.map((text) => ({ type: "text" as const, text })),
          ...turn.calls.map((call) => ({ type: "tool-call" as const, id: call.id, name: call.name, params: call.input, providerExecuted: false }))
        ]
      })
      return
    }
    const previous = turns[index - 1]
    const asked = previous?.role === "assistant" ? previous.calls : []
    const answered = new Set(turn.results.map((result) => result.id))
    const results = [
      // Only results for calls the model just made; others would be rejected by the provider.
      ...turn.results.filter((result) => asked.some((call) => call.id === result.id)),
      ...asked.filter((call) => !answered.has(call.id)).map(unanswered)
    ]
    const strays = turn.results.filter((result) => !asked.some((call) => call.id === result.id))
    const texts = [
      ...strays.map((result) => runtimeNote(`result of an earlier ${result.name} call`, String(result.result))),
      ...turn.texts
    ]
    if (results.length > 0) messages.push({ role: "tool", content: results })
    if (texts.length > 0) messages.push({ role: "user", content: texts.map((text) => ({ type: "text" as const, text })) })
  })
  // The last turn was the model's, with calls and no user turn after it: answer them too.
  const last = turns[turns.length - 1]
  if (last?.role === "assistant" && last.calls.length > 0) {
    messages.push({ role: "tool", content: last.calls.map(unanswered) })
  }
  return messages
}

/**
 * The same prompt as a built `Prompt`, made with the constructors: `LanguageModel` takes it as
 * it is, where encoded messages would be decoded again on every model call (a cost that grows
 * with the conversation).
 */
export const promptOf = (state: Session.SessionState, systemPrompt: string | undefined): Prompt.Prompt =>
  Prompt.fromMessages(promptFromSession(state, systemPrompt).map((message): Prompt.Message => {
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
  }))
