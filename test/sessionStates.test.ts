/**
 * Incremental session state: the fold is kept between calls and only new events are folded,
 * and another writer's truncate — even re-appended up to the same head — is never missed.
 */
import { Effect, Layer, Ref, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { Checkpointer, type CheckpointerService, MemoryCheckpointer, SessionStates, UserMessage } from "../src/core.js"
import { createLiteAgent, memoryCheckpointer } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { tempDir } from "./support/agent.js"

/** A checkpointer that counts the events its reads return. */
const counting = Effect.gen(function*() {
  const eventsRead = yield* Ref.make(0)
  const inner = yield* Checkpointer
  const service: CheckpointerService = {
    ...inner,
    read: (sessionId, options) => Stream.tap(inner.read(sessionId, options), () => Ref.update(eventsRead, (n) => n + 1))
  }
  return { service, eventsRead }
})

const contents = (folded: SessionStates.FoldedSession) =>
  folded.state.messages.toArray().map((entry) => (entry.event as UserMessage).content)

describe("SessionStates", () => {
  it("folds only the events appended since the last call", () =>
    Effect.runPromise(Effect.gen(function*() {
      const { eventsRead, service } = yield* counting
      const states = yield* SessionStates.make().pipe(Effect.provideService(Checkpointer, service))
      yield* service.append("s", Array.from({ length: 100 }, (_, i) => new UserMessage({ content: `m${i}` })))
      expect((yield* states.get("s")).state.head).toBe(100)
      expect(yield* Ref.get(eventsRead)).toBe(100)
      for (let i = 0; i < 10; i++) {
        yield* service.append("s", [new UserMessage({ content: `n${i}` })])
        expect((yield* states.get("s")).state.head).toBe(101 + i)
      }
      // 100 for the first fold, then one per call: never the whole log again.
      expect(yield* Ref.get(eventsRead)).toBe(110)
    }).pipe(Effect.scoped, Effect.provide(MemoryCheckpointer.layer))))

  it("a truncate by another writer, re-appended up to the same head, is detected and refolded", () =>
    Effect.runPromise(Effect.gen(function*() {
      const checkpointer = yield* Checkpointer
      const states = yield* SessionStates.make()
      yield* checkpointer.append("s", [new UserMessage({ content: "a" }), new UserMessage({ content: "b" })])
      const before = yield* states.get("s")
      expect(contents(before)).toEqual(["a", "b"])
      // Another writer: cut to 1 and append a different second event. Same head (2), new generation.
      yield* checkpointer.truncate("s", 1)
      yield* checkpointer.append("s", [new UserMessage({ content: "B" })])
      const after = yield* states.get("s")
      expect(after.state.head).toBe(2)
      expect(after.generation).not.toBe(before.generation)
      expect(contents(after)).toEqual(["a", "B"])
      // And a delete, then re-creation.
      yield* checkpointer.delete("s")
      yield* checkpointer.append("s", [new UserMessage({ content: "x" }), new UserMessage({ content: "y" })])
      expect(contents(yield* states.get("s"))).toEqual(["x", "y"])
    }).pipe(Effect.scoped, Effect.provide(MemoryCheckpointer.layer))))

  it("keeps at most its capacity of sessions, dropping the least recently used", () =>
    Effect.runPromise(Effect.gen(function*() {
      const { eventsRead, service } = yield* counting
      const states = yield* SessionStates.make(2).pipe(Effect.provideService(Checkpointer, service))
      for (const id of ["a", "b", "c"]) yield* service.append(id, [new UserMessage({ content: id })])
      for (const id of ["a", "b", "c"]) yield* states.get(id)
      expect(yield* Ref.get(eventsRead)).toBe(3)
      yield* states.get("c")
      expect(yield* Ref.get(eventsRead)).toBe(3)
      yield* states.get("a") // evicted: folded again
      expect(yield* Ref.get(eventsRead)).toBe(4)
    }).pipe(Effect.scoped, Effect.provide(MemoryCheckpointer.layer))))
})

describe("the agent folds incrementally", () => {
  it("20 turns read each event a bounded number of times, not the whole log every turn", async () => {
    const turns = Array.from({ length: 20 }, (_, i) => [
      { toolCalls: [{ name: "write_file", input: { path: `f${i % 3}.txt`, content: `v${i}` } }] },
      { text: `done ${i}` }
    ]).flat()
    let eventsRead = 0
    const base = memoryCheckpointer()
    const countingLayer = Layer.effect(
      Checkpointer,
      Effect.map(Checkpointer, (inner): CheckpointerService => ({
        ...inner,
        read: (sessionId, options) => Stream.tap(inner.read(sessionId, options), () => Effect.sync(() => eventsRead++))
      }))
    ).pipe(Layer.provide(base.layer))
    const checkpointer = { ...base, layer: countingLayer }
    const agent = createLiteAgent({ model: scripted(turns), workdir: tempDir("incremental"), checkpointer })
    try {
      for (let i = 0; i < 20; i++) await agent.send(`prompt ${i}`)
      const head = await base.head(agent.sessionId)
      expect(head).toBeGreaterThan(100)
      // Folding the whole log each turn would read about head * 20 / 2 events.
      expect(eventsRead).toBeLessThan(head * 2)
      expect((await agent.listCheckpoints(agent.sessionId)).length).toBe(20)
    } finally {
      await agent.close()
      await base.close()
    }
  })
})
