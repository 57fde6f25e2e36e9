import { Effect, Stream, Chunk } from "effect"
import { describe, expect, it } from "vitest"
import {
  CheckpointConflictError,
  CheckpointerClosedError,
  InvalidEventError,
  InvalidSessionIdError,
  memoryCheckpointer,
  UserMessage
} from "../src/index.js"
import { Checkpointer } from "../src/core.js"

describe("memoryCheckpointer (promise facade)", () => {
  it("runs the contract as promises and rejects with the library's own error instances", async () => {
    const checkpointer = memoryCheckpointer()
    expect(await checkpointer.head("s")).toBe(0)
    expect(await checkpointer.append("s", [new UserMessage({ content: "hi", origin: "user" })])).toBe(1)
    const error = await checkpointer.append("s", [new UserMessage({ content: "late" })], 0).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(CheckpointConflictError)
    expect(error).toBeInstanceOf(Error)
    expect(error).toMatchObject({ sessionId: "s", expected: 0, actual: 1 })
    expect(String((error as Error).message)).toContain("expected head 0")
    expect(await checkpointer.read("s")).toHaveLength(1)
    await expect(checkpointer.head("../etc")).rejects.toBeInstanceOf(InvalidSessionIdError)
    expect((await checkpointer.list()).map((s) => s.id)).toEqual(["s"])
    expect(await checkpointer.truncate("s", 0, 1)).toBe(0)
    await checkpointer.delete("s")
    expect(await checkpointer.list()).toEqual([])
    await checkpointer.close()
  })

  it("accepts plain JSON events and validates them; a malformed batch stores nothing", async () => {
    const checkpointer = memoryCheckpointer()
    await checkpointer.append("s", [
      { _tag: "UserMessage", content: [{ type: "text", text: "json" }], origin: "user" },
      new UserMessage({ content: "instance" })
    ])
    const [first, second] = await checkpointer.read("s")
    expect(first?.event).toBeInstanceOf(UserMessage)
    expect(second?.seq).toBe(2)
    const bad = await checkpointer
      .append("s", [{ _tag: "UserMessage", content: "ok" }, { _tag: "UserMessage", content: { not: "text" } } as never])
      .catch((e: unknown) => e)
    expect(bad).toBeInstanceOf(InvalidEventError)
    expect(bad).toMatchObject({ index: 1 })
    expect(await checkpointer.head("s")).toBe(2)
    await checkpointer.close()
  })

  it("streams long sessions through readIterable, honouring sinceSeq and early exit", async () => {
    const checkpointer = memoryCheckpointer()
    await checkpointer.append("long", Array.from({ length: 5000 }, (_, i) => new UserMessage({ content: `m${i + 1}` })))
    let expected = 4001
    for await (const stored of checkpointer.readIterable("long", { sinceSeq: 4000 })) {
      expect(stored.seq).toBe(expected++)
    }
    expect(expected).toBe(5001)
    let seen = 0
    for await (const _ of checkpointer.readIterable("long")) {
      if (++seen === 10) break
    }
    expect(seen).toBe(10)
    const iterationError = await (async () => {
      for await (const _ of checkpointer.readIterable("bad/id")) void _
    })().catch((e: unknown) => e)
    expect(iterationError).toBeInstanceOf(InvalidSessionIdError)
    await checkpointer.close()
  })

  it("close is idempotent and every later call rejects with CheckpointerClosedError", async () => {
    const checkpointer = memoryCheckpointer()
    await checkpointer.append("s", [new UserMessage({ content: "x" })])
    await checkpointer.close()
    await checkpointer.close()
    await expect(checkpointer.head("s")).rejects.toBeInstanceOf(CheckpointerClosedError)
    await expect(checkpointer.append("s", [])).rejects.toBeInstanceOf(CheckpointerClosedError)
    await expect(checkpointer.list()).rejects.toBeInstanceOf(CheckpointerClosedError)
    const iterate = async () => {
      for await (const _ of checkpointer.readIterable("s")) void _
    }
    await expect(iterate()).rejects.toBeInstanceOf(CheckpointerClosedError)
  })

  it("exposes the same store as an Effect layer", async () => {
    const checkpointer = memoryCheckpointer()
    await checkpointer.append("s", [new UserMessage({ content: "from promises" })])
    const contents = await Effect.runPromise(
      Effect.flatMap(Checkpointer, (c) => Stream.runCollect(c.read("s"))).pipe(Effect.provide(checkpointer.layer))
    )
    expect(Chunk.toArray(contents).map((s) => (s.event as UserMessage).content)).toEqual(["from promises"])
    await checkpointer.close()
  })
})
