/** The conversation: what the user, the runtime, the model and the tools said. */
import { Schema } from "effect"
import {
  assistantBlock,
  isFields,
  isNonEmptyString,
  isString,
  optional,
  tokenUsage,
  userContent
} from "../internal/eventChecks.js"
import { EventClass } from "../internal/eventKind.js"
import { AssistantBlock, TokenUsage, UserContent } from "./parts.js"

const userMessageFields = {
  content: UserContent,
  origin: Schema.optionalWith(Schema.Literal("user"), { exact: true })
}
/**
 * A message from the user. `origin: "user"` is the explicit marker that a person typed it;
 * every such message is a checkpoint. Records written before the marker existed have no
 * `origin` and go through {@link isUserCheckpoint}.
 */
export class UserMessage extends EventClass<UserMessage>()("UserMessage", userMessageFields, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const content = userContent(json["content"])
    const origin = json["origin"]
    if (content === undefined || (origin !== undefined && origin !== "user")) return undefined
    return origin === undefined ? { content } : { content, origin: "user" as const }
  }
}) {}

/** Words the runtime injects in the user's turn. Never a checkpoint. */
export const RuntimeMessageKind = Schema.Literal("reminder", "repair", "background_completion")
export type RuntimeMessageKind = typeof RuntimeMessageKind.Type

const isRuntimeKind = (value: unknown): value is RuntimeMessageKind =>
  value === "reminder" || value === "repair" || value === "background_completion"

export class RuntimeMessage extends EventClass<RuntimeMessage>()("RuntimeMessage", {
  kind: RuntimeMessageKind,
  content: UserContent
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const kind = json["kind"]
    const content = userContent(json["content"])
    return isRuntimeKind(kind) && content !== undefined ? { kind, content } : undefined
  }
}) {}

const assistantMessageFields = {
  content: Schema.Array(AssistantBlock),
  model: Schema.optionalWith(Schema.String, { exact: true }),
  stopReason: Schema.optionalWith(Schema.String, { exact: true }),
  usage: Schema.optionalWith(TokenUsage, { exact: true })
}
type AssistantMessageFields = Schema.Struct.Type<typeof assistantMessageFields>

export class AssistantMessage extends EventClass<AssistantMessage>()("AssistantMessage", assistantMessageFields, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { content, model, stopReason, usage } = json
    if (!Array.isArray(content) || !optional(model, isString) || !optional(stopReason, isString)) return undefined
    const blocks: Array<AssistantBlock> = []
    for (const item of content) {
      const block = assistantBlock(item)
      if (block === undefined) return undefined
      blocks.push(block)
    }
    const tokens = usage === undefined ? undefined : tokenUsage(usage)
    if (usage !== undefined && tokens === undefined) return undefined
    // Built in place, not with spreads of optional parts: the replay reads every assistant message through here.
    const fields: { -readonly [Key in keyof AssistantMessageFields]: AssistantMessageFields[Key] } = { content: blocks }
    if (model !== undefined) fields.model = model
    if (stopReason !== undefined) fields.stopReason = stopReason
    if (tokens !== undefined) fields.usage = tokens
    return fields
  },
  // Large string arguments of tool calls belong in the snapshot store. Every append of an
  // assistant message comes through here: the fields are copied only when a call changed.
  blobs: (fields, visit) => {
    let content: Array<AssistantBlock> | undefined
    for (let index = 0; index < fields.content.length; index++) {
      const block = fields.content[index]!
      if (block.type !== "tool_use") continue
      const visited = visit.toolCall(block)
      if (visited === block) continue
      content ??= [...fields.content]
      content[index] = visited
    }
    return content === undefined ? fields : { ...fields, content }
  }
}) {}

export class ToolResult extends EventClass<ToolResult>()("ToolResult", {
  toolUseId: Schema.NonEmptyString,
  toolName: Schema.String,
  content: UserContent,
  isError: Schema.Boolean
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { isError, toolName, toolUseId } = json
    const content = userContent(json["content"])
    if (!isNonEmptyString(toolUseId) || !isString(toolName) || content === undefined || typeof isError !== "boolean") return undefined
    return { toolUseId, toolName, content, isError }
  }
}) {}
