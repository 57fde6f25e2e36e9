/**
 * Compaction through the agent, on every backend: the stages and their events (the same on the
 * run's iterator and on `subscribe`), the one `Compaction` event it writes and the prompt the
 * model sees after it; what an abort at each stage, a model failure or a busy agent leaves
 * (the log exactly as it was); nothing to reduce; restore across a compaction; two in a row.
 */
import { LanguageModel } from "@effect/ai"
import { Chunk, Effect, Fiber, Layer, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { Checkpointer, LiteAgent as Agent, MemoryCheckpointer } from "../src/core.js"
import { COMPACTION_STAGES } from "../src/agent/compaction.js"
import {
  AgentBusyError,
  type AgentEvent,
  CheckpointConflictError,
  CompactionCancelledError,
  type CompactionEvent,
  ConfigurationError,
  createLiteAgent,
  type LiteAgent,
  memoryCheckpointer,
  ModelError,
  type PromiseCheckpointer,
  SessionsDisabledError,
  UserMessage
} from "../src/index.js"
import { scripted, type ScriptedTurn } from "../src/provider.js"
import { closeAfterEach, promiseCheckpointer, promptLines, tempDir } from "./support/agent.js"
import { BACKENDS } from "./support/agentSim.js"

const track = closeAfterEach()

/** Prompt i: the model writes f{i%3}.txt, then answers at some length. */
const exchanges = (count: number): Array<ScriptedTurn> =>
  Array.from({ length: count }, (_, i) => [
    { toolCalls: [{ name: "write_file", input: { path: `f${i % 3}.txt`, content: `version ${i}\n`.repeat(30) } }] },
    { text: `done ${i}: ${"details ".repeat(60)}` }
  ]).flat()

const SUMMARY = "SUMMARY: the user asked for six versions of three files."

/**
 * These tests count compaction's events and seqs; the workspace captures of the default
 * `capture: "all"` would add one per checkpoint. Compaction with captures on is tested in
 * workspace.capture.test.ts.
 */
const TOOLS_ONLY = { workspace: { capture: "tools" } } as const

const setUp = async (
  checkpointer: PromiseCheckpointer,
  after: ReadonlyArray<ScriptedTurn>,
  prompts = 6,
  systemPrompt = "be brief"
) => {
  const model = scripted([...exchanges(prompts), ...after])
  const agent: LiteAgent = track(createLiteAgent({ model, workdir: tempDir("compact-work"), checkpointer, systemPrompt, ...TOOLS_ONLY }))
  for (let i = 0; i < prompts; i++) await agent.send(`prompt ${i}`)
  return { model, agent, log: await checkpointer.read(agent.sessionId) }
}

const collect = async (run: AsyncIterable<CompactionEvent>) => {
  const events: Array<CompactionEvent> = []
  for await (const event of run) events.push(event)
  return events
}

const compactionEvents = (agent: LiteAgent) => {
  const seen: Array<CompactionEvent> = []
  agent.subscribe((event: AgentEvent) => {
    if (event.type === "compaction") seen.push(event)
  })
  return seen
}

describe.each(BACKENDS)("compaction (%s)", (backend) => {
  it("reports every stage in order, writes one Compaction event and nothing else; the model then sees system + summary + kept tail", async () => {
    const checkpointer = track(promiseCheckpointer(backend))
    const { agent, log, model } = await setUp(checkpointer, [{ text: SUMMARY }, { text: "next answer" }])
    const subscribed = compactionEvents(agent)

    const run = agent.compact("keep the file names", { keepRecentTokens: 400 })
    const events = await collect(run)
    const result = await run
    expect(events).toEqual(subscribed)

    expect(events[0]).toMatchObject({ phase: "start", stage: "measure" })
    expect(events.at(-1)).toMatchObject({ phase: "done", stage: "persist", result })
    expect(events.slice(1, -1).every((event) => event.phase === "progress")).toBe(true)
    const order = events.map((event) => COMPACTION_STAGES.indexOf(event.stage))
    expect(order).toEqual([...order].sort((a, b) => a - b))
    expect([...new Set(events.map((event) => event.stage))]).toEqual([...COMPACTION_STAGES])

    const archive = events.filter((event) => event.stage === "archive")
    const total = archive[0]!.total!
    expect(archive.map((event) => event.completed)).toEqual([...Array(total + 1).keys()])
    expect(archive.every((event) => event.total === total)).toBe(true)
    expect(events.find((event) => event.stage === "measure" && event.tokens !== undefined)!.tokens).toEqual({ tokens: result.before, method: "measured" })
    expect(events.find((event) => event.stage === "project")!.tokens).toEqual({ tokens: result.after, method: "measured" })
    expect(result).toMatchObject({ sessionId: agent.sessionId, compacted: true, method: "measured" })
    expect(result.after).toBeLessThan(result.before)

    // Nothing rewritten: the old events are all there, and one Compaction after them.
    const logAfter = await checkpointer.read(agent.sessionId)
    expect(logAfter.slice(0, log.length)).toEqual(log)
    expect(logAfter).toHaveLength(log.length + 1)
    const compaction = logAfter.at(-1)!
    expect(result.seq).toBe(compaction.seq)
    expect(compaction.event).toMatchObject({ _tag: "Compaction", tokensBefore: result.before, tokensAfter: result.after, instructions: "keep the file names" })
    const keptFromSeq = (compaction.event as { keptFromSeq?: number }).keptFromSeq!
    const firstKept = log.find((stored) => stored.seq === keptFromSeq)!
    expect(firstKept.event).toMatchObject({ _tag: "UserMessage" })
    const messageTags = ["UserMessage", "AssistantMessage", "ToolResult", "RuntimeMessage", "BackgroundCompleted"]
    expect(total).toBe(log.filter((stored) => stored.seq < keptFromSeq && messageTags.includes(stored.event._tag)).length)

    // The summarizer got the transcript and the instructions; the model then sees the summary and the kept prompts.
    const summarizerPrompt = promptLines(model.calls().at(-1)!.prompt).join("\n")
    expect(summarizerPrompt).toContain("[user] prompt 0")
    expect(summarizerPrompt).toContain("keep the file names")
    await agent.send("prompt 6")
    const lines = promptLines(model.calls().at(-1)!.prompt)
    expect(lines[0]).toBe("system: be brief")
    expect(lines[1]).toContain("[lite-agent summary of the earlier conversation]")
    expect(lines[1]).toContain(SUMMARY)
    // Whatever the model wrote, the summary carries the user's requests verbatim and the files' state.
    expect(lines[1]).toContain("- (seq 2) prompt 0")
    expect(lines[1]).toMatch(/f0\.txt: written, \d+ bytes/)
    const keptPrompt = (firstKept.event as { content: string }).content
    expect(lines[2]).toBe(`user: ${keptPrompt}`)
    expect(lines.at(-1)).toBe("user: prompt 6")
    expect(lines.filter((line) => line.startsWith("user: prompt"))).toHaveLength(7 - Number(keptPrompt.split(" ")[1]))
  })

  it("an abort during the model call ends `cancelled` and leaves the log exactly as it was", async () => {
    const checkpointer = track(promiseCheckpointer(backend))
    const { agent, log } = await setUp(checkpointer, [{ text: SUMMARY, delayMs: 10_000 }], 4)
    const controller = new AbortController()
    agent.subscribe((event) => {
      if (event.type === "compaction" && event.stage === "summarize" && event.completed === 0) controller.abort()
    })
    const run = agent.compact(undefined, { keepRecentTokens: 0, signal: controller.signal })
    const started = Date.now()
    const error = await run.then(() => undefined, (e: unknown) => e)
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(error).toBeInstanceOf(CompactionCancelledError)
    expect(error).toMatchObject({ stage: "summarize" })
    expect((await collect(run)).at(-1)).toMatchObject({ phase: "cancelled", stage: "summarize" })
    expect(await checkpointer.read(agent.sessionId)).toEqual(log)
  })
})

describe("compaction: aborts, failures and refusals", () => {
  it.each(["measure", "archive", "normalize", "summarize", "project"] as const)(
    "an abort during %s ends `cancelled` there and writes nothing",
    async (stage) => {
      const checkpointer = track(memoryCheckpointer())
      const { agent, log } = await setUp(checkpointer, [{ text: SUMMARY }], 4)
      const controller = new AbortController()
      // Abort as the stage reports for the first time.
      agent.subscribe((event) => {
        if (event.type === "compaction" && event.stage === stage) controller.abort()
      })
      const run = agent.compact(undefined, { keepRecentTokens: 0, signal: controller.signal })
      const error = await run.then(() => undefined, (e: unknown) => e)
      expect(error).toBeInstanceOf(CompactionCancelledError)
      expect(error).toMatchObject({ stage })
      const events = await collect(run)
      expect(events.at(-1)).toMatchObject({ phase: "cancelled", stage })
      expect(events.filter((event) => event.phase === "cancelled")).toHaveLength(1)
      expect(await checkpointer.read(agent.sessionId)).toEqual(log)
    }
  )

  it("a model failure at summarize ends `error` with a ModelError, writes nothing, and the agent goes on", async () => {
    const checkpointer = track(memoryCheckpointer())
    // The summarizer's call offers no tools, so a turn calling one fails.
    const failing = { toolCalls: [{ name: "write_file", input: { path: "x", content: "y" } }] }
    const { agent, log } = await setUp(checkpointer, [failing, { text: "still here" }], 4)
    const run = agent.compact(undefined, { keepRecentTokens: 0 })
    const error = await run.then(() => undefined, (e: unknown) => e)
    expect(error).toBeInstanceOf(ModelError)
    const last = (await collect(run)).at(-1)!
    expect(last).toMatchObject({ phase: "error", stage: "summarize" })
    expect(last.error).toBe(error)
    expect(await checkpointer.read(agent.sessionId)).toEqual(log)
    expect((await agent.send("and now?")).text).toBe("still here")
  })

  it("another writer appending meanwhile makes it end `error` with CheckpointConflictError, and writes nothing", async () => {
    const checkpointer = track(memoryCheckpointer())
    const { agent, log } = await setUp(checkpointer, [{ text: SUMMARY, delayMs: 300 }], 3)
    const run = agent.compact(undefined, { keepRecentTokens: 0 })
    for await (const event of run) {
      // Another process (here: the checkpointer directly) writes to the session while the model summarizes.
      if (event.stage === "summarize" && event.completed === 0) await checkpointer.append(agent.sessionId, [new UserMessage({ content: "foreign" })])
    }
    const error = await run.then(() => undefined, (e: unknown) => e)
    expect(error).toBeInstanceOf(CheckpointConflictError)
    expect((await collect(run)).at(-1)).toMatchObject({ phase: "error", stage: "persist" })
    const after = await checkpointer.read(agent.sessionId)
    expect(after.slice(0, log.length)).toEqual(log)
    expect(after.slice(log.length).map((stored) => stored.event._tag)).toEqual(["UserMessage"])
  })

  it("an interrupted fiber (Effect API) ends `cancelled` and writes nothing", async () => {
    const model = scripted([...exchanges(3), { text: SUMMARY, delayMs: 10_000 }])
    const layer = Agent.layerWithWorkdir(tempDir("compact-interrupt"), { sessionId: "i", ...TOOLS_ONLY }).pipe(
      Layer.provide(model.layer()),
      Layer.provideMerge(MemoryCheckpointer.layer)
    )
    const outcome = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const agent = yield* Agent.LiteAgent
      for (let i = 0; i < 3; i++) yield* agent.send(`prompt ${i}`)
      const checkpointer = yield* Checkpointer
      const before = Chunk.toArray(yield* Stream.runCollect(checkpointer.read("i")))
      const seen: Array<CompactionEvent> = []
      yield* agent.addListener((event) => {
        if (event.type === "compaction") seen.push(event)
      })
      const fiber = yield* Effect.fork(agent.compact(undefined, { keepRecentTokens: 0 }))
      while (!seen.some((event) => event.stage === "summarize")) yield* Effect.sleep(5)
      yield* Fiber.interrupt(fiber)
      const after = Chunk.toArray(yield* Stream.runCollect(checkpointer.read("i")))
      return { before, after, last: seen.at(-1) }
    }).pipe(Effect.provide(layer))))
    expect(outcome.after).toEqual(outcome.before)
    expect(outcome.last).toMatchObject({ phase: "cancelled", stage: "summarize" })
  })

  it("needs the agent idle, and holds it: a turn meanwhile is refused (maintenance)", async () => {
    const checkpointer = track(memoryCheckpointer())
    const { agent, log } = await setUp(checkpointer, [{ text: "slow", delayMs: 400 }, { text: SUMMARY, delayMs: 400 }], 3)
    const turn = agent.send("a slow one")
    const busy = await agent.compact().then(() => undefined, (e: unknown) => e)
    expect(busy).toBeInstanceOf(AgentBusyError)
    expect(busy).toMatchObject({ operation: "compact", reason: "run_in_flight" })
    await turn

    const run = agent.compact(undefined, { keepRecentTokens: 0 })
    const events: Array<CompactionEvent> = []
    let refused: unknown
    for await (const event of run) {
      events.push(event)
      if (event.stage === "summarize" && event.completed === 0) refused = await agent.send("meanwhile").catch((e: unknown) => e)
    }
    expect(refused).toBeInstanceOf(AgentBusyError)
    expect(refused).toMatchObject({ operation: "send", reason: "maintenance" })
    expect((await run).compacted).toBe(true)
    expect(await checkpointer.read(agent.sessionId)).toHaveLength(log.length + 3)
  })

  it("with nothing to reduce, finishes `done` with before === after and writes nothing", async () => {
    const empty = track(createLiteAgent({ model: scripted([]), workdir: tempDir("compact-empty"), checkpointer: track(memoryCheckpointer()) }))
    const nothing = empty.compact()
    const events = await collect(nothing)
    expect(await nothing).toMatchObject({ compacted: false, before: 0, after: 0, reason: "the conversation has no messages to summarize" })
    expect(events.map((event) => event.phase)).toEqual(["start", "progress", "done"])

    // A summary larger than the conversation it would replace is not written.
    const checkpointer = track(memoryCheckpointer())
    const { agent, log, model } = await setUp(checkpointer, [{ text: "a long summary ".repeat(1000) }], 2)
    const larger = await agent.compact(undefined, { keepRecentTokens: 0 })
    expect(larger).toMatchObject({ compacted: false, after: larger.before })
    expect(larger.reason).toContain("would not make the context smaller")
    expect(model.remaining()).toBe(0)
    expect(await checkpointer.read(agent.sessionId)).toEqual(log)
  })

  it("refuses bad arguments with ConfigurationError, and sessions: false with SessionsDisabledError", async () => {
    const checkpointer = track(memoryCheckpointer())
    const agent = track(createLiteAgent({ model: scripted([]), workdir: tempDir("compact-args"), checkpointer }))
    await expect(agent.compact(undefined, { keepRecent: 5 } as never)).rejects.toBeInstanceOf(ConfigurationError)
    await expect(agent.compact(42 as never)).rejects.toBeInstanceOf(ConfigurationError)
    await expect(agent.compact(undefined, { signal: "stop" } as never)).rejects.toBeInstanceOf(ConfigurationError)
    await expect(agent.compact(undefined, { sessionId: "../x" })).rejects.toMatchObject({ _tag: "InvalidSessionIdError" })
    const stateless = track(createLiteAgent({ model: scripted([]), workdir: tempDir("compact-nosessions"), sessions: false }))
    await expect(stateless.compact()).rejects.toBeInstanceOf(SessionsDisabledError)
  })
})

