import { contentText, type UserMessage } from "./events.js"

/**
 * Text shapes that runtimes (ours in earlier versions, and others') inject in the user's
 * turn: XML-ish wrappers such as `<system-reminder>`, bracketed notices such as
 * `[Request interrupted by user]`, and CLI caveats.
 */
const RUNTIME_TEXT_SHAPES: ReadonlyArray<RegExp> = [
  /^<\/?[a-z][\w-]*(\s[^>]*)?>/i,
  /^\[(request interrupted|interrupted|repair|system|background|tool)\b/i,
  /^caveat:/i
]

/**
 * Is this user message a checkpoint (a real prompt from a person)?
 *
 * - With the explicit marker (`origin: "user"`): yes.
 * - Without it (records from before the marker existed), the message is inferred to be
 *   real input only when every sign agrees, because a false checkpoint invites a restore
 *   to a point that was never a prompt, while a missed one only hides an anchor:
 *   no tool call may be waiting for its result (a message then is almost certainly a
 *   tool result or runtime notice), the content must be text with something in it, and
 *   it must not start the way runtime-injected text does.
 */
export const isUserCheckpoint = (message: UserMessage, pendingToolCalls: number): boolean => {
  if (message.origin === "user") return true
  if (pendingToolCalls > 0) return false
  const text = contentText(message.content).trim()
  if (text.length === 0) return false
  return !RUNTIME_TEXT_SHAPES.some((shape) => shape.test(text))
}
