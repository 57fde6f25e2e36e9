/**
 * The scripted offline model: one turn per model call, through the real `LanguageModel`
 * path (tool parameters decoded by the toolkit), with clear errors for a script that does
 * not fit the calls made.
 */
import { AiError, LanguageModel, Prompt, Tool, Toolkit } from "@effect/ai"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Layer, Option, Schema, Stream } from "effect"
import { ConfigurationError } from "../src/core/errors.js"
import { promptCharacters, scripted, scriptedLayer, type ScriptedTurn } from "../src/provider.js"

const ReadFile = Tool.make("read_file", {
  description: "Read a file",
  parameters: { path: Schema.String },
  success: Schema.String
})
const WriteFile = Tool.make("write_file", {
  description: "Write a file",
  parameters: { path: Schema.String, content: Schema.String },
  success: Schema.Struct({ written: Schema.Number })
})
const FileToolkit = Toolkit.make(ReadFile, WriteFile)
const FileToolkitHandlers = FileToolkit.toLayer({
  read_file: ({ path }) => Effect.succeed(`contents of ${path}`),
  write_file: ({ content }) => Effect.succeed({ written: content.length })
})

/** The failure of `effect`; dies (failing the test) if it succeeds. */
const failureOf = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.flip(effect)

const TOOL_USE_ID = /^toolu_scripted_[0-9a-f]{12}_\d+$/
/** What Anthropic accepts as a tool_use id, so a scripted session can be resumed with a real model. */
const ANTHROPIC_ID = /^[a-zA-Z0-9_-]+$/

