/** Versions: the generation tells a rewritten log from the one a reader saw, whatever its head. */
import assert from "node:assert/strict"
import { Effect } from "effect"
import { UserMessage } from "../core/events.js"
import type { ConformanceSuite } from "./runner.js"

export const generationTests = <E>({ runner, test }: ConformanceSuite<E>): void => {
  runner.describe("generations", () => {
    test("an append keeps the generation; every truncate and delete changes it", (c, p) =>
      Effect.gen(function*() {
        const id = p + "gen"
        assert.equal((yield* c.version(id)).head, 0)
        yield* c.append(id, [new UserMessage({ content: "1" }), new UserMessage({ content: "2" })])
        const first = yield* c.version(id)
        yield* c.append(id, [new UserMessage({ content: "3" })])
        const appended = yield* c.version(id)
        assert.deepEqual([appended.head, appended.generation], [3, first.generation])
        yield* c.truncate(id, 3)
        assert.equal((yield* c.version(id)).generation, first.generation, "a truncate to the head changes nothing")
        yield* c.truncate(id, 1)
        const truncated = yield* c.version(id)
        assert.equal(truncated.head, 1)
        assert.notEqual(truncated.generation, first.generation)
        // Truncate and re-append up to the same head: the head alone cannot tell, the generation does.
        yield* c.append(id, [new UserMessage({ content: "2'" }), new UserMessage({ content: "3'" })])
        const reappended = yield* c.version(id)
        assert.equal(reappended.head, appended.head)
        assert.notEqual(reappended.generation, appended.generation)
        yield* c.delete(id)
        yield* c.append(id, [new UserMessage({ content: "1" }), new UserMessage({ content: "2" }), new UserMessage({ content: "3" })])
        const recreated = yield* c.version(id)
        assert.equal(recreated.head, 3)
        assert.ok(![first.generation, truncated.generation, reappended.generation].includes(recreated.generation), "a re-created session")
        yield* c.truncate(id, 0)
        assert.notEqual((yield* c.version(id)).generation, recreated.generation)
      }))
  })
}