describe("compaction and time travel", () => {
  it("checkpoints before a compaction stay listed; restoring to one brings the full conversation back", async () => {
    const checkpointer = track(memoryCheckpointer())
    const { agent, model } = await setUp(checkpointer, [{ text: SUMMARY }, { text: "after restore" }], 4)
    await agent.compact(undefined, { keepRecentTokens: 0 })
    const checkpoints = await agent.listCheckpoints(agent.sessionId)
    expect(checkpoints.map((checkpoint) => checkpoint.prompt)).toEqual(["prompt 0", "prompt 1", "prompt 2", "prompt 3"])
    await agent.restore(agent.sessionId, checkpoints[2]!.seq)
    // The compaction stays in the log, on the branch the restore left: the conversation goes on without it.
    expect((await checkpointer.read(agent.sessionId)).some((stored) => stored.event._tag === "Compaction")).toBe(true)
    await agent.send("again")
    const lines = promptLines(model.calls().at(-1)!.prompt)
    expect(lines.some((line) => line.includes("summary of the earlier conversation"))).toBe(false)
    expect(lines.filter((line) => line.startsWith("user: "))).toEqual(["user: prompt 0", "user: prompt 1", "user: again"])
  })

  it("compacting twice summarizes the previous summary with what came after", async () => {
    const checkpointer = track(memoryCheckpointer())
    const second = "SECOND SUMMARY"
    const { agent, model } = await setUp(checkpointer, [{ text: SUMMARY }, ...exchanges(3), { text: second }, { text: "last" }], 4)
    await agent.compact(undefined, { keepRecentTokens: 0 })
    for (let i = 0; i < 3; i++) await agent.send(`later ${i}`)
    const result = await agent.compact(undefined, { keepRecentTokens: 0 })
    expect(result.compacted).toBe(true)
    const summarizer = promptLines(model.calls().at(-1)!.prompt).join("\n")
    expect(summarizer).toContain(`<summary>\n${SUMMARY}`)
    expect(summarizer).toContain("[user] later 0")
    expect(summarizer).not.toContain("[user] prompt 0")
    await agent.send("final")
    const lines = promptLines(model.calls().at(-1)!.prompt)
    expect(lines[1]).toContain(second)
    // The appendix still quotes the very first request, summarized twice over.
    expect(lines[1]).toContain("- (seq 2) prompt 0")
    expect((await checkpointer.read(agent.sessionId)).filter((stored) => stored.event._tag === "Compaction")).toHaveLength(2)
  })
})