describe("scripted model", () => {
  it.effect("answers each model call with the next turn, in order", () => {
    const model = scripted([{ text: "one" }, { text: "two" }, { text: "three" }])
    expect(model.name).toBe("scripted")
    expect(model.defaultModelName).toBe("scripted")
    expect(model.remaining()).toBe(3)
    return Effect.gen(function*() {
      const first = yield* LanguageModel.generateText({ prompt: "first" })
      expect(first.text).toBe("one")
      expect(model.remaining()).toBe(2)
      const second = yield* LanguageModel.generateText({ prompt: "second" })
      const third = yield* LanguageModel.generateText({ prompt: "third" })
      expect([second.text, third.text]).toEqual(["two", "three"])
      expect(model.remaining()).toBe(0)
      expect(first.finishReason).toBe("stop")
      expect(first.toolCalls).toEqual([])
    }).pipe(Effect.provide(model.layer()))
  })

  it.effect("recordPrompts: false answers the same but keeps no prompts; a bad option is refused", () => {
    const model = scripted([{ text: "one" }, { text: "two" }], { recordPrompts: false })
    expect(() => scripted([], { recordPrompt: false } as never)).toThrow(ConfigurationError)
    return Effect.gen(function*() {
      expect((yield* LanguageModel.generateText({ prompt: "first" })).text).toBe("one")
      expect((yield* LanguageModel.generateText({ prompt: "second" })).text).toBe("two")
      expect(model.calls().map((call) => [call.index, call.prompt.content.length])).toEqual([[0, 0], [1, 0]])
      expect(model.remaining()).toBe(0)
    }).pipe(Effect.provide(model.layer()))
  })

  it.effect("returns text and tool calls with fresh unique ids, params and a tool-calls finish", () => {
    const model = scripted([
      {
        text: "Reading both.",
        toolCalls: [
          { name: "read_file", input: { path: "a.txt" } },
          { name: "write_file", input: { path: "b.txt", content: "beta" } }
        ]
      },
      { toolCalls: [{ name: "read_file", input: { path: "a.txt" } }] }
    ])
    return Effect.gen(function*() {
      const first = yield* LanguageModel.generateText({
        prompt: "go",
        toolkit: FileToolkit,
        disableToolCallResolution: true
      })
      expect(first.text).toBe("Reading both.")
      expect(first.finishReason).toBe("tool-calls")
      expect(first.toolCalls.map(({ name, params }) => ({ name, params }))).toEqual([
        { name: "read_file", params: { path: "a.txt" } },
        { name: "write_file", params: { path: "b.txt", content: "beta" } }
      ])
      const second = yield* LanguageModel.generateText({
        prompt: "again",
        toolkit: FileToolkit,
        disableToolCallResolution: true
      })
      expect(second.text).toBe("")
      expect(second.finishReason).toBe("tool-calls")
      const ids = [...first.toolCalls, ...second.toolCalls].map((call) => call.id)
      expect(ids).toHaveLength(3)
      expect(new Set(ids).size).toBe(3)
      for (const id of ids) {
        expect(id).toMatch(TOOL_USE_ID)
        expect(id).toMatch(ANTHROPIC_ID)
      }
      // Another provider (another process resuming the session, say) never repeats them.
      const other = yield* LanguageModel.generateText({
        prompt: "go",
        toolkit: FileToolkit,
        disableToolCallResolution: true
      }).pipe(Effect.provide(scripted([{ toolCalls: [{ name: "read_file", input: { path: "a.txt" } }] }]).layer()))
      expect(ids).not.toContain(other.toolCalls[0]?.id)
    }).pipe(Effect.provide(Layer.merge(model.layer(), FileToolkitHandlers)))
  })

  it.effect("goes through the real tool loop: tool calls are resolved by the toolkit when resolution is on", () =>
    Effect.gen(function*() {
      const response = yield* LanguageModel.generateText({ prompt: "go", toolkit: FileToolkit })
      expect(response.toolResults.map(({ id, name, result, isFailure }) => ({ id, name, result, isFailure }))).toEqual([
        { id: response.toolCalls[0]?.id, name: "read_file", result: "contents of a.txt", isFailure: false }
      ])
    }).pipe(Effect.provide(Layer.merge(
      scriptedLayer([{ toolCalls: [{ name: "read_file", input: { path: "a.txt" } }] }]),
      FileToolkitHandlers
    ))))

  it.effect("reports usage estimated at 4 characters per token", () => {
    const model = scripted([
      { text: "hello", toolCalls: [{ name: "read_file", input: { path: "a.txt" } }] },
      { text: "done" }
    ])
    return Effect.gen(function*() {
      // Prompt: "abcd" + "12345678" = 12 characters -> 3 tokens.
      // Output: "hello" (5) + {"path":"a.txt"} (16) = 21 characters -> 6 tokens.
      const first = yield* LanguageModel.generateText({
        prompt: [{ role: "system", content: "abcd" }, { role: "user", content: "12345678" }],
        toolkit: FileToolkit,
        disableToolCallResolution: true
      })
      expect([first.usage.inputTokens, first.usage.outputTokens, first.usage.totalTokens]).toEqual([3, 6, 9])

      // Prompt: 12 + "hello" (5) + {"path":"a.txt"} (16) + "alpha" as JSON (7) = 40 -> 10 tokens.
      // Output: "done" (4) -> 1 token.
      const secondPrompt = Prompt.make([
        { role: "system", content: "abcd" },
        { role: "user", content: "12345678" },
        {
          role: "assistant",
          content: [
            { type: "text", text: "hello" },
            { type: "tool-call", id: first.toolCalls[0]?.id ?? "", name: "read_file", params: { path: "a.txt" } }
          ]
        },
        {
          role: "tool",
          content: [{
            type: "tool-result",
            id: first.toolCalls[0]?.id ?? "",
            name: "read_file",
            isFailure: false,
            result: "alpha",
            providerExecuted: false
          }]
        }
      ])
      expect(promptCharacters(secondPrompt)).toBe(40)
      const second = yield* LanguageModel.generateText({
        prompt: secondPrompt,
        toolkit: FileToolkit,
        disableToolCallResolution: true
      })
      expect([second.usage.inputTokens, second.usage.outputTokens, second.usage.totalTokens]).toEqual([10, 1, 11])
      expect(second.finishReason).toBe("stop")
    }).pipe(Effect.provide(Layer.merge(model.layer(), FileToolkitHandlers)))
  })

  it.effect("fails with a clear AiError once the turns run out", () => {
    const model = scripted([{ text: "only" }])
    return Effect.gen(function*() {
      yield* LanguageModel.generateText({ prompt: "1" })
      const error = yield* failureOf(LanguageModel.generateText({ prompt: "2" }))
      expect(AiError.isAiError(error)).toBe(true)
      expect(error._tag).toBe("UnknownError")
      expect(error.message).toContain("scripted model: all 1 turns were used; model call 2 has no scripted turn")
      const again = yield* failureOf(LanguageModel.generateText({ prompt: "3" }))
      expect(again.message).toContain("scripted model: all 1 turns were used; model call 3 has no scripted turn")
      expect(model.remaining()).toBe(0)
      expect(model.calls()).toHaveLength(3)
    }).pipe(Effect.provide(model.layer()))
  })

  it.effect("fails naming the tool and the offered tools when a turn calls a tool the call does not offer", () => {
    const model = scripted([
      { toolCalls: [{ name: "delete_everything", input: {} }] },
      { toolCalls: [{ name: "read_file", input: { path: "a.txt" } }] },
      { toolCalls: [{ name: "read_file", input: { path: "a.txt" } }] }
    ])
    return Effect.gen(function*() {
      const unknown = yield* failureOf(LanguageModel.generateText({
        prompt: "go",
        toolkit: FileToolkit,
        disableToolCallResolution: true
      }))
      expect(AiError.isAiError(unknown)).toBe(true)
      expect(unknown.message).toContain(`calls tool "delete_everything"`)
      expect(unknown.message).toContain(`offered tools: "read_file", "write_file"`)

      const noToolkit = yield* failureOf(LanguageModel.generateText({ prompt: "go" }))
      expect(noToolkit.message).toContain(`calls tool "read_file"`)
      expect(noToolkit.message).toContain("offered tools: none")

      const choiceNone = yield* failureOf(LanguageModel.generateText({
        prompt: "go",
        toolkit: FileToolkit,
        toolChoice: "none",
        disableToolCallResolution: true
      }))
      expect(choiceNone.message).toContain("offered tools: none")
      // Each of those calls used up its turn.
      expect(model.remaining()).toBe(0)
    }).pipe(Effect.provide(Layer.merge(model.layer(), FileToolkitHandlers)))
  })

  it.effect("checks tool inputs against the toolkit's schemas, like a real provider", () =>
    Effect.gen(function*() {
      const error = yield* failureOf(LanguageModel.generateText({
        prompt: "go",
        toolkit: FileToolkit,
        disableToolCallResolution: true
      }))
      expect(error._tag).toBe("MalformedOutput")
    }).pipe(Effect.provide(Layer.merge(
      scriptedLayer([{ toolCalls: [{ name: "read_file", input: { file: "a.txt" } }] }]),
      FileToolkitHandlers
    ))))

  describe("rejects a bad script when it is built, naming the turn", () => {
    const cases: ReadonlyArray<{ readonly name: string; readonly turns: unknown; readonly option: string; readonly detail: string }> = [
      {
        name: "a string input",
        turns: [{ text: "ok" }, { toolCalls: [{ name: "x", input: "a.txt" }] }],
        option: "turns[1].toolCalls[0].input",
        detail: `expected a JSON object, got "a.txt"`
      },
      { name: "a null input", turns: [{ toolCalls: [{ name: "x", input: null }] }], option: "turns[0].toolCalls[0].input", detail: "got null" },
      { name: "an array input", turns: [{ toolCalls: [{ name: "x", input: [1, 2] }] }], option: "turns[0].toolCalls[0].input", detail: "got an array" },
      { name: "a missing input", turns: [{ toolCalls: [{ name: "x" }] }], option: "turns[0].toolCalls[0].input", detail: "is required" },
      {
        name: "a function deep in the input",
        turns: [{ toolCalls: [{ name: "x", input: { a: { b: () => 1 } } }] }],
        option: "turns[0].toolCalls[0].input",
        detail: "input.a.b is function"
      },
      { name: "NaN in the input", turns: [{ toolCalls: [{ name: "x", input: { n: Number.NaN } }] }], option: "turns[0].toolCalls[0].input", detail: "input.n is NaN" },
      { name: "a Date in the input", turns: [{ toolCalls: [{ name: "x", input: { d: new Date(0) } }] }], option: "turns[0].toolCalls[0].input", detail: "input.d is a Date" },
      { name: "an empty tool name", turns: [{ toolCalls: [{ name: "", input: {} }] }], option: "turns[0].toolCalls[0].name", detail: `expected a tool name, got ""` },
      {
        name: "a misspelt key",
        turns: [{ tool_calls: [] }],
        option: "turns[0].tool_calls",
        detail: `unknown option (did you mean "toolCalls"?)`
      },
      { name: "non-string text", turns: [{}, { text: 42 }], option: "turns[1].text", detail: "expected a string, got 42" },
      { name: "a turn that is not an object", turns: ["hello"], option: "turns[0]", detail: `expected a turn { text?, toolCalls? }, got "hello"` },
      { name: "turns that are not an array", turns: { text: "hi" }, option: "turns", detail: "expected an array of turns" }
    ]
    for (const { name, turns, option, detail } of cases) {
      it(`rejects ${name}`, () => {
        let thrown: unknown
        try {
          scripted(turns as ReadonlyArray<ScriptedTurn>)
        } catch (error) {
          thrown = error
        }
        expect(thrown).toBeInstanceOf(ConfigurationError)
        if (!(thrown instanceof ConfigurationError)) return
        expect(thrown.option).toBe(option)
        expect(thrown.detail).toContain(detail)
      })
    }

    it("rejects a circular input", () => {
      const input: Record<string, unknown> = { path: "a.txt" }
      input["self"] = input
      expect(() => scripted([{ toolCalls: [{ name: "x", input }] }])).toThrow(/"turns\[0\]\.toolCalls\[0\]\.input": input\.self is a circular reference/)
    })
  })

  it.effect("keeps its own copy of the script", () => {
    const input: { path: string } = { path: "a.txt" }
    const turns: Array<ScriptedTurn> = [{ text: "original", toolCalls: [{ name: "read_file", input }] }]
    const model = scripted(turns)
    input.path = "changed.txt"
    turns.push({ text: "added later" })
    return Effect.gen(function*() {
      const response = yield* LanguageModel.generateText({ prompt: "go", toolkit: FileToolkit, disableToolCallResolution: true })
      expect(response.text).toBe("original")
      expect(response.toolCalls[0]?.params).toEqual({ path: "a.txt" })
      expect(model.remaining()).toBe(0)
    }).pipe(Effect.provide(Layer.merge(model.layer(), FileToolkitHandlers)))
  })

  it.effect("records every call: index, the prompt as received, the tools offered", () => {
    const model = scripted([{ text: "a" }, { text: "b" }])
    return Effect.gen(function*() {
      expect(model.calls()).toEqual([])
      yield* LanguageModel.generateText({
        prompt: [{ role: "system", content: "be brief" }, { role: "user", content: "first" }],
        toolkit: FileToolkit,
        disableToolCallResolution: true
      })
      yield* LanguageModel.generateText({ prompt: "second" })
      yield* Effect.flip(LanguageModel.generateText({ prompt: "third" }))

      const calls = model.calls()
      expect(calls.map((call) => call.index)).toEqual([0, 1, 2])
      expect(calls.map((call) => call.toolNames)).toEqual([["read_file", "write_file"], [], []])
      expect(calls[0]?.prompt.content.map((message) => message.role)).toEqual(["system", "user"])
      const firstUser = calls[0]?.prompt.content[1]
      expect(firstUser?.role === "user" ? firstUser.content : undefined).toMatchObject([{ type: "text", text: "first" }])
      const third = calls[2]?.prompt.content[0]
      expect(third?.role === "user" ? third.content : undefined).toMatchObject([{ type: "text", text: "third" }])
      // A snapshot: later calls do not change an array already handed out.
      expect(model.calls()).not.toBe(calls)
    }).pipe(Effect.provide(Layer.merge(model.layer(), FileToolkitHandlers)))
  })

  it.effect("streams the same reply: text deltas, tool calls, finish", () => {
    const model = scripted([
      {
        text: "Writing the file now.",
        toolCalls: [{ name: "write_file", input: { path: "b.txt", content: "beta" } }]
      },
      { text: "Done." }
    ])
    return Effect.gen(function*() {
      const parts = Chunk.toReadonlyArray(yield* Stream.runCollect(LanguageModel.streamText({
        prompt: "write b.txt",
        toolkit: FileToolkit,
        disableToolCallResolution: true
      })))
      const types = parts.map((part) => part.type)
      expect(types[0]).toBe("response-metadata")
      expect(types.at(-1)).toBe("finish")
      expect(types.indexOf("text-start")).toBeLessThan(types.indexOf("text-delta"))
      expect(types.lastIndexOf("text-delta")).toBeLessThan(types.indexOf("text-end"))
      const deltas = parts.flatMap((part) => (part.type === "text-delta" ? [part.delta] : []))
      expect(deltas.length).toBeGreaterThan(1)
      expect(deltas.join("")).toBe("Writing the file now.")
      const calls = parts.flatMap((part) => (part.type === "tool-call" ? [part] : []))
      expect(calls.map(({ name, params }) => ({ name, params }))).toEqual([
        { name: "write_file", params: { path: "b.txt", content: "beta" } }
      ])
      expect(calls[0]?.id).toMatch(TOOL_USE_ID)
      const finish = parts.at(-1)
      expect(finish?.type === "finish" ? finish.reason : undefined).toBe("tool-calls")

      // Streaming and non-streaming calls draw from the same script.
      const next = yield* LanguageModel.generateText({ prompt: "and then?" })
      expect(next.text).toBe("Done.")
      // A streamed reply turns back into the same conversation.
      const replayed = Prompt.fromResponseParts(parts)
      expect(replayed.content.map((message) => message.role)).toEqual(["assistant"])
    }).pipe(Effect.provide(Layer.merge(model.layer(), FileToolkitHandlers)))
  })

  it.effect("a streamed call past the script fails with the same error", () => {
    const model = scripted([])
    return Effect.gen(function*() {
      const error = yield* Effect.flip(Stream.runDrain(LanguageModel.streamText({ prompt: "hi" })))
      expect(error.message).toContain("scripted model: all 0 turns were used; model call 1 has no scripted turn")
    }).pipe(Effect.provide(model.layer()))
  })

  it.effect("shares one script between every layer built from the provider", () => {
    const model = scripted([{ text: "first run" }, { text: "second run" }])
    const ask = LanguageModel.generateText({ prompt: "hi" })
    return Effect.gen(function*() {
      const first = yield* Effect.provide(ask, model.layer())
      const second = yield* Effect.provide(ask, model.layer("another-name"))
      expect([first.text, second.text]).toEqual(["first run", "second run"])
      expect(model.calls()).toHaveLength(2)
      expect(model.remaining()).toBe(0)
    })
  })

  it.effect("reports the model name it was built for", () =>
    Effect.gen(function*() {
      const response = yield* LanguageModel.generateText({ prompt: "hi" })
      const metadata = response.content.find((part) => part.type === "response-metadata")
      expect(metadata?.type === "response-metadata" ? Option.getOrUndefined(metadata.modelId) : undefined).toBe("my-model")
    }).pipe(Effect.provide(scripted([{ text: "hi" }]).layer("my-model"))))
})
