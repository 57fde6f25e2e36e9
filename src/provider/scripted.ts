/**
 * An offline model that replays a script: one turn per model call. It is built with
 * `LanguageModel.make`, like a real provider, so the agent, its tool loop and the response
 * decoding (tool parameters checked against the toolkit's schemas) run exactly as they do
 * against Anthropic — only the network is missing. Used by tests, examples and the demo.
 */
import { randomBytes } from "node:crypto"
import * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import type * as Response from "@effect/ai/Response"
import { DateTime, Effect, Either, Layer, Schema, Stream } from "effect"
import {
  AnyString,
  decodeArgument,
  decodeOptionsOrThrow,
  described,
  expecting,
  Flag,
  isPlainObject,
  NonNegativeInteger,
  PositiveInteger,
  quoteValue
} from "../core/internal/options.js"
import { estimateTokens, jsonLength, promptCharacters, TokenCounter } from "../agent/tokens.js"
import type { ModelProvider } from "./ModelProvider.js"

export interface ScriptedCall {
  /** 0-based: the n-th model call, answered by `turns[index]` when there is one. */
  readonly index: number
  /** The prompt exactly as the model received it (empty with `recordPrompts: false`). */
  readonly prompt: Prompt.Prompt
  /** The tools the call offered (none when the tool choice was `"none"`). */
  readonly toolNames: ReadonlyArray<string>
}

export interface ScriptedProvider extends ModelProvider {
  /**
   * Building the layer cannot fail; every layer built from one provider shares its script. It
   * also provides a `TokenCounter` that counts as the model reports usage (4 characters a token).
   */
  readonly layer: (modelName?: string) => Layer.Layer<LanguageModel.LanguageModel | TokenCounter>
  /** Every model call so far (prompt as received, tool names offered), oldest first. */
  readonly calls: () => ReadonlyArray<ScriptedCall>
  /** Turns not yet consumed. */
  readonly remaining: () => number
}

export const SCRIPTED_MODEL_NAME = "scripted"
export const SCRIPTED_CONTEXT_TOKENS = 200_000

// -----------------------------------------------------------------------------
// Checking the script up front: a typo should fail where the script is written,
// not as a confusing tool error several model calls later.
// -----------------------------------------------------------------------------

const describe = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "an array" : typeof value === "object" ? "an object" : typeof value

/** Where `value` stops being JSON (a path and a reason), or undefined when it is JSON. */
const jsonProblem = (value: unknown, path: string, seen: Set<unknown>): string | undefined => {
  if (value === null || typeof value === "string" || typeof value === "boolean") return undefined
  if (typeof value === "number") return Number.isFinite(value) ? undefined : `${path} is ${value}, which JSON cannot hold`
  if (typeof value !== "object") return `${path} is ${describe(value)}, which JSON cannot hold`
  if (seen.has(value)) return `${path} is a circular reference`
  seen.add(value)
  try {
    if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) {
        const problem = jsonProblem(value[i], `${path}[${i}]`, seen)
        if (problem !== undefined) return problem
      }
      return undefined
    }
    if (!isPlainObject(value)) return `${path} is a ${value.constructor?.name ?? "non-plain"} object, not plain JSON`
    for (const [key, item] of Object.entries(value)) {
      const problem = jsonProblem(item, `${path}.${key}`, seen)
      if (problem !== undefined) return problem
    }
    return undefined
  } finally {
    seen.delete(value)
  }
}

/** A tool call's input: a plain JSON object (what a real model sends). */
const ToolInput = Schema.Unknown.pipe(
  Schema.filter((input) => {
    if (!isPlainObject(input)) return `expected a JSON object, got ${quoteValue(input)}`
    const problem = jsonProblem(input, "input", new Set())
    return problem === undefined ? true : `${problem}; tool inputs must be plain JSON`
  })
)

export const ScriptedToolCall = described(
  Schema.Struct({
    name: expecting(Schema.String.pipe(Schema.minLength(1)), "a tool name"),
    /** The tool's parameters: a JSON object. */
    input: ToolInput
  }),
  "a tool call { name, input }"
)
export interface ScriptedToolCall extends Schema.Schema.Type<typeof ScriptedToolCall> {}