describe("automatic compaction", () => {
  /** Answers of 300 tokens (1 200 characters): the context passes 500 tokens at the third prompt. */
  const answer = (i: number): ScriptedTurn => ({ text: `${i}`.padEnd(1200, "x") })

  it("compacts inside the turn before a model call would pass thresholdTokens, with the same events, and the turn goes on", async () => {
    const checkpointer = track(memoryCheckpointer())
    const model = scripted([answer(0), answer(1), { text: SUMMARY }, answer(2)])
    const agent = track(createLiteAgent({
      model,
      workdir: tempDir("auto-compact"),
      checkpointer,
      ...TOOLS_ONLY,
      autoCompact: { thresholdTokens: 500, keepRecentTokens: 100 }
    }))
    await agent.send("p0")
    await agent.send("p1")
    expect((await checkpointer.read(agent.sessionId)).some((stored) => stored.event._tag === "Compaction")).toBe(false)

    const events: Array<AgentEvent> = []
    for await (const event of agent.run("p2")) events.push(event)
    const kinds = events.filter((event) => event.type !== "text_delta").map((event) =>
      event.type === "session_event" ? event.event._tag : event.type === "compaction" ? `${event.phase} ${event.stage}` : event.type
    )
    // The user's message, then the compaction (ending with its Compaction event), then the model's answer.
    expect(kinds[0]).toBe("UserMessage")
    expect(kinds[1]).toBe("start measure")
    expect(kinds.slice(kinds.indexOf("done persist"))).toEqual(["done persist", "Compaction", "AssistantMessage", "result"])
    const result = events.at(-1)
    expect(result).toMatchObject({ type: "result", result: { text: answer(2).text } })

    const log = await checkpointer.read(agent.sessionId)
    const compaction = log.find((stored) => stored.event._tag === "Compaction")!
    const p2 = log.find((stored) => stored.event._tag === "UserMessage" && stored.event.content === "p2")!
    expect(compaction.event).toMatchObject({ keptFromSeq: p2.seq })
    expect(compaction.seq).toBe(p2.seq + 1)
    const lines = promptLines(model.calls().at(-1)!.prompt)
    expect(lines[0]).toContain(SUMMARY)
    expect(lines.slice(1)).toEqual(["user: p2"])
  })

  it("createLiteAgent's default threshold is 80% of the provider's context window; autoCompact: false turns it off", async () => {
    const run = async (autoCompact: false | undefined) => {
      const checkpointer = track(memoryCheckpointer())
      const model = scripted([answer(0), answer(1), { text: SUMMARY }, answer(2)], { contextTokens: 500 })
      const agent = track(createLiteAgent({
        model,
        workdir: tempDir("auto-default"),
        checkpointer,
        ...(autoCompact === undefined ? {} : { autoCompact })
      }))
      for (const prompt of ["p0", "p1", "p2"]) await agent.send(prompt)
      return (await checkpointer.read(agent.sessionId)).filter((stored) => stored.event._tag === "Compaction")
    }
    // 400 tokens: passed at the third prompt (about 600); the latest prompts within 20 000 tokens are kept.
    const compacted = await run(undefined)
    expect(compacted).toHaveLength(1)
    expect(await run(false)).toEqual([])
  })

  it("a compaction that fails inside a turn is reported and the turn goes on uncompacted", async () => {
    const checkpointer = track(memoryCheckpointer())
    const failing = { toolCalls: [{ name: "write_file", input: { path: "x", content: "y" } }] }
    const agent = track(createLiteAgent({
      model: scripted([answer(0), answer(1), failing, answer(2)]),
      workdir: tempDir("auto-fail"),
      checkpointer,
      autoCompact: { thresholdTokens: 500, keepRecentTokens: 100 }
    }))
    await agent.send("p0")
    await agent.send("p1")
    const seen = compactionEvents(agent)
    expect((await agent.send("p2")).text).toBe(answer(2).text)
    expect(seen.at(-1)).toMatchObject({ phase: "error", stage: "summarize" })
    expect((await checkpointer.read(agent.sessionId)).some((stored) => stored.event._tag === "Compaction")).toBe(false)
  })

  it("without a token counter, the last call's reported usage counts: a large one triggers it though the text is not", async () => {
    // About 1 000 tokens of text, reported as 150 000 (tool definitions, images… whatever the estimate cannot see).
    const model = scripted([{ text: "x".repeat(4000), usage: { inputTokens: 150_000, outputTokens: 10 } }, { text: SUMMARY }, { text: "after" }])
    // The model alone, without the scripted provider's TokenCounter: what a provider that cannot count looks like.
    const uncounted = Layer.effect(LanguageModel.LanguageModel, Effect.provide(LanguageModel.LanguageModel, model.layer()))
    const layer = Agent.layerWithWorkdir(tempDir("auto-usage"), { sessionId: "u", autoCompact: { thresholdTokens: 100_000, keepRecentTokens: 100 } }).pipe(
      Layer.provide(uncounted),
      Layer.provideMerge(MemoryCheckpointer.layer)
    )
    const tags = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const agent = yield* Agent.LiteAgent
      const seen: Array<CompactionEvent> = []
      yield* agent.addListener((event) => {
        if (event.type === "compaction") seen.push(event)
      })
      yield* agent.send("first")
      expect(seen).toEqual([])
      yield* agent.send("second")
      expect(seen.find((event) => event.stage === "measure" && event.tokens !== undefined)?.tokens?.method).toBe("estimated")
      const checkpointer = yield* Checkpointer
      return Chunk.toArray(yield* Stream.runCollect(checkpointer.read("u"))).map((stored) => stored.event._tag)
    }).pipe(Effect.provide(layer))))
    // With workspace captures on (the default): one before each prompt.
    expect(tags).toEqual([
      "SessionMetadata",
      "WorkspaceCaptured",
      "UserMessage",
      "AssistantMessage",
      "WorkspaceCaptured",
      "UserMessage",
      "Compaction",
      "AssistantMessage"
    ])
  })

  it("bad autoCompact options are a ConfigurationError", () => {
    for (const autoCompact of [true, { threshold: 5 }, { thresholdTokens: 0 }, { thresholdTokens: 10, keepRecentTokens: -1 }]) {
      expect(() => createLiteAgent({ model: scripted([]), workdir: tempDir("auto-bad"), autoCompact: autoCompact as never })).toThrow(ConfigurationError)
    }
  })
})
