/**
 * iterateStream, the promise facade's async iteration of a stream: one item handed over at a
 * time (a slow consumer suspends the producer; nothing is lost), the stream's own errors,
 * and leaving the loop (or an interruption from outside) stops the run.
 */
import { Data, Effect, Exit, Fiber, Layer, ManagedRuntime, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { iterateStream } from "../src/facade/run.js"

const runtimes: Array<ManagedRuntime.ManagedRuntime<never, never>> = []
const newRuntime = () => {
  const runtime = ManagedRuntime.make(Layer.empty)
  runtimes.push(runtime)
  return runtime
}
afterEach(async () => {
  for (const runtime of runtimes.splice(0)) await runtime.dispose()
})

/** Give every other task (the producer's fiber among them) many turns to run. */
const pause = async () => {
  for (let round = 0; round < 20; round++) {
    await new Promise<void>((resolve) => setImmediate(resolve))
    await new Promise<void>((resolve) => setTimeout(resolve, 0))
  }
}

class Broken extends Data.TaggedError("Broken")<{ readonly at: number }> {}

describe("iterateStream", () => {
  it("a slow consumer of a fast producer gets every item, and the producer waits for it", async () => {
    const total = 5_000
    let produced = 0
    const stream = Stream.range(1, total).pipe(Stream.tap(() => Effect.sync(() => void produced++)))
    const seen: Array<number> = []
    const producedAtPauses: Array<number> = []
    for await (const item of iterateStream(newRuntime(), stream)) {
      seen.push(item)
      if (seen.length % 1_000 === 0) {
        await pause()
        producedAtPauses.push(produced)
      }
    }
    expect(seen).toEqual(Array.from({ length: total }, (_, index) => index + 1))
    // Nothing is buffered beyond the item in the consumer's hands: the producer is suspended
    // until the consumer asks for the next one, however long it pauses.
    expect(producedAtPauses).toEqual([1_000, 2_000, 3_000, 4_000, 5_000])
  })

  it("break interrupts the run: its finalizers run and the producer stops", async () => {
    let produced = 0
    let finalized = false
    let fiber: Fiber.RuntimeFiber<void, unknown> | undefined
    const endless = Stream.iterate(1, (n) => n + 1).pipe(
      Stream.tap(() => Effect.sync(() => void produced++)),
      Stream.ensuring(Effect.sync(() => {
        finalized = true
      }))
    )
    for await (const item of iterateStream(newRuntime(), endless, { onFiber: (running) => (fiber = running) })) {
      if (item === 10) break
    }
    expect(finalized).toBe(true)
    const exit = fiber?.unsafePoll()
    expect(exit !== undefined && exit !== null && Exit.isInterrupted(exit)).toBe(true)
    const producedAtBreak = produced
    await pause()
    expect(produced).toBe(producedAtBreak)
    expect(producedAtBreak).toBe(10)
  })

  it("throws the stream's own error instance after the items before it", async () => {
    const failing = Stream.concat(Stream.make(1, 2), Stream.fail(new Broken({ at: 3 })))
    const seen: Array<number> = []
    const error = await (async () => {
      for await (const item of iterateStream(newRuntime(), failing)) seen.push(item)
    })().catch((caught: unknown) => caught)
    expect(seen).toEqual([1, 2])
    expect(error).toBeInstanceOf(Broken)
    expect(error).toMatchObject({ at: 3 })
  })

  it("an interruption from outside ends the loop with the `interrupted` error", async () => {
    class Closed extends Error {}
    let fiber: Fiber.RuntimeFiber<void, unknown> | undefined
    const seen: Array<number> = []
    const error = await (async () => {
      const items = iterateStream(newRuntime(), Stream.iterate(1, (n) => n + 1), {
        onFiber: (running) => (fiber = running),
        interrupted: () => new Closed()
      })
      for await (const item of items) {
        seen.push(item)
        if (item === 3 && fiber !== undefined) await Effect.runPromise(Fiber.interrupt(fiber))
      }
    })().catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(Closed)
    expect(seen).toEqual([1, 2, 3])
  })
})
