/**
 * Streamed output: the model's text reaches `run`, `subscribe` and `query` as `text_delta`
 * events while the call is still going, and the log stores only whole messages — a call cut
 * off mid-stream leaves the log as a failed call does.
 */
import { afterEach, describe, expect, it } from "vitest"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Response from "@effect/ai/Response"
import { Effect, Layer, Stream } from "effect"
import { type AgentEvent, createLiteAgent, memoryCheckpointer, ModelError, query } from "../src/index.js"
import { type ModelProvider, scripted } from "../src/provider.js"
import { tempDir } from "./support/agent.js"

const opened: Array<{ close(): Promise<void> }> = []
afterEach(async () => {
  for (const thing of opened.splice(0).reverse()) await thing.close()
})

const ANSWER = "Streaming arrives word by word, then the whole message is logged."

describe("text deltas", () => {
  it("run and subscribe see the text in pieces before the message; the pieces make the text; the log holds no pieces", async () => {
    const checkpointer = memoryCheckpointer()
    const agent = createLiteAgent({
      model: scripted([{ text: "Let me look.", toolCalls: [{ name: "list_files", input: {} }] }, { text: ANSWER }]),
      workdir: tempDir("streaming"),
      checkpointer
    })
    opened.push(checkpointer, agent)
    const subscribed: Array<AgentEvent> = []
    const unsubscribe = agent.subscribe((event) => subscribed.push(event))
    const ran: Array<AgentEvent> = []
    for await (const event of agent.run("look around")) ran.push(event)
    unsubscribe()
    for (const events of [ran, subscribed]) {
      const deltas = events.flatMap((event) => event.type === "text_delta" ? [event.delta] : [])
      expect(deltas.length).toBeGreaterThan(8)
      expect(deltas.join("")).toBe(`Let me look.${ANSWER}`)
      // Each message's pieces come before the message itself.
      const order = events.flatMap((event) =>
        event.type === "text_delta" ? ["delta"] : event.type === "session_event" && event.event._tag === "AssistantMessage" ? ["message"] : []
      )
      expect(order.join(" ").replace(/(delta )+/g, "delta… ")).toBe("delta… message delta… message")
    }
    const stored = await checkpointer.read(agent.sessionId)
    expect(stored.map((entry) => entry.event._tag)).not.toContain("text_delta")
    expect(JSON.stringify(stored.at(-1)!.event)).toContain(ANSWER)
  })

  it("a text still streaming is seen before the turn ends; cut off there, the log has no half message", async () => {
    const checkpointer = memoryCheckpointer()
    // The last piece is held for a minute: the turn cannot end before the test has looked.
    const agent = createLiteAgent({
      model: scripted([{ text: "first part, and the rest", chunkDelayMs: 60_000 }]),
      workdir: tempDir("streaming-held"),
      checkpointer
    })
    opened.push(checkpointer, agent)
    const firstDelta = new Promise<string>((resolve) => {
      agent.subscribe((event) => {
        if (event.type === "text_delta") resolve(event.delta)
      })
    })
    const turn = agent.send("say it slowly").catch((error: unknown) => error)
    expect(await firstDelta).toBe("first ")
    const before = await checkpointer.read(agent.sessionId)
    expect(before.map((entry) => entry.event._tag)).not.toContain("AssistantMessage")
    await agent.close()
    expect(await turn).toMatchObject({ _tag: "AgentClosedError" })
    const after = await checkpointer.read(agent.sessionId)
    expect(after.map((entry) => entry.event._tag)).toEqual(before.map((entry) => entry.event._tag))
  })

  it("query streams the deltas too", async () => {
    const events: Array<AgentEvent> = []
    for await (
      const event of query({
        prompt: "hello",
        options: { model: scripted([{ text: ANSWER }]), workdir: tempDir("streaming-query"), checkpointer: memoryCheckpointer() }
      })
    ) events.push(event)
    expect(events.flatMap((event) => event.type === "text_delta" ? [event.delta] : []).join("")).toBe(ANSWER)
    expect(events.at(-1)).toMatchObject({ type: "result", result: { text: ANSWER } })
  })

  it("a stream that reports an error, or ends before its finish, fails the call: no half message is logged", async () => {
    const parts = (ending: ReadonlyArray<Response.StreamPartEncoded>) =>
      Stream.fromIterable<Response.StreamPartEncoded>([
        { type: "text-start", id: "0" },
        { type: "text-delta", id: "0", delta: "I will del" },
        ...ending
      ])
    for (const [ending, expected] of [
      [[{ type: "error", error: { type: "overloaded_error", message: "Overloaded" } }], "the model's stream reported an error"],
      [[], "the model's stream ended before its finish"]
    ] as const) {
      const checkpointer = memoryCheckpointer()
      const brokenModel: ModelProvider = {
        name: "broken",
        defaultModelName: "broken",
        contextTokens: 1000,
        layer: () => Layer.effect(LanguageModel.LanguageModel, LanguageModel.make({
          generateText: () => Effect.dieMessage("a turn streams its model calls"),
          streamText: () => parts(ending)
        }))
      }
      const agent = createLiteAgent({ model: brokenModel, workdir: tempDir("streaming-broken"), checkpointer })
      opened.push(checkpointer, agent)
      const error = await agent.send("go").catch((caught: unknown) => caught)
      expect(error).toBeInstanceOf(ModelError)
      expect((error as ModelError).detail).toContain(expected)
      const tags = (await checkpointer.read(agent.sessionId)).map((stored) => stored.event._tag)
      expect(tags).not.toContain("AssistantMessage")
    }
  })
})
