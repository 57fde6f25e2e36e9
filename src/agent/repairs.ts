/**
 * What a turn that ended abnormally (a crash, a failed model call) left open, closed so the
 * next turn can go on: every tool call without a result gets an error result, and a repair
 * note tells the model what happened. Repair messages are never checkpoints. Pure.
 */
import { RuntimeMessage, type SessionEvent, ToolResult } from "../core/events.js"
import * as Session from "../core/session.js"

/** What a tool call left unanswered by a crash gets as its result. */
export const INTERRUPTED_TOOL_RESULT =
  "interrupted: the run stopped before this tool call finished; its effects (if any) are unknown — check before relying on them"

export const repairs = (state: Session.SessionState): ReadonlyArray<SessionEvent> => {
  const dangling = Session.pendingToolCalls(state)
  if (dangling.length > 0) {
    return [
      ...dangling.map((call) =>
        new ToolResult({ toolUseId: call.toolUseId, toolName: call.name, content: INTERRUPTED_TOOL_RESULT, isError: true })
      ),
      new RuntimeMessage({
        kind: "repair",
        content: `The previous turn stopped before ${dangling.length} tool call(s) finished (${
          dangling.map((call) => call.name).join(", ")
        }); their effects are unknown.`
      })
    ]
  }
  const last = state.messages.at(state.messages.length - 1)?.event
  if (last?._tag === "UserMessage") {
    return [new RuntimeMessage({ kind: "repair", content: "The previous prompt got no answer: the run stopped before the model replied." })]
  }
  return []
}
