/**
 * The Anthropic provider: `@effect/ai-anthropic` over the platform's fetch client (Node 20
 * has fetch, so no Node-specific HTTP package is needed). Everything a user can get wrong
 * in the options or environment is checked when the layer is built and reported as a
 * `ConfigurationError` that says what to set — before any request is sent.
 */
import * as AnthropicClient from "@effect/ai-anthropic/AnthropicClient"
import * as AnthropicLanguageModel from "@effect/ai-anthropic/AnthropicLanguageModel"
import * as AiError from "@effect/ai/AiError"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Effect, Layer, Predicate, Redacted, Schedule, Schema, Stream } from "effect"
import { ConfigurationError } from "../core/errors.js"
import { AnyString, decodeOptions, decodeOptionsOrThrow, isPlainObject, NonNegativeInteger, PositiveInteger } from "../core/internal/options.js"
import { TokenCounter } from "../agent/tokens.js"
import type { ModelProvider } from "./ModelProvider.js"

export const AnthropicOptions = Schema.Struct({
  /** Defaults to the `ANTHROPIC_API_KEY` environment variable. */
  apiKey: Schema.optional(AnyString),
  /** Defaults to the `ANTHROPIC_BASE_URL` environment variable, else `https://api.anthropic.com`. */
  baseUrl: Schema.optional(AnyString),
  /** The `max_tokens` of every request. Default {@link DEFAULT_ANTHROPIC_MAX_TOKENS}. */
  maxTokens: Schema.optional(PositiveInteger),
  /** The `anthropic-version` header. Defaults to the client library's (`2023-06-01`). */
  anthropicVersion: Schema.optional(AnyString),
  /**
   * Retries of a request that failed transiently — 408, 429, 5xx including 529 "overloaded",
   * or no response at all — with jittered exponential back-off from 500 ms. Default
   * {@link DEFAULT_ANTHROPIC_MAX_RETRIES}; 0 turns retrying off.
   */
  maxRetries: Schema.optional(NonNegativeInteger)
})
export interface AnthropicOptions extends Schema.Schema.Type<typeof AnthropicOptions> {}

/** `anthropicLayer`'s options: the provider's and the model. */
export const AnthropicLayerOptions = Schema.Struct({ ...AnthropicOptions.fields, modelName: Schema.optional(AnyString) })
export interface AnthropicLayerOptions extends Schema.Schema.Type<typeof AnthropicLayerOptions> {}

/** The key is never quoted in an error: messages end up in logs. */
const decodeSettings = { name: "anthropic options", secrets: ["apiKey"] }

export const DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"

/** The context window of the Claude models this provider targets (standard tier). */
export const ANTHROPIC_CONTEXT_TOKENS = 200_000

/**
 * Room for a whole file write in one tool call, yet small enough for a non-streaming
 * request to finish well within Anthropic's limits for non-streaming calls.
 */
export const DEFAULT_ANTHROPIC_MAX_TOKENS = 8192

export const DEFAULT_ANTHROPIC_MAX_RETRIES = 2

const API_KEY_ENV = "ANTHROPIC_API_KEY"
const BASE_URL_ENV = "ANTHROPIC_BASE_URL"

interface Settings {
  readonly modelName: string
  readonly apiKey: Redacted.Redacted<string>
  readonly apiUrl: string | undefined
  readonly maxTokens: number
  readonly anthropicVersion: string | undefined
  readonly maxRetries: number
}

const invalid = (option: string, detail: string) => new ConfigurationError({ option, detail })

/** A non-empty env var's value; an empty one counts as unset (a common shell slip). */
const fromEnv = (name: string): string | undefined => {
  const value = process.env[name]
  return value === undefined || value === "" ? undefined : value
}

