/**
 * The other edge between our log and `@effect/ai` (`prompt.ts` is the way in): a model's
 * streamed response is gathered into one reply, which becomes the `AssistantMessage` the log
 * records, and its failure a `ModelError`.
 */
import * as AiError from "@effect/ai/AiError"
import type * as Response from "@effect/ai/Response"
import { Effect, Option, Schema, Stream } from "effect"
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

/** A model's reply as the turn records it: its text blocks and tool calls in order, why it stopped, its usage. */
export interface ModelReply {
  readonly parts: ReadonlyArray<
    | { readonly type: "text"; readonly text: string }
    | { readonly type: "tool-call"; readonly id: string; readonly name: string; readonly params: unknown }
  >
  readonly finishReason: string
  readonly usage: { readonly inputTokens: number | undefined; readonly outputTokens: number | undefined }
}

/**
 * A streamed reply gathered into one (`onDelta` sees each piece of text as it arrives): text
 * blocks joined from their deltas, in the order they started; tool calls as the provider parsed
 * them; the finish part's reason and usage. A stream that reports an error, or ends without its
 * finish, fails: a half answer is never taken for a whole one.
 */
export const gatherReply = <E, R>(
  parts: Stream.Stream<Response.AnyPart, E, R>,
  onDelta: (delta: string) => Effect.Effect<void>
): Effect.Effect<ModelReply, E | AiError.AiError, R> =>
  Effect.suspend(() => {
    const gathered: Array<{ type: "text"; text: string } | { type: "tool-call"; id: string; name: string; params: unknown }> = []
    const open = new Map<string, { type: "text"; text: string }>()
    let finishReason = "unknown"
    let usage: ModelReply["usage"] = { inputTokens: undefined, outputTokens: undefined }
    let finished = false
    return Stream.runForEach(parts, (part) => {
      switch (part.type) {
        case "text-start": {
          const block = { type: "text" as const, text: "" }
          open.set(part.id, block)
          gathered.push(block)
          return Effect.void
        }
        case "text-delta": {
          let block = open.get(part.id)
          if (block === undefined) {
            block = { type: "text", text: "" }
            open.set(part.id, block)
            gathered.push(block)
          }
          block.text += part.delta
          return part.delta === "" ? Effect.void : onDelta(part.delta)
        }
        case "text-end":
          open.delete(part.id)
          return Effect.void
        case "tool-call":
          gathered.push({ type: "tool-call", id: part.id, name: part.name, params: part.params })
          return Effect.void
        case "finish":
          finished = true
          finishReason = part.reason
          usage = { inputTokens: part.usage.inputTokens, outputTokens: part.usage.outputTokens }
          return Effect.void
        case "error":
          // The provider reports a failure inside the stream (an overloaded API mid-answer): the call failed.
          return Effect.fail(streamFailure(`the model's stream reported an error: ${describePart(part.error)}`))
        default:
          return Effect.void
      }
    }).pipe(
      Effect.flatMap((): Effect.Effect<ModelReply, E | AiError.AiError> =>
        finished
          ? Effect.succeed({ parts: gathered, finishReason, usage })
          : Effect.fail(streamFailure("the model's stream ended before its finish: the answer may be cut short"))
      )
    )
  })

const streamFailure = (description: string) => new AiError.UnknownError({ module: "LiteAgent", method: "streamText", description })

const describePart = (error: unknown): string =>
  error instanceof Error ? error.message : typeof error === "string" ? error : JSON.stringify(error) ?? String(error)

export const modelStepOf = (reply: ModelReply, modelName: string | undefined): ModelStep => {
  const blocks: Array<AssistantBlock> = []
  for (const part of reply.parts) {
    // Providers reject empty and whitespace-only text blocks.
    if (part.type === "text" && part.text.trim().length > 0) blocks.push({ type: "text", text: part.text })
    if (part.type === "tool-call") blocks.push({ type: "tool_use", id: part.id, name: part.name, input: toJsonValue(part.params) })
  }
  const usage: TokenUsage = { inputTokens: tokens(reply.usage.inputTokens), outputTokens: tokens(reply.usage.outputTokens) }
  return {
    message: new AssistantMessage({
      content: blocks,
      stopReason: reply.finishReason,
      usage,
      ...(modelName === undefined ? {} : { model: modelName })
    }),
    usage,
    text: reply.parts.flatMap((part) => part.type === "text" ? [part.text] : []).join(""),
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
