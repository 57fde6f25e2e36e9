/**
 * The public API refuses what it does not understand — an unknown key, a wrong type, a value
 * out of range, a value that is not an options object — with a `ConfigurationError` that names
 * the option, says what was expected and quotes what came; and nothing stored or on disk
 * changes. Called as plain JavaScript would (values typed `unknown`), through the promise
 * facade and through the Effect layers.
 */
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect, Exit, Layer, Stream } from "effect"
import { describe, expect, it } from "vitest"
import {
  AgentClosedError,
  createLiteAgent,
  fileCheckpointer,
  gzipCodec,
  InvalidSeqError,
  type LiteAgent,
  type LiteAgentOptions,
  memoryCheckpointer,
  type PromiseCheckpointer,
  query
} from "../src/index.js"
import { SqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { Checkpointer, FileCheckpointer, FileTools, LiteAgent as Agent, MemoryCheckpointer, Workspace } from "../src/core.js"
import { anthropic, anthropicLayer, scripted, scriptedLayer } from "../src/provider.js"
import { checkpointerConformance } from "../src/testing.js"
import { closeAfterEach, tempDir } from "./support/agent.js"
import { expectConfigurationError, thrownBy } from "./support/refusals.js"

const track = closeAfterEach()

/** A JavaScript caller: the options are whatever it passes. */
const createFromJs = (options: unknown): LiteAgent => createLiteAgent(options as LiteAgentOptions)

describe("createLiteAgent refuses bad options at once", () => {
  const workdir = tempDir("refusals")
  const model = scripted([])
  const cases: ReadonlyArray<[string, unknown, string, string]> = [
    ["a misspelt workdir", { model, workDir: workdir }, "workDir", `unknown option (did you mean "workdir"?)`],
    ["sessions as a string", { model, workdir, sessions: "no" }, "sessions", `expected true or false, got "no"`],
    ["a numeric system prompt", { model, workdir, systemPrompt: 42 }, "systemPrompt", "expected a string, got 42"],
    ["a fractional step limit", { model, workdir, maxSteps: 2.5 }, "maxSteps", "expected a positive integer, got 2.5"],
    ["a string timeout", { model, workdir, bashTimeoutMs: "1000" }, "bashTimeoutMs", `got "1000"`],
    ["a missing model", { workdir }, "model", "is required"],
    ["a model that is not a provider", { model: "claude", workdir }, "model", `expected a provider such as anthropic() or scripted(turns), got "claude"`],
    ["an empty checkpointer", { model, workdir, checkpointer: {} }, "checkpointer", "expected a checkpointer"],
    ["options that are a string", "claude", "options", `expected an object of options, got "claude"`],
    ["options that are null", null, "options", "got null"],
    ["a workdir that does not exist", { model, workdir: join(workdir, "missing") }, "workdir", "does not exist"]
  ]
  it.each(cases)("%s", (_, options, option, detail) => {
    expectConfigurationError(thrownBy(() => createFromJs(options)), option, detail)
  })

  it("a workdir that is a file", () => {
    const file = join(workdir, "a-file")
    writeFileSync(file, "x")
    expectConfigurationError(thrownBy(() => createFromJs({ model, workdir: file })), "workdir", "is not a directory")
  })

  it("query: its parameters and its options, prefixed", async () => {
    const drain = async (params: unknown) => {
      for await (const _ of query(params as Parameters<typeof query>[0])) {
        // The refusal comes before any event.
      }
    }
    expectConfigurationError(
      await drain({ prompt: "hi", options: { model, workDir: workdir } }).catch((e: unknown) => e),
      "options.workDir",
      `did you mean "workdir"?`
    )
    expectConfigurationError(
      await drain({ prompt: "hi", options: { model, workdir }, sessionId: "x" }).catch((e: unknown) => e),
      "sessionId",
      "unknown option; the known ones are prompt, options"
    )
    expectConfigurationError(await drain({ prompt: 42, options: { model, workdir } }).catch((e: unknown) => e), "prompt", "got 42")
  })
})

describe("the agent's methods refuse bad arguments and change nothing", () => {
  const setup = async () => {
    const workdir = tempDir("refusals-agent")
    const checkpointer = memoryCheckpointer()
    track(checkpointer)
    const agent = createLiteAgent({
      model: scripted([
        { toolCalls: [{ name: "write_file", input: { path: "a.txt", content: "one\n" } }] },
        { text: "wrote" },
        { toolCalls: [{ name: "write_file", input: { path: "a.txt", content: "two\n" } }] },
        { text: "rewrote" }
      ]),
      workdir,
      checkpointer
    })
    track(agent)
    await agent.send("write one")
    await agent.send("write two")
    return { agent, checkpointer, workdir }
  }

  it("restore with a misspelt or mistyped option, or a bad seq, restores nothing", async () => {
    const { agent, checkpointer, workdir } = await setup()
    const sessionId = agent.sessionId
    const [, second] = await agent.listCheckpoints(sessionId)
    const head = await checkpointer.head(sessionId)
    const restoreFromJs = (seq: unknown, options: unknown) =>
      agent.restore(sessionId, seq as number, options as Parameters<LiteAgent["restore"]>[2]).catch((e: unknown) => e)

    expectConfigurationError(await restoreFromJs(second!.seq, { dryrun: true }), "dryrun", `did you mean "dryRun"?`)
    expectConfigurationError(await restoreFromJs(second!.seq, "dry"), "restore options", `expected an object of options, got "dry"`)
    expectConfigurationError(await restoreFromJs(second!.seq, { dryRun: "yes" }), "dryRun", `expected true or false, got "yes"`)
    expectConfigurationError(await restoreFromJs(second!.seq, { signal: "stop" }), "signal", "expected an AbortSignal")
    for (const seq of [-1, 1.5, "2", Number.NaN]) {
      const error = await restoreFromJs(seq, undefined)
      expect(error, String(seq)).toBeInstanceOf(InvalidSeqError)
      expect(error).toMatchObject({ argument: "seq" })
    }
    expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe("two\n")
    expect(await checkpointer.head(sessionId)).toBe(head)
    // The well-formed call still works.
    expect((await agent.restore(sessionId, second!.seq, { dryRun: true })).dryRun).toBe(true)
  })

  it("send with a misspelt option or a prompt that is not text appends nothing", async () => {
    const { agent, checkpointer } = await setup()
    const head = await checkpointer.head(agent.sessionId)
    const sendFromJs = (input: unknown, options: unknown) =>
      agent.send(input as string, options as Parameters<LiteAgent["send"]>[1]).catch((e: unknown) => e)
    expectConfigurationError(await sendFromJs("hi", { maxstep: 3 }), "maxstep", `did you mean "maxSteps"?`)
    expectConfigurationError(await sendFromJs("hi", { maxSteps: 0 }), "maxSteps", "expected a positive integer, got 0")
    expectConfigurationError(await sendFromJs("hi", 3), "send options", "expected an object of options, got 3")
    // A prompt that is not one is the caller's argument, named as such (not an event of the log).
    expectConfigurationError(await sendFromJs(42, undefined), "prompt", "expected a string or an array of text blocks")
    expectConfigurationError(await sendFromJs({ text: "hi" }, undefined), "prompt", "expected a string or an array of text blocks")
    expect(await checkpointer.head(agent.sessionId)).toBe(head)
  })

  it("after close() every method fails with AgentClosedError", async () => {
    const { agent } = await setup()
    const sessionId = agent.sessionId
    await agent.close()
    const rejections = await Promise.all([
      agent.send("hi").catch((e: unknown) => e),
      agent.listSessions().catch((e: unknown) => e),
      agent.deleteSession(sessionId).catch((e: unknown) => e),
      agent.listCheckpoints(sessionId).catch((e: unknown) => e),
      agent.restore(sessionId, 1).catch((e: unknown) => e),
      agent.backgroundTasks().catch((e: unknown) => e),
      (async () => {
        for await (const _ of agent.run("hi")) {
          // Nothing is expected.
        }
      })().catch((e: unknown) => e)
    ])
    for (const rejection of rejections) expect(rejection).toBeInstanceOf(AgentClosedError)
    expect(thrownBy(() => agent.resume(sessionId))).toBeInstanceOf(AgentClosedError)
    expect(thrownBy(() => agent.clear())).toBeInstanceOf(AgentClosedError)
    expect(thrownBy(() => agent.subscribe(() => undefined))).toBeInstanceOf(AgentClosedError)
    expect(agent.sessionId).toBe(sessionId)
  })
})

describe("the checkpointers, codecs and providers refuse bad options at the call", () => {
  it("memoryCheckpointer takes the quota alone; fileCheckpointer names the closest key", () => {
    expectConfigurationError(thrownBy(() => memoryCheckpointer({ dir: "/tmp" } as never)), "dir", "the known ones are maxStoreBytes")
    expectConfigurationError(
      thrownBy(() => fileCheckpointer({ directory: "/tmp/x" } as never)),
      "directory",
      `unknown option (did you mean "dir"?)`
    )
  })

  it("read options: an unknown key does not silently read everything", async () => {
    const checkpointer: PromiseCheckpointer = memoryCheckpointer()
    track(checkpointer)
    await checkpointer.append("s", [{ _tag: "UserMessage", content: "hi", origin: "user" }])
    expectConfigurationError(
      await checkpointer.read("s", { since: 1 } as never).catch((e: unknown) => e),
      "since",
      `did you mean "sinceSeq"?`
    )
    expect(await checkpointer.read("s", { sinceSeq: "1" } as never).catch((e: unknown) => e)).toBeInstanceOf(InvalidSeqError)
    expect(await checkpointer.read("s", { sinceSeq: 1 })).toEqual([])
  })

  it("checkpointerConformance refuses a misspelt option before it registers anything", () => {
    expectConfigurationError(
      thrownBy(() => checkpointerConformance("never registered", MemoryCheckpointer.layer, { propertyRun: 5 } as never)),
      "propertyRun",
      `did you mean "propertyRuns"?`
    )
  })

  it("gzipCodec and anthropic; an API key is never quoted", () => {
    expectConfigurationError(thrownBy(() => gzipCodec({ level: 10 })), "level", "expected an integer from 1 to 9, got 10")
    expectConfigurationError(thrownBy(() => anthropic({ apikey: "sk-ant-secret" } as never)), "apikey", `did you mean "apiKey"?`)
    const error = thrownBy(() => anthropic({ apiKey: 12345 } as never))
    expectConfigurationError(error, "apiKey", "expected a string, got a value not shown here")
    expect(String(error)).not.toContain("12345")
  })
})

describe("the Effect layers use the same schemas", () => {
  const buildError = async <A, E>(layer: Layer.Layer<A, E>) => {
    const exit = await Effect.runPromiseExit(Effect.scoped(Layer.build(layer)))
    return Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : exit
  }

  it("agent, file tools, workspace, backends and provider layers fail to build", async () => {
    const workdir = tempDir("refusals-layers")
    const model = scriptedLayer([])
    const agent = (options: unknown) =>
      Agent.layerWithWorkdir(workdir, options as Agent.LiteAgentWithWorkdirOptions).pipe(
        Layer.provide(Layer.merge(MemoryCheckpointer.layer, model))
      )
    expectConfigurationError(await buildError(agent({ maxstep: 3 })), "maxstep", `did you mean "maxSteps"?`)
    expectConfigurationError(await buildError(agent({ snapshotMaxBytes: "1" })), "snapshotMaxBytes", "expected a non-negative integer")
    expectConfigurationError(await buildError(agent({ sessions: 0 })), "sessions", "expected true or false, got 0")
    expectConfigurationError(
      await buildError(
        FileTools.layer({ snapshot: 1 } as never).pipe(Layer.provide(Layer.merge(Workspace.layer(workdir), MemoryCheckpointer.layer)))
      ),
      "snapshot",
      "unknown option"
    )
    expectConfigurationError(await buildError(FileCheckpointer.layer({ dir: workdir, synchronous: "fast" } as never)), "synchronous", `got "fast"`)
    expectConfigurationError(
      await buildError(SqliteCheckpointer.layer({ file: join(workdir, "x.db"), busyTimeout: 1 } as never)),
      "busyTimeout",
      `did you mean "busyTimeoutMs"?`
    )
    expectConfigurationError(await buildError(anthropicLayer({ maxTokens: -1 })), "maxTokens", "expected a positive integer, got -1")
  })

  it("send and restore through the Effect service", async () => {
    const workdir = tempDir("refusals-effect")
    const layer = Agent.layerWithWorkdir(workdir).pipe(
      Layer.provideMerge(Layer.merge(MemoryCheckpointer.layer, scriptedLayer([{ text: "hi" }])))
    )
    const outcome = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const agent = yield* Agent.LiteAgent
      const checkpointer = yield* Checkpointer
      const sendError = yield* Effect.flip(agent.send("hi", { maxstep: 1 } as never))
      const runError = yield* Effect.flip(Stream.runDrain(agent.run("hi", "fast" as never)))
      const result = yield* agent.send("hi")
      const restoreError = yield* Effect.flip(agent.restore(result.sessionId, 1, { dry: true } as never))
      const seqError = yield* Effect.flip(agent.restore(result.sessionId, -1))
      return { sendError, runError, restoreError, seqError, head: yield* checkpointer.head(result.sessionId) }
    })).pipe(Effect.provide(layer)))
    expectConfigurationError(outcome.sendError, "maxstep", "unknown option")
    expectConfigurationError(outcome.runError, "send options", `got "fast"`)
    expectConfigurationError(outcome.restoreError, "dry", `did you mean "dryRun"?`)
    expect(outcome.seqError).toBeInstanceOf(InvalidSeqError)
    // Metadata, the checkpoint's workspace capture, the prompt, the answer: the refused calls wrote nothing.
    expect(outcome.head).toBe(4)
  })
})
