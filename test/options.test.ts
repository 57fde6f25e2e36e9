/**
 * Options are checked by the layers that take them, when the layer is built, so Effect users
 * get the same `ConfigurationError`s as the promise facade (which runs the same checks at once).
 */
import { Effect, Either, Exit, Layer, Schema } from "effect"
import { describe, expect, it } from "vitest"
import { ConfigurationError, FileTools, LiteAgent, MemoryCheckpointer, Workspace } from "../src/core.js"
import { decodeOptions, renamedOptions } from "../src/core/internal/options.js"
import { scriptedLayer } from "../src/provider.js"
import { tempDir } from "./support/agent.js"

/** The error a layer fails to build with, or the exit when it builds. */
const buildError = async <A, E>(layer: Layer.Layer<A, E>) => {
  const exit = await Effect.runPromiseExit(Effect.scoped(Layer.build(layer)))
  return Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : exit
}

const agentLayer = (options: LiteAgent.LiteAgentLayerOptions & FileTools.FileToolsOptions, workdir = tempDir("options")) =>
  LiteAgent.layerWithWorkdir(workdir, options).pipe(
    Layer.provide(Layer.merge(MemoryCheckpointer.layer, scriptedLayer([{ text: "hi" }])))
  )

describe("options are checked when the layers are built", () => {
  it("LiteAgent.layer: maxSteps, bashTimeoutMs, backgroundTimeoutMs, systemPrompt, modelName, sessionId", async () => {
    const cases: Array<[LiteAgent.LiteAgentLayerOptions, string]> = [
      [{ maxSteps: 0 }, "maxSteps"],
      [{ maxSteps: 1.5 }, "maxSteps"],
      [{ bashTimeoutMs: -1 }, "bashTimeoutMs"],
      [{ backgroundTimeoutMs: Number.NaN }, "backgroundTimeoutMs"],
      [{ systemPrompt: 42 as unknown as string }, "systemPrompt"],
      [{ modelName: {} as unknown as string }, "modelName"],
      [{ sessionId: 7 as unknown as string }, "sessionId"]
    ]
    for (const [options, option] of cases) {
      const error = await buildError(agentLayer(options))
      expect(error, JSON.stringify(options)).toBeInstanceOf(ConfigurationError)
      expect(error).toMatchObject({ option })
    }
    expect(Exit.isExit(await buildError(agentLayer({ maxSteps: 3, bashTimeoutMs: 1000 })))).toBe(true)
  })

  it("FileTools.layer: snapshotMaxBytes; Workspace.layer: workdir", async () => {
    expect(await buildError(agentLayer({ snapshotMaxBytes: -1 }))).toMatchObject({ _tag: "ConfigurationError", option: "snapshotMaxBytes" })
    expect(await buildError(agentLayer({}, ""))).toMatchObject({ _tag: "ConfigurationError", option: "workdir" })
    expect(await buildError(Workspace.layer(42 as unknown as string))).toMatchObject({ _tag: "ConfigurationError", option: "workdir" })
    // The workdir must be an existing directory.
    expect(await buildError(Workspace.layer("/nonexistent/lite-agent"))).toMatchObject({
      _tag: "ConfigurationError",
      option: "workdir",
      detail: "/nonexistent/lite-agent does not exist"
    })
  })
})

describe("renamed options", () => {
  it("an option's old name is refused with its new one, however differently spelt; other keys keep their did-you-mean", () => {
    const Options = Schema.Struct({ busyTimeoutMs: Schema.optional(Schema.Number) }).annotations(
      renamedOptions({ lockTimeoutMs: "busyTimeoutMs" })
    )
    const refusal = (input: unknown) => Either.getLeft(decodeOptions(Options, input, "example options"))
    expect(refusal({ lockTimeoutMs: 300 })).toMatchObject({
      _tag: "Some",
      value: { option: "lockTimeoutMs", detail: `unknown option (renamed: it is now "busyTimeoutMs"); the known ones are busyTimeoutMs` }
    })
    expect(refusal({ busyTimeoutMS: 300 })).toMatchObject({
      _tag: "Some",
      value: { option: "busyTimeoutMS", detail: `unknown option (did you mean "busyTimeoutMs"?); the known ones are busyTimeoutMs` }
    })
    // Only the schema's own keys: "toString" is no option, renamed or not.
    expect(refusal({ toString: 1 })).toMatchObject({ _tag: "Some", value: { option: "toString", detail: "unknown option; the known ones are busyTimeoutMs" } })
    expect(decodeOptions(Options, { busyTimeoutMs: 300 }, "example options")).toEqual(Either.right({ busyTimeoutMs: 300 }))
  })
})

describe("resume and clear are Effects", () => {
  it("nothing changes until the Effect runs", async () => {
    const seen = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const agent = yield* LiteAgent.LiteAgent
      const first = yield* agent.sessionId
      const resume = agent.resume("later")
      const clear = agent.clear()
      const untouched = yield* agent.sessionId
      yield* resume
      const resumed = yield* agent.sessionId
      const cleared = yield* clear
      return { first, untouched, resumed, cleared, now: yield* agent.sessionId }
    })).pipe(Effect.provide(agentLayer({}))))
    expect(seen.untouched).toBe(seen.first)
    expect(seen.resumed).toBe("later")
    expect(seen.now).toBe(seen.cleared)
    expect(seen.cleared).not.toBe("later")
  })
})