const resolveApiKey = (options: AnthropicOptions): Effect.Effect<Redacted.Redacted<string>, ConfigurationError> => {
  const source = options.apiKey !== undefined ? "apiKey" : `the ${API_KEY_ENV} environment variable`
  const key = options.apiKey ?? fromEnv(API_KEY_ENV)
  if (key === undefined) {
    const emptyEnv = process.env[API_KEY_ENV] === "" ? ` (${API_KEY_ENV} is set but empty)` : ""
    return Effect.fail(invalid(
      "apiKey",
      `no Anthropic API key: set the ${API_KEY_ENV} environment variable or pass anthropic({ apiKey })${emptyEnv}`
    ))
  }
  // Never echo the key itself: error messages end up in logs.
  if (typeof key !== "string" || key.length === 0) return Effect.fail(invalid("apiKey", `${source} must be a non-empty string`))
  if (key !== key.trim() || /[\u0000-\u001f\u007f]/.test(key)) {
    return Effect.fail(invalid("apiKey", `${source} has surrounding whitespace or control characters (a pasted newline?)`))
  }
  return Effect.succeed(Redacted.make(key))
}

const resolveBaseUrl = (options: AnthropicOptions): Effect.Effect<string | undefined, ConfigurationError> => {
  const fromOptions = options.baseUrl !== undefined
  const raw = options.baseUrl ?? fromEnv(BASE_URL_ENV)
  if (raw === undefined) return Effect.succeed(undefined)
  const source = fromOptions ? "baseUrl" : BASE_URL_ENV
  if (typeof raw !== "string") return Effect.fail(invalid("baseUrl", `${source} must be a string`))
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return Effect.fail(invalid("baseUrl", `${source} ${JSON.stringify(raw)} is not a URL; expected e.g. https://api.anthropic.com`))
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return Effect.fail(invalid("baseUrl", `${source} ${JSON.stringify(raw)} must be an http(s) URL`))
  }
  if (url.search !== "" || url.hash !== "") {
    return Effect.fail(invalid("baseUrl", `${source} ${JSON.stringify(raw)} must not have a query or fragment`))
  }
  // Request paths ("/v1/messages") are appended to it, so a trailing slash would double up.
  return Effect.succeed(url.href.replace(/\/+$/, ""))
}

const resolveSettings = (
  options: AnthropicOptions,
  modelName: string
): Effect.Effect<Settings, ConfigurationError> =>
  Effect.gen(function*() {
    if (typeof modelName !== "string" || modelName.trim() === "") {
      return yield* invalid("modelName", `must be a non-empty model name such as "${DEFAULT_ANTHROPIC_MODEL}"`)
    }
    const maxTokens = options.maxTokens ?? DEFAULT_ANTHROPIC_MAX_TOKENS
    if (!Number.isSafeInteger(maxTokens) || maxTokens <= 0) {
      return yield* invalid("maxTokens", `must be a positive integer, got ${String(maxTokens)}`)
    }
    const anthropicVersion = options.anthropicVersion
    if (anthropicVersion !== undefined && (typeof anthropicVersion !== "string" || !/^\S+$/.test(anthropicVersion))) {
      return yield* invalid("anthropicVersion", `must be a non-empty header value such as "2023-06-01", got ${JSON.stringify(anthropicVersion)}`)
    }
    const maxRetries = options.maxRetries ?? DEFAULT_ANTHROPIC_MAX_RETRIES
    if (!Number.isSafeInteger(maxRetries) || maxRetries < 0) {
      return yield* invalid("maxRetries", `must be a non-negative integer, got ${String(maxRetries)}`)
    }
    const apiKey = yield* resolveApiKey(options)
    const apiUrl = yield* resolveBaseUrl(options)
    return { modelName, apiKey, apiUrl, maxTokens, anthropicVersion, maxRetries }
  })

const API_KEY_HEADER = "x-api-key"

const redactHeaders = (headers: Readonly<Record<string, string>>): Record<string, string> =>
  Object.fromEntries(
    Object.entries(headers).map(([name, value]) => [name, name.toLowerCase() === API_KEY_HEADER ? "<redacted>" : value])
  )

