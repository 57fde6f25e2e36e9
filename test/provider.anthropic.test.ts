/**
 * The Anthropic provider against a fake Messages API on 127.0.0.1: what goes over the wire
 * (headers, model, max_tokens, system prompt, messages, tools, tool_use/tool_result ids),
 * how replies and API errors come back, and the configuration checks.
 */
import { AiError, LanguageModel, Tool, Toolkit } from "@effect/ai"
import { Chunk, Effect, Layer, Schema, Stream } from "effect"
import { afterEach, beforeEach, describe, expect, it } from "vitest"
import { ConfigurationError } from "../src/core/errors.js"
import {
  anthropic,
  anthropicLayer,
  type AnthropicOptions,
  DEFAULT_ANTHROPIC_MAX_TOKENS,
  DEFAULT_ANTHROPIC_MODEL
} from "../src/provider.js"
import { type FakeAnthropic, reply, startFakeAnthropic } from "./support/fakeAnthropic.js"

const API_KEY = "sk-ant-test-0123"

const ReadFile = Tool.make("read_file", {
  description: "Read a file of the workspace",
  parameters: { path: Schema.String },
  success: Schema.String,
  failure: Schema.Struct({ error: Schema.String })
})
const WriteFile = Tool.make("write_file", {
  description: "Write a file",
  parameters: { path: Schema.String, content: Schema.String },
  success: Schema.Struct({ ok: Schema.Boolean })
})
const FileToolkit = Toolkit.make(ReadFile, WriteFile)
// disableToolCallResolution means these are never called; the toolkit still needs them to resolve.
const FileToolkitHandlers = FileToolkit.toLayer({
  read_file: () => Effect.die("read_file must not run: tool call resolution is disabled"),
  write_file: () => Effect.die("write_file must not run: tool call resolution is disabled")
})

let server: FakeAnthropic
const savedEnv: Record<string, string | undefined> = {}
const ENV_NAMES = ["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"] as const

beforeEach(async () => {
  // The developer's own key or proxy must not leak into (or be sent by) these tests.
  for (const name of ENV_NAMES) {
    savedEnv[name] = process.env[name]
    delete process.env[name]
  }
  server = await startFakeAnthropic()
})

afterEach(async () => {
  for (const name of ENV_NAMES) {
    const value = savedEnv[name]
    if (value === undefined) delete process.env[name]
    else process.env[name] = value
  }
  await server.close()
})

const modelLayer = (options: AnthropicOptions = {}) =>
  anthropic({ apiKey: API_KEY, baseUrl: server.url, ...options }).layer("claude-test")

type Env = LanguageModel.LanguageModel | Tool.HandlersFor<Toolkit.Tools<typeof FileToolkit>>

const run = <A, E>(
  effect: Effect.Effect<A, E, Env>,
  layer: Layer.Layer<LanguageModel.LanguageModel, ConfigurationError> = modelLayer()
) => Effect.runPromise(effect.pipe(Effect.provide(Layer.merge(layer, FileToolkitHandlers))))

/** The failure of `effect` (the test fails if it succeeds). */
const failureOf = <A, E>(
  effect: Effect.Effect<A, E, Env>,
  layer: Layer.Layer<LanguageModel.LanguageModel, ConfigurationError> = modelLayer()
) => Effect.runPromise(Effect.flip(effect.pipe(Effect.provide(Layer.merge(layer, FileToolkitHandlers)))))

const bodyOf = (index: number): Record<string, unknown> => {
  const request = server.requests[index]
  if (request === undefined) throw new Error(`the fake server received no request #${index}`)
  return request.body as Record<string, unknown>
}

/** Building the layer alone, no model call: the configuration error it fails with. */
const configurationFailure = (layer: Layer.Layer<LanguageModel.LanguageModel, ConfigurationError>) =>
  Effect.runPromise(Effect.flip(Effect.scoped(Layer.build(layer))))

/** The ConfigurationError a provider's options cause: thrown by `anthropic(...)` at once, or failing its layer's build. */
const optionsFailure = async (makeLayer: () => Layer.Layer<LanguageModel.LanguageModel, ConfigurationError>) => {
  let layer: Layer.Layer<LanguageModel.LanguageModel, ConfigurationError>
  try {
    layer = makeLayer()
  } catch (thrown) {
    if (thrown instanceof ConfigurationError) return thrown
    throw thrown
  }
  return configurationFailure(layer)
}

