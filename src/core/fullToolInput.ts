import { Effect } from "effect"
import type { CheckpointerService } from "./Checkpointer.js"
import type { CheckpointerError } from "./errors.js"
import type { JsonValue, ToolUseBlock } from "./events.js"

/**
 * A logged tool call's input as the model sent it: each stored argument read back from the
 * session's snapshot store (`SnapshotBlobError` when its blob is missing or damaged).
 */
export const fullToolInput = (
  checkpointer: CheckpointerService,
  sessionId: string,
  block: ToolUseBlock
): Effect.Effect<JsonValue, CheckpointerError> => {
  const stored = block.storedArguments ?? []
  if (stored.length === 0 || block.input === null || typeof block.input !== "object" || Array.isArray(block.input)) {
    return Effect.succeed(block.input)
  }
  const input = block.input
  return Effect.map(
    Effect.forEach(stored, (argument) =>
      Effect.map(checkpointer.readSnapshot(sessionId, argument.sha256), (data) => [argument.key, new TextDecoder().decode(data)] as const)),
    (entries) => ({ ...input, ...Object.fromEntries(entries) })
  )
}