/**
 * The error without the API key. `@effect/ai` copies the request headers, `x-api-key`
 * included, into `HttpRequestError`/`HttpResponseError` (and the platform error kept as
 * `cause`); Effect's own printing redacts it, but `JSON.stringify`, a session log or a
 * facade caller would not.
 */
const withoutApiKey = (error: AiError.AiError): AiError.AiError => {
  switch (error._tag) {
    case "HttpResponseError":
      return new AiError.HttpResponseError({
        module: error.module,
        method: error.method,
        request: { ...error.request, headers: redactHeaders(error.request.headers) },
        response: error.response,
        body: error.body,
        reason: error.reason,
        description: error.description
      }, { disableValidation: true })
    case "HttpRequestError": {
      // The platform's RequestError holds the whole request; keep only what it wraps.
      const cause = Predicate.hasProperty(error.cause, "request") && Predicate.hasProperty(error.cause, "cause")
        ? error.cause.cause
        : error.cause
      return new AiError.HttpRequestError({
        module: error.module,
        method: error.method,
        reason: error.reason,
        request: { ...error.request, headers: redactHeaders(error.request.headers) },
        description: error.description,
        cause
      }, { disableValidation: true })
    }
    default:
      return error
  }
}

/** The Anthropic client with the key scrubbed from the errors the language model sees. */
const scrubbedClient = Layer.effect(
  AnthropicClient.AnthropicClient,
  Effect.map(AnthropicClient.AnthropicClient, (client) =>
    AnthropicClient.AnthropicClient.of({
      ...client,
      createMessage: (options) => Effect.mapError(client.createMessage(options), withoutApiKey),
      createMessageStream: (options) => Stream.mapError(client.createMessageStream(options), withoutApiKey)
    }))
)

const isTransientStatus = (status: number) => status === 408 || status === 429 || status >= 500

/**
 * Repeat a transient answer (or a request that got none) a few times before the client turns
 * it into an error: Anthropic answers 529 when overloaded and 429 when rate-limited, and both
 * usually pass within seconds. `@effect/platform`'s `retryTransient` does not count 529.
 */
const withRetries = (maxRetries: number) => (client: HttpClient.HttpClient): HttpClient.HttpClient => {
  if (maxRetries === 0) return client
  const backoff = Schedule.exponential("500 millis").pipe(Schedule.jittered)
  // The repeat must end with the last answer, not with the schedule's delay.
  const lastAnswer = Schedule.intersect(Schedule.identity<HttpClientResponse.HttpClientResponse>(), backoff).pipe(
    Schedule.map(([answer]) => answer)
  )
  return HttpClient.transformResponse(client, (response) =>
    response.pipe(
      Effect.repeat({ schedule: lastAnswer, times: maxRetries, while: (answer) => isTransientStatus(answer.status) }),
      Effect.retry({
        schedule: backoff,
        times: maxRetries,
        while: (error) => error._tag === "RequestError" && error.reason === "Transport"
      })
    ))
}

// ---------------------------------------------------------------------------
// Counting tokens: Anthropic's count_tokens endpoint
// ---------------------------------------------------------------------------

type AnthropicBlock =
  | { readonly type: "text"; readonly text: string }
  | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: { readonly [key: string]: unknown } }
  | { readonly type: "tool_result"; readonly tool_use_id: string; readonly content: string; readonly is_error: boolean }