describe("anthropic provider", () => {
  it("names itself and defaults to claude-sonnet-4-6", async () => {
    const provider = anthropic({ apiKey: API_KEY, baseUrl: server.url })
    expect(provider.name).toBe("anthropic")
    expect(provider.defaultModelName).toBe("claude-sonnet-4-6")
    expect(DEFAULT_ANTHROPIC_MODEL).toBe("claude-sonnet-4-6")
    server.enqueue(reply.text("ok"))
    await run(LanguageModel.generateText({ prompt: "hi" }), provider.layer())
    expect(bodyOf(0)["model"]).toBe("claude-sonnet-4-6")
  })

  it("sends a text prompt as the Messages API expects and reads the text reply", async () => {
    server.enqueue(reply.text("Hello, human.", { usage: { input_tokens: 21, output_tokens: 4 } }))
    const response = await run(LanguageModel.generateText({
      prompt: [
        { role: "system", content: "You are terse." },
        { role: "user", content: "Say hello" },
        { role: "assistant", content: "Hello?" },
        { role: "user", content: [{ type: "text", text: "Again, please." }] }
      ]
    }))

    expect(response.text).toBe("Hello, human.")
    expect(response.finishReason).toBe("stop")
    expect(response.usage.inputTokens).toBe(21)
    expect(response.usage.outputTokens).toBe(4)
    expect(response.usage.totalTokens).toBe(25)

    expect(server.requests).toHaveLength(1)
    const request = server.requests[0]!
    expect(request.method).toBe("POST")
    expect(request.path).toBe("/v1/messages")
    expect(request.headers["x-api-key"]).toBe(API_KEY)
    expect(request.headers["anthropic-version"]).toBe("2023-06-01")
    expect(request.headers["content-type"]).toMatch(/^application\/json/)
    expect(request.body).toEqual({
      model: "claude-test",
      max_tokens: DEFAULT_ANTHROPIC_MAX_TOKENS,
      system: [{ type: "text", text: "You are terse." }],
      messages: [
        { role: "user", content: [{ type: "text", text: "Say hello" }] },
        { role: "assistant", content: [{ type: "text", text: "Hello?" }] },
        { role: "user", content: [{ type: "text", text: "Again, please." }] }
      ]
    })
  })

  it("sends the configured max_tokens and anthropic-version, under a base URL with a path", async () => {
    server.enqueue(reply.text("ok"))
    const layer = anthropic({
      apiKey: API_KEY,
      baseUrl: `${server.url}/`,
      maxTokens: 321,
      anthropicVersion: "2099-01-01"
    }).layer("claude-other")
    await run(LanguageModel.generateText({ prompt: "hi" }), layer)
    expect(server.requests[0]?.path).toBe("/v1/messages")
    expect(server.requests[0]?.headers["anthropic-version"]).toBe("2099-01-01")
    expect(bodyOf(0)).toMatchObject({ model: "claude-other", max_tokens: 321 })

    // A proxy prefix is kept. The fake only routes /v1/messages, so this one is a 404.
    const proxied = anthropicLayer({ apiKey: API_KEY, baseUrl: `${server.url}/anthropic`, modelName: "claude-x" })
    const error = await failureOf(LanguageModel.generateText({ prompt: "hi" }), proxied)
    expect(error._tag === "HttpResponseError" ? error.response.status : error._tag).toBe(404)
    expect(server.requests[1]?.path).toBe("/anthropic/v1/messages")
  })

  it("round-trips tool use: parses tool_use blocks, then sends tool_use and tool_result with matching ids", async () => {
    server.enqueue(reply.message([
      { type: "text", text: "Let me look at both." },
      { type: "tool_use", id: "toolu_01A", name: "read_file", input: { path: "a.txt" } },
      { type: "tool_use", id: "toolu_01B", name: "read_file", input: { path: "missing.txt" } }
    ], { usage: { input_tokens: 120, output_tokens: 45 } }))

    const first = await run(LanguageModel.generateText({
      prompt: [{ role: "system", content: "You edit files." }, { role: "user", content: "Show me a.txt" }],
      toolkit: FileToolkit,
      disableToolCallResolution: true
    }))

    expect(first.text).toBe("Let me look at both.")
    expect(first.finishReason).toBe("tool-calls")
    expect(first.usage.inputTokens).toBe(120)
    expect(first.usage.outputTokens).toBe(45)
    expect(first.toolCalls.map(({ id, name, params }) => ({ id, name, params }))).toEqual([
      { id: "toolu_01A", name: "read_file", params: { path: "a.txt" } },
      { id: "toolu_01B", name: "read_file", params: { path: "missing.txt" } }
    ])
    // Resolution was disabled: no tool results were produced.
    expect(first.toolResults).toEqual([])

    const firstBody = bodyOf(0)
    expect(firstBody["tool_choice"]).toEqual({ type: "auto" })
    expect(firstBody["tools"]).toEqual([
      {
        name: "read_file",
        description: "Read a file of the workspace",
        input_schema: expect.objectContaining({
          type: "object",
          properties: { path: { type: "string" } },
          required: ["path"]
        })
      },
      {
        name: "write_file",
        description: "Write a file",
        input_schema: expect.objectContaining({
          type: "object",
          properties: { path: { type: "string" }, content: { type: "string" } },
          required: ["path", "content"]
        })
      }
    ])

    const [callA, callB] = first.toolCalls
    if (callA === undefined || callB === undefined) throw new Error("expected two tool calls")
    server.enqueue(reply.text("a.txt says alpha; missing.txt does not exist."))
    const second = await run(LanguageModel.generateText({
      prompt: [
        { role: "system", content: "You edit files." },
        { role: "user", content: "Show me a.txt" },
        {
          role: "assistant",
          content: [
            { type: "text", text: "Let me look at both." },
            { type: "tool-call", id: callA.id, name: callA.name, params: callA.params },
            { type: "tool-call", id: callB.id, name: callB.name, params: callB.params }
          ]
        },
        {
          role: "tool",
          content: [
            { type: "tool-result", id: callA.id, name: "read_file", isFailure: false, result: "alpha\n", providerExecuted: false },
            {
              type: "tool-result",
              id: callB.id,
              name: "read_file",
              isFailure: true,
              result: { error: "no such file" },
              providerExecuted: false
            }
          ]
        }
      ],
      toolkit: FileToolkit,
      disableToolCallResolution: true
    }))
    expect(second.text).toBe("a.txt says alpha; missing.txt does not exist.")
    expect(second.finishReason).toBe("stop")

    expect(bodyOf(1)["messages"]).toEqual([
      { role: "user", content: [{ type: "text", text: "Show me a.txt" }] },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Let me look at both." },
          { type: "tool_use", id: "toolu_01A", name: "read_file", input: { path: "a.txt" } },
          { type: "tool_use", id: "toolu_01B", name: "read_file", input: { path: "missing.txt" } }
        ]
      },
      {
        role: "user",
        content: [
          // @effect/ai-anthropic sends every tool result as JSON text, strings included.
          { type: "tool_result", tool_use_id: "toolu_01A", content: "\"alpha\\n\"", is_error: false },
          { type: "tool_result", tool_use_id: "toolu_01B", content: "{\"error\":\"no such file\"}", is_error: true }
        ]
      }
    ])
  })

  it("rejects a tool_use whose input does not match the tool's parameters", async () => {
    server.enqueue(reply.message([{ type: "tool_use", id: "toolu_bad", name: "read_file", input: { file: "a.txt" } }]))
    const error = await failureOf(LanguageModel.generateText({
      prompt: "read a.txt",
      toolkit: FileToolkit,
      disableToolCallResolution: true
    }))
    expect(AiError.isAiError(error)).toBe(true)
    expect(error._tag).toBe("MalformedOutput")
  })

  it("streams text and tool calls (server-sent events)", async () => {
    server.enqueue(reply.message([
      { type: "text", text: "Writing it now." },
      { type: "tool_use", id: "toolu_S1", name: "write_file", input: { path: "b.txt", content: "beta" } }
    ], { usage: { input_tokens: 30, output_tokens: 12 } }))
    const parts = await run(
      LanguageModel.streamText({ prompt: "write b.txt", toolkit: FileToolkit, disableToolCallResolution: true }).pipe(
        Stream.runCollect,
        Effect.map(Chunk.toReadonlyArray)
      )
    )
    expect(bodyOf(0)["stream"]).toBe(true)
    const text = parts.flatMap((part) => (part.type === "text-delta" ? [part.delta] : [])).join("")
    expect(text).toBe("Writing it now.")
    const calls = parts.flatMap((part) => (part.type === "tool-call" ? [part] : []))
    expect(calls.map(({ id, name, params }) => ({ id, name, params }))).toEqual([
      { id: "toolu_S1", name: "write_file", params: { path: "b.txt", content: "beta" } }
    ])
    const finish = parts.find((part) => part.type === "finish")
    expect(finish?.type === "finish" ? [finish.reason, finish.usage.inputTokens, finish.usage.outputTokens] : []).toEqual([
      "tool-calls",
      30,
      12
    ])
  })

  it.each([
    { status: 529, errorType: "overloaded_error", message: "Overloaded" },
    { status: 500, errorType: "api_error", message: "Internal server error" },
    { status: 429, errorType: "rate_limit_error", message: "Number of request tokens has exceeded your rate limit" },
    { status: 400, errorType: "invalid_request_error", message: "messages: roles must alternate" },
    { status: 401, errorType: "authentication_error", message: "invalid x-api-key" }
  ])("surfaces HTTP $status ($errorType) as a typed HttpResponseError", async ({ status, errorType, message }) => {
    server.enqueue(reply.error(status, errorType, message))
    const error = await failureOf(LanguageModel.generateText({ prompt: "hi" }), modelLayer({ maxRetries: 0 }))
    expect(AiError.isAiError(error)).toBe(true)
    if (error._tag !== "HttpResponseError") throw new Error(`expected an HttpResponseError, got ${error._tag}: ${error.message}`)
    expect(error.response.status).toBe(status)
    expect(error.reason).toBe("StatusCode")
    expect(error.request.method).toBe("POST")
    // The API's own explanation survives, for logs and for the user.
    expect(`${error.body ?? ""} ${error.description ?? ""}`).toContain(message)
    // Never the key: errors get logged and stored.
    expect(error.request.headers["x-api-key"]).toBe("<redacted>")
    expect(JSON.stringify(error)).not.toContain(API_KEY)
    expect(error.message).not.toContain(API_KEY)
  })

  it("retries transient answers (529, 429, 5xx) and then succeeds", async () => {
    server.enqueue(
      reply.error(529, "overloaded_error", "Overloaded"),
      reply.error(429, "rate_limit_error", "slow down"),
      reply.text("third time lucky")
    )
    const response = await run(LanguageModel.generateText({ prompt: "hi" }))
    expect(response.text).toBe("third time lucky")
    expect(server.requests.length).toBe(3)
  })

  it("gives up after maxRetries and reports the last answer; never retries a 400", async () => {
    server.enqueue(...Array.from({ length: 3 }, () => reply.error(529, "overloaded_error", "Overloaded")))
    const error = await failureOf(LanguageModel.generateText({ prompt: "hi" }), modelLayer({ maxRetries: 2 }))
    expect(error._tag === "HttpResponseError" && error.response.status).toBe(529)
    expect(server.requests.length).toBe(3)

    server.enqueue(reply.error(400, "invalid_request_error", "bad"), reply.text("not reached"))
    const invalid = await failureOf(LanguageModel.generateText({ prompt: "hi" }))
    expect(invalid._tag === "HttpResponseError" && invalid.response.status).toBe(400)
    expect(server.requests.length).toBe(4)
  })

  it("rejects a negative or fractional maxRetries with ConfigurationError", async () => {
    for (const maxRetries of [-1, 1.5]) {
      // At once from the provider; at build from the layer.
      expect(() => modelLayer({ maxRetries })).toThrow(ConfigurationError)
      const error = await configurationFailure(anthropicLayer({ apiKey: API_KEY, baseUrl: server.url, maxRetries }))
      expect(error.option).toBe("maxRetries")
      expect(error.detail).toBe(`expected a non-negative integer, got ${maxRetries}`)
    }
  })

  it("surfaces an unreachable server as a typed HttpRequestError, without the key", async () => {
    const url = server.url
    await server.close()
    const error = await failureOf(
      LanguageModel.generateText({ prompt: "hi" }),
      anthropic({ apiKey: API_KEY, baseUrl: url, maxRetries: 0 }).layer("claude-test")
    )
    if (error._tag !== "HttpRequestError") throw new Error(`expected an HttpRequestError, got ${error._tag}: ${error.message}`)
    expect(error.reason).toBe("Transport")
    expect(error.request.headers["x-api-key"]).toBe("<redacted>")
    expect(JSON.stringify(error)).not.toContain(API_KEY)
    expect(String(error.cause)).not.toContain(API_KEY)
    server = await startFakeAnthropic() // afterEach closes it again
  })

  it("streams API errors as typed errors too, without the key", async () => {
    server.enqueue(reply.error(529, "overloaded_error", "Overloaded"))
    const error = await failureOf(Stream.runDrain(LanguageModel.streamText({ prompt: "hi" })), modelLayer({ maxRetries: 0 }))
    if (error._tag !== "HttpResponseError") throw new Error(`expected an HttpResponseError, got ${error._tag}: ${error.message}`)
    expect(error.response.status).toBe(529)
    expect(JSON.stringify(error)).not.toContain(API_KEY)
  })

  it("fails with ConfigurationError saying what to set when there is no API key", async () => {
    const error = await configurationFailure(anthropic({ baseUrl: server.url }).layer())
    expect(error).toBeInstanceOf(ConfigurationError)
    expect(error.option).toBe("apiKey")
    expect(error.message).toContain("ANTHROPIC_API_KEY")
    expect(error.message).toContain("anthropic({ apiKey })")

    process.env["ANTHROPIC_API_KEY"] = ""
    const empty = await configurationFailure(anthropic({ baseUrl: server.url }).layer())
    expect(empty.option).toBe("apiKey")
    expect(empty.message).toContain("ANTHROPIC_API_KEY is set but empty")
    expect(server.requests).toHaveLength(0)

    // The model call itself fails the same way (the layer is built on first use).
    const viaCall = await failureOf(LanguageModel.generateText({ prompt: "hi" }), anthropic({ baseUrl: server.url }).layer())
    expect(viaCall).toBeInstanceOf(ConfigurationError)
    expect(server.requests).toHaveLength(0)
  })

  it("falls back to ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL, read when the layer is built", async () => {
    const layer = anthropic().layer("claude-env")
    process.env["ANTHROPIC_API_KEY"] = "sk-ant-from-env"
    process.env["ANTHROPIC_BASE_URL"] = server.url
    server.enqueue(reply.text("ok"))
    await run(LanguageModel.generateText({ prompt: "hi" }), layer)
    expect(server.requests[0]?.headers["x-api-key"]).toBe("sk-ant-from-env")
    expect(bodyOf(0)["model"]).toBe("claude-env")

    // Explicit options win over the environment.
    server.enqueue(reply.text("ok"))
    await run(LanguageModel.generateText({ prompt: "hi" }), modelLayer())
    expect(server.requests[1]?.headers["x-api-key"]).toBe(API_KEY)
  })

  it.each<{ readonly name: string; readonly options: AnthropicOptions; readonly option: string; readonly detail: RegExp }>([
    { name: "a base URL that is not a URL", options: { baseUrl: "not a url" }, option: "baseUrl", detail: /is not a URL/ },
    { name: "a non-http base URL", options: { baseUrl: "ftp://example.com" }, option: "baseUrl", detail: /http\(s\) URL/ },
    { name: "a base URL with a query", options: { baseUrl: "https://example.com/?x=1" }, option: "baseUrl", detail: /query/ },
    { name: "an empty API key", options: { apiKey: "" }, option: "apiKey", detail: /non-empty/ },
    { name: "an API key with a newline", options: { apiKey: "sk-ant-x\n" }, option: "apiKey", detail: /whitespace/ },
    { name: "zero max tokens", options: { maxTokens: 0 }, option: "maxTokens", detail: /positive integer, got 0/ },
    { name: "fractional max tokens", options: { maxTokens: 1.5 }, option: "maxTokens", detail: /positive integer, got 1.5/ },
    { name: "an empty anthropic version", options: { anthropicVersion: "" }, option: "anthropicVersion", detail: /non-empty/ }
  ])("rejects $name with ConfigurationError", async ({ options, option, detail }) => {
    const error = await optionsFailure(() => anthropic({ apiKey: API_KEY, baseUrl: server.url, ...options }).layer())
    expect(error).toBeInstanceOf(ConfigurationError)
    expect(error.option).toBe(option)
    expect(error.detail).toMatch(detail)
    expect(error.message).not.toContain("sk-ant")
    expect(server.requests).toHaveLength(0)
  })

  it("rejects a bad ANTHROPIC_BASE_URL, naming the variable", async () => {
    process.env["ANTHROPIC_BASE_URL"] = "localhost:8080"
    const error = await configurationFailure(anthropic({ apiKey: API_KEY }).layer())
    expect(error.option).toBe("baseUrl")
    expect(error.detail).toContain("ANTHROPIC_BASE_URL")
  })

  it("rejects an empty model name", async () => {
    const error = await configurationFailure(anthropicLayer({ apiKey: API_KEY, modelName: " " }))
    expect(error.option).toBe("modelName")
  })
})
