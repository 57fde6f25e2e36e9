/** `follow`: the stored events, then each new one, and a reset whenever the log is rewritten. */
import assert from "node:assert/strict"
import { Effect, Queue, Stream } from "effect"
import { type CheckpointerService, type FollowItem, type FollowOptions, NO_GENERATION } from "../core/Checkpointer.js"
import { ConfigurationError, InvalidSeqError, InvalidSessionIdError } from "../core/errors.js"
import { UserMessage } from "../core/events.js"
import { expectFailure, sleep } from "./helpers.js"
import type { ConformanceSuite } from "./runner.js"

/** Follow `id` into a queue, for as long as the test's scope lasts. */
const follower = (c: CheckpointerService, id: string, options?: FollowOptions) =>
  Effect.gen(function*() {
    const items = yield* Queue.unbounded<FollowItem>()
    yield* Effect.forkScoped(Stream.runForEach(c.follow(id, options), (item) => Queue.offer(items, item)))
    /** The next `n` items, or a failure naming what did not come. */
    const next = (n: number, what: string) =>
      Effect.forEach(Array.from({ length: n }), () => Queue.take(items)).pipe(
        Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => new Error(`follow: timed out waiting for ${what}`) })
      )
    return { next, pending: Queue.size(items) }
  })
const described = (item: FollowItem) =>
  item.type === "event" ? `${item.stored.seq}:${String((item.stored.event as UserMessage).content)}` : `reset ${item.head}`
const prompts = (...texts: ReadonlyArray<string>) => texts.map((text) => new UserMessage({ content: text }))

export const followTests = <E>({ runner, test }: ConformanceSuite<E>): void => {
  runner.describe("follow", () => {
    test("delivers the stored events, then each new one as it is appended, in order and once", (c, p) =>
      Effect.gen(function*() {
        const id = p + "s"
        yield* c.append(id, prompts("a", "b", "c"))
        const { next, pending } = yield* follower(c, id)
        assert.deepEqual((yield* next(3, "the stored events")).map(described), ["1:a", "2:b", "3:c"])
        yield* c.append(id, prompts("d", "e"))
        yield* c.append(id, prompts("f"), 5)
        assert.deepEqual((yield* next(3, "the new events")).map(described), ["4:d", "5:e", "6:f"])
        yield* sleep(100)
        assert.equal(yield* pending, 0, "nothing delivered twice")
      }))

    test("starts after sinceSeq; a truncate is a reset, then the new log from seq 1", (c, p) =>
      Effect.gen(function*() {
        const id = p + "s"
        yield* c.append(id, prompts("a", "b", "c", "d", "e"))
        const { next } = yield* follower(c, id, { sinceSeq: 3 })
        assert.deepEqual((yield* next(2, "the events after 3")).map(described), ["4:d", "5:e"])
        yield* c.truncate(id, 2, 5)
        const [reset] = yield* next(1, "the reset")
        assert.equal(reset?.type, "reset")
        yield* c.append(id, prompts("x"), 2)
        const version = yield* c.version(id)
        if (reset?.type === "reset") assert.equal(reset.generation, version.generation)
        // The current log whole, whatever the follower saw of it before the append.
        const after: Array<string> = []
        while (after.length < 3) after.push(...(yield* next(1, "the new log")).map(described))
        assert.deepEqual(after, ["1:a", "2:b", "3:x"])
      }))

    test("sinceSeq past the head (the follower knows a log that is gone) is a reset first", (c, p) =>
      Effect.gen(function*() {
        const id = p + "s"
        yield* c.append(id, prompts("a", "b"))
        const { next } = yield* follower(c, id, { sinceSeq: 10 })
        assert.deepEqual((yield* next(3, "the reset and the log")).map(described), ["reset 2", "1:a", "2:b"])
      }))

    test("with the generation its events came from, a log rewritten and grown back past sinceSeq is a reset first", (c, p) =>
      Effect.gen(function*() {
        const id = p + "s"
        yield* c.append(id, prompts("a", "b", "c"))
        const seen = yield* c.version(id)
        yield* c.truncate(id, 1)
        yield* c.append(id, prompts("x", "y", "z"))
        const { next } = yield* follower(c, id, { sinceSeq: 2, generation: seen.generation })
        assert.deepEqual((yield* next(5, "the reset and the new log")).map(described), ["reset 4", "1:a", "2:x", "3:y", "4:z"])
        // The generation it still has is no reason to reset.
        const current = yield* c.version(id)
        const { next: nextSame } = yield* follower(c, id, { sinceSeq: 2, generation: current.generation })
        assert.deepEqual((yield* nextSame(2, "the events after 2")).map(described), ["3:y", "4:z"])
      }))

    test("waits for a session that does not exist yet; its delete is a reset to head 0", (c, p) =>
      Effect.gen(function*() {
        const id = p + "later"
        const { next } = yield* follower(c, id)
        yield* sleep(50)
        yield* c.append(id, prompts("a", "b"))
        assert.deepEqual((yield* next(2, "the first events")).map(described), ["1:a", "2:b"])
        yield* c.delete(id)
        const [reset] = yield* next(1, "the reset of the delete")
        assert.deepEqual(reset, { type: "reset", head: 0, generation: NO_GENERATION })
        yield* c.append(id, prompts("again"))
        assert.deepEqual((yield* next(1, "the re-created session")).map(described), ["1:again"])
      }))

    test("refuses bad arguments before following anything", (c, p) =>
      Effect.gen(function*() {
        const first = (options: unknown, id = p + "s") =>
          Stream.runHead(c.follow(id, options as FollowOptions))
        yield* expectFailure(first({ sinceSeq: -1 }), InvalidSeqError, "sinceSeq -1")
        yield* expectFailure(first({ sinceSeq: 1.5 }), InvalidSeqError, "sinceSeq 1.5")
        yield* expectFailure(first({ since: 1 }), ConfigurationError, "an unknown option")
        yield* expectFailure(first({ pollMs: 0 }), ConfigurationError, "pollMs 0")
        yield* expectFailure(first(undefined, "a/b"), InvalidSessionIdError, "a bad session id")
      }))
  })
}