/** The prompt as the Messages API takes it: system text apart, tool results as the user's. */
export const anthropicMessages = (prompt: Prompt.Prompt): {
  readonly system: string | undefined
  readonly messages: ReadonlyArray<{ readonly role: "user" | "assistant"; readonly content: ReadonlyArray<AnthropicBlock> }>
} => {
  const system: Array<string> = []
  const messages: Array<{ role: "user" | "assistant"; content: Array<AnthropicBlock> }> = []
  const push = (role: "user" | "assistant", blocks: ReadonlyArray<AnthropicBlock>) => {
    if (blocks.length === 0) return
    const last = messages[messages.length - 1]
    // Consecutive turns of one role are one turn to the API.
    if (last?.role === role) last.content.push(...blocks)
    else messages.push({ role, content: [...blocks] })
  }
  for (const message of prompt.content) {
    switch (message.role) {
      case "system":
        system.push(message.content)
        break
      case "user":
        push("user", message.content.flatMap((part) => (part.type === "text" ? [{ type: "text" as const, text: part.text }] : [])))
        break
      case "assistant":
        push("assistant", message.content.flatMap((part): Array<AnthropicBlock> =>
          part.type === "text"
            ? [{ type: "text", text: part.text }]
            : part.type === "tool-call"
            ? [{ type: "tool_use", id: part.id, name: part.name, input: isPlainObject(part.params) ? part.params : { value: part.params } }]
            : []
        ))
        break
      case "tool":
        push("user", message.content.map((part) => ({
          type: "tool_result" as const,
          tool_use_id: part.id,
          content: typeof part.result === "string" ? part.result : JSON.stringify(part.result),
          is_error: part.isFailure
        })))
        break
    }
  }
  return { system: system.length === 0 ? undefined : system.join("\n\n"), messages }
}

/**
 * Token counts from `POST /v1/messages/count_tokens` for the conversation (system prompt and
 * messages; the tool definitions, a constant for a given toolkit, are not sent). A failed count
 * is an error the caller falls back from: it never carries the key (nor the request).
 */
const tokenCounter = (modelName: string): Layer.Layer<TokenCounter, never, AnthropicClient.AnthropicClient> =>
  Layer.effect(
    TokenCounter,
    Effect.map(AnthropicClient.AnthropicClient, (client) => ({
      count: (prompt) => {
        const { messages, system } = anthropicMessages(prompt)
        if (messages.length === 0) return Effect.succeed(0)
        return client.client.messagesCountTokensPost({
          payload: { model: modelName, messages, ...(system === undefined ? {} : { system }) }
        }).pipe(
          Effect.map((response) => response.input_tokens),
          Effect.mapError(() =>
            new AiError.UnknownError({ module: "AnthropicTokenCounter", method: "count", description: "count_tokens failed" })
          )
        )
      }
    }))
  )

const layerFromSettings = (settings: Settings): Layer.Layer<LanguageModel.LanguageModel | TokenCounter> =>
  Layer.merge(
    AnthropicLanguageModel.layer({ model: settings.modelName, config: { max_tokens: settings.maxTokens } }).pipe(
      Layer.provide(scrubbedClient)
    ),
    tokenCounter(settings.modelName)
  ).pipe(
    Layer.provide(AnthropicClient.layer({
      apiKey: settings.apiKey,
      apiUrl: settings.apiUrl,
      anthropicVersion: settings.anthropicVersion,
      transformClient: withRetries(settings.maxRetries)
    })),
    Layer.provide(FetchHttpClient.layer)
  )

/**
 * The Anthropic `LanguageModel` layer. The key and base URL fall back to the environment
 * when the layer is built (not when this is called), so a layer made at start-up sees the
 * environment the program actually runs with.
 */
export const anthropicLayer = (
  input: AnthropicLayerOptions
): Layer.Layer<LanguageModel.LanguageModel | TokenCounter, ConfigurationError> =>
  Layer.unwrapEffect(Effect.map(
    Effect.flatMap(
      decodeOptions(AnthropicLayerOptions, input, decodeSettings),
      (options) => resolveSettings(options, options.modelName ?? DEFAULT_ANTHROPIC_MODEL)
    ),
    layerFromSettings
  ))

/** Anthropic's Messages API as a `ModelProvider`; `layer(modelName)` picks the model. */
export const anthropic = (input: AnthropicOptions = {}): ModelProvider => {
  const options = decodeOptionsOrThrow(AnthropicOptions, input, decodeSettings)
  return {
    name: "anthropic",
    defaultModelName: DEFAULT_ANTHROPIC_MODEL,
    contextTokens: ANTHROPIC_CONTEXT_TOKENS,
    layer: (modelName) => anthropicLayer(modelName === undefined ? options : { ...options, modelName })
  }
}