/** What the model answers to one call: some text, some tool calls, or both. */
export const ScriptedTurn = Schema.Struct({
  text: Schema.optional(AnyString),
  toolCalls: Schema.optional(described(Schema.Array(ScriptedToolCall), "an array of tool calls")),
  /** Answer only after this many milliseconds (a slow model, to test what happens meanwhile); the wait is interruptible. */
  delayMs: Schema.optional(NonNegativeInteger),
  /**
   * Streamed (`streamText`): wait this many milliseconds before each piece of text after the
   * first — a model that is slow to finish, to see what arrives meanwhile. The wait is interruptible.
   */
  chunkDelayMs: Schema.optional(NonNegativeInteger),
  /** The usage to report for this call, instead of the 4-characters-a-token estimate (a large context, say). */
  usage: Schema.optional(Schema.Struct({ inputTokens: NonNegativeInteger, outputTokens: NonNegativeInteger }))
})
export interface ScriptedTurn extends Schema.Schema.Type<typeof ScriptedTurn> {}

const ScriptedTurns = described(
  Schema.Array(described(ScriptedTurn, "a turn { text?, toolCalls? }")),
  "an array of turns { text?, toolCalls? }"
)

/** The turns, checked and deep-copied (later changes to the caller's objects do not leak in). */
const checkTurns = (turns: unknown): ReadonlyArray<ScriptedTurn> => {
  const checked = Either.getOrThrowWith(decodeArgument(ScriptedTurns, turns, { name: "turns", prefix: "turns" }), (error) => error)
  return JSON.parse(JSON.stringify(checked)) as ReadonlyArray<ScriptedTurn>
}

// -----------------------------------------------------------------------------
// Answering a call
// -----------------------------------------------------------------------------

interface Reply {
  readonly responseId: string
  readonly text: string | undefined
  readonly toolCalls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly params: unknown }>
  readonly reason: "tool-calls" | "stop"
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number; readonly totalTokens: number }
  readonly timestamp: string
  readonly chunkDelayMs: number
}

/** Text split into word-sized deltas, so stream consumers really have to join them. */
const deltas = (text: string): ReadonlyArray<string> => text.match(/\s*\S+\s*|\s+/g) ?? [text]

/**
 * A model that answers call n with `turns[n]`. The turn counter lives here, in the
 * provider, so every layer built from it (one per agent run, say) continues the same
 * script. Invalid turns throw a `ConfigurationError` right here.
 */
export const ScriptedOptions = Schema.Struct({
  /**
   * Keep every call's prompt for `calls()` (default true). A long scripted session (benchmarks)
   * turns it off: each prompt holds the whole conversation, so keeping them all grows quadratically.
   */
  recordPrompts: Schema.optional(Flag),
  /** The context window it claims, in tokens (default 200 000): what automatic compaction's default threshold is taken from. */
  contextTokens: Schema.optional(PositiveInteger)
})
export interface ScriptedOptions extends Schema.Schema.Type<typeof ScriptedOptions> {}

