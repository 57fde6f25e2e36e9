/**
 * The other edge between our log and `@effect/ai` (`prompt.ts` is the way in): a model's
 * response becomes the `AssistantMessage` the log records, and its failure a `ModelError`.
 * Pure.
 */
import type * as AiError from "@effect/ai/AiError"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Tool from "@effect/ai/Tool"
import { Option, Schema } from "effect"
import { type AssistantBlock, AssistantMessage, JsonValue, type TokenUsage, type ToolUseBlock } from "../core/events.js"
import { ModelError } from "./errors.js"

/** One model call as the turn records it. */
export interface ModelStep {
  readonly message: AssistantMessage
  /** The tokens of this call, as the provider reported them. */
  readonly usage: TokenUsage
  /** The text of the response (what the turn reports if this is its last step). */
  readonly text: string
  /** The tool calls to run, in order. */
  readonly toolCalls: ReadonlyArray<ToolUseBlock>
}

/** Tool-call arguments as the log stores them: JSON, or `{}` for anything that is not. */
const toJsonValue = (value: unknown): JsonValue =>
  Option.getOrElse(
    Schema.decodeUnknownOption(JsonValue)(value === undefined ? {} : JSON.parse(JSON.stringify(value)) as unknown),
    (): JsonValue => ({})
  )

const tokens = (count: number | undefined) => Math.max(0, Math.round(count ?? 0))

export const modelStepOf = <Tools extends Record<string, Tool.Any>>(
  response: LanguageModel.GenerateTextResponse<Tools>,
  modelName: string | undefined
): ModelStep => {
  const blocks: Array<AssistantBlock> = []
  for (const part of response.content) {
    // Providers reject empty and whitespace-only text blocks.
    if (part.type === "text" && part.text.trim().length > 0) blocks.push({ type: "text", text: part.text })
    if (part.type === "tool-call") blocks.push({ type: "tool_use", id: part.id, name: part.name, input: toJsonValue(part.params) })
  }
  const usage: TokenUsage = { inputTokens: tokens(response.usage.inputTokens), outputTokens: tokens(response.usage.outputTokens) }
  return {
    message: new AssistantMessage({
      content: blocks,
      stopReason: response.finishReason,
      usage,
      ...(modelName === undefined ? {} : { model: modelName })
    }),
    usage,
    text: response.text,
    toolCalls: blocks.filter((block) => block.type === "tool_use")
  }
}

export const modelError = (sessionId: string, error: AiError.AiError) =>
  new ModelError({
    sessionId,
    detail: error.message,
    cause: error,
    ...(error._tag === "HttpResponseError" ? { status: error.response.status } : {})
  })