export const scripted = (turns: ReadonlyArray<ScriptedTurn>, input: ScriptedOptions = {}): ScriptedProvider => {
  const script = checkTurns(turns)
  const { contextTokens = SCRIPTED_CONTEXT_TOKENS, recordPrompts = true } = decodeOptionsOrThrow(ScriptedOptions, input, "scripted options")
  // Random per provider, so ids stay unique across processes: a session written by one
  // process can be resumed by another with a fresh scripted model. Letters, digits and
  // "_" only, which is what Anthropic accepts as a tool_use id.
  const idPrefix = `toolu_scripted_${randomBytes(6).toString("hex")}`
  const responsePrefix = `msg_scripted_${randomBytes(6).toString("hex")}`
  const calls: Array<ScriptedCall> = []
  let toolCallCount = 0

  const fail = (method: string, description: string) =>
    new AiError.UnknownError({ module: "ScriptedModel", method, description })

  /** Takes the next turn (a failing call still uses one up) and turns it into a reply. */
  const answer = (method: string, options: LanguageModel.ProviderOptions): Effect.Effect<Reply, AiError.AiError> =>
    Effect.gen(function*() {
      const index = calls.length
      const toolNames = options.toolChoice === "none" ? [] : options.tools.map((tool) => tool.name)
      calls.push({ index, prompt: recordPrompts ? options.prompt : Prompt.empty, toolNames })
      const turn = script[index]
      if (turn === undefined) {
        return yield* fail(
          method,
          `scripted model: all ${script.length} turns were used; model call ${index + 1} has no scripted turn`
        )
      }
      if (turn.delayMs !== undefined && turn.delayMs > 0) yield* Effect.sleep(turn.delayMs)
      const scriptedCalls = turn.toolCalls ?? []
      for (const call of scriptedCalls) {
        if (!toolNames.includes(call.name)) {
          const offered = toolNames.length === 0 ? "none" : toolNames.map((name) => `"${name}"`).join(", ")
          return yield* fail(
            method,
            `scripted model: turns[${index}] (model call ${index + 1}) calls tool "${call.name}", ` +
              `which the call does not offer; offered tools: ${offered}`
          )
        }
      }
      const text = turn.text === undefined || turn.text === "" ? undefined : turn.text
      const toolCalls = scriptedCalls.map((call) => ({
        id: `${idPrefix}_${++toolCallCount}`,
        name: call.name,
        params: call.input
      }))
      const inputTokens = turn.usage?.inputTokens ?? estimateTokens(promptCharacters(options.prompt))
      const outputTokens = turn.usage?.outputTokens ?? estimateTokens(
        (text?.length ?? 0) + toolCalls.reduce((sum, call) => sum + jsonLength(call.params), 0)
      )
      return {
        responseId: `${responsePrefix}_${index + 1}`,
        text,
        toolCalls,
        reason: toolCalls.length > 0 ? "tool-calls" as const : "stop" as const,
        usage: { inputTokens, outputTokens, totalTokens: inputTokens + outputTokens },
        timestamp: DateTime.formatIso(yield* DateTime.now),
        chunkDelayMs: turn.chunkDelayMs ?? 0
      }
    })

  const make = (modelName: string) =>
    LanguageModel.make({
      generateText: (options) =>
        Effect.map(answer("generateText", options), (reply): Array<Response.PartEncoded> => [
          { type: "response-metadata", id: reply.responseId, modelId: modelName, timestamp: reply.timestamp },
          ...(reply.text === undefined ? [] : [{ type: "text" as const, text: reply.text }]),
          ...reply.toolCalls.map((call) => ({ type: "tool-call" as const, ...call, providerExecuted: false })),
          { type: "finish", reason: reply.reason, usage: reply.usage }
        ]),
      // The same reply, in the shape Anthropic streams it: text deltas, then each tool
      // call's parameters as JSON before the parsed call.
      streamText: (options) =>
        Stream.unwrap(Effect.map(answer("streamText", options), (reply) => {
          const parts: Array<Response.StreamPartEncoded> = [
            { type: "response-metadata", id: reply.responseId, modelId: modelName, timestamp: reply.timestamp }
          ]
          if (reply.text !== undefined) {
            parts.push({ type: "text-start", id: "0" })
            for (const delta of deltas(reply.text)) parts.push({ type: "text-delta", id: "0", delta })
            parts.push({ type: "text-end", id: "0" })
          }
          for (const call of reply.toolCalls) {
            parts.push(
              { type: "tool-params-start", id: call.id, name: call.name, providerExecuted: false },
              { type: "tool-params-delta", id: call.id, delta: JSON.stringify(call.params) },
              { type: "tool-params-end", id: call.id },
              { type: "tool-call", ...call, providerExecuted: false }
            )
          }
          parts.push({ type: "finish", reason: reply.reason, usage: reply.usage })
          if (reply.chunkDelayMs === 0) return Stream.fromIterable(parts)
          let firstDelta = true
          return Stream.mapEffect(Stream.fromIterable(parts), (part): Effect.Effect<Response.StreamPartEncoded> => {
            if (part.type !== "text-delta") return Effect.succeed(part)
            if (firstDelta) {
              firstDelta = false
              return Effect.succeed(part)
            }
            return Effect.as(Effect.sleep(reply.chunkDelayMs), part)
          })
        }))
    })

  return {
    name: "scripted",
    defaultModelName: SCRIPTED_MODEL_NAME,
    contextTokens,
    // Its token counter counts as its usage does: for the scripted model, that is the measurement.
    layer: (modelName = SCRIPTED_MODEL_NAME) =>
      Layer.merge(
        Layer.effect(LanguageModel.LanguageModel, make(modelName)),
        Layer.succeed(TokenCounter, { count: (prompt) => Effect.succeed(estimateTokens(promptCharacters(prompt))) })
      ),
    calls: () => calls.slice(),
    remaining: () => Math.max(0, script.length - calls.length)
  }
}

/** `scripted(turns).layer()`, for when nothing needs to inspect the calls afterwards. */
export const scriptedLayer = (turns: ReadonlyArray<ScriptedTurn>): Layer.Layer<LanguageModel.LanguageModel | TokenCounter> =>
  scripted(turns).layer()
