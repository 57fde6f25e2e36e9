/** The snapshot store: blobs kept once per session, refused when they lie, swept when unreferenced. */
import assert from "node:assert/strict"
import { Effect, FastCheck as fc, type Layer } from "effect"
import { Checkpointer, type CheckpointerService } from "../core/Checkpointer.js"
import { CheckpointConflictError, InvalidEventError, SnapshotBlobError } from "../core/errors.js"
import { AssistantMessage, FileSnapshot, type JsonValue, STORED_ARGUMENT_MIN_BYTES, UserMessage } from "../core/events.js"
import { blobReferences } from "../core/internal/blobs.js"
import { sha256Hex } from "../core/internal/sha256.js"
import { expectFailure, readAll } from "./helpers.js"
import { type ConformanceOptions, type ConformanceSuite, uniquePrefix } from "./runner.js"

const snapshotOf = (path: string, data: Uint8Array) =>
  new FileSnapshot({ toolUseId: "toolu_snap", path, state: { _tag: "content", data, mode: 0o644, size: data.length, sha256: sha256Hex(data) } })

/** Tool-call arguments large enough to be stored; the first is also one of the snapshot contents. */
const ARGUMENT_POOL = ["p", "q"].map((letter) => letter.repeat(STORED_ARGUMENT_MIN_BYTES))

/** A few distinct contents, so sequences reuse blobs across events, appends and truncates. */
const BLOB_POOL = [...Array.from({ length: 5 }, (_, i) => new Uint8Array(64 + i).fill(i + 1)), new TextEncoder().encode(ARGUMENT_POOL[0])]

type SnapshotOp =
  | { readonly op: "append"; readonly session: 0 | 1; readonly blobs: ReadonlyArray<number>; readonly arguments: ReadonlyArray<number> }
  | { readonly op: "truncate"; readonly session: 0 | 1; readonly keep: number }
  | { readonly op: "delete"; readonly session: 0 | 1 }
  | { readonly op: "sweep"; readonly session: 0 | 1 }

const snapshotOpArb: fc.Arbitrary<SnapshotOp> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant("append" as const),
      session: fc.constantFrom(0 as const, 1 as const),
      blobs: fc.array(fc.nat({ max: BLOB_POOL.length - 1 }), { maxLength: 3 }),
      arguments: fc.array(fc.nat({ max: ARGUMENT_POOL.length - 1 }), { maxLength: 2 })
    })
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("truncate" as const), session: fc.constantFrom(0 as const, 1 as const), keep: fc.nat({ max: 100 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("delete" as const), session: fc.constantFrom(0 as const, 1 as const) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("sweep" as const), session: fc.constantFrom(0 as const, 1 as const) }) }
)

const checkSnapshotInvariant = (c: CheckpointerService, id: string, swept: boolean, after: string) =>
  Effect.gen(function*() {
    const referenced = new Set<string>()
    for (const { event } of yield* readAll(c, id)) {
      for (const sha256 of blobReferences(event)) referenced.add(sha256)
    }
    for (const sha256 of referenced) {
      const data = yield* c.readSnapshot(id, sha256)
      assert.equal(sha256Hex(data), sha256, `${after}: blob ${sha256} reads back`)
    }
    const held = new Set((yield* c.listSnapshots(id)).map((blob) => blob.sha256))
    for (const sha256 of referenced) assert.ok(held.has(sha256), `${after}: referenced blob ${sha256} is listed`)
    if (swept) assert.deepEqual([...held].sort(), [...referenced].sort(), `${after}: a sweep leaves only referenced blobs`)
  })

const runSnapshotProperty = async <E>(layer: Layer.Layer<Checkpointer, E>, options: ConformanceOptions) => {
  await fc.assert(
    fc.asyncProperty(fc.array(snapshotOpArb, { minLength: 1, maxLength: 12 }), async (ops) => {
      const prefix = uniquePrefix("blob")
      await Effect.runPromise(Effect.scoped(Effect.flatMap(Checkpointer, (c) =>
        Effect.gen(function*() {
          const swept = [true, true]
          for (const [index, step] of ops.entries()) {
            const id = `${prefix}${step.session}`
            const after = `step ${index} (${JSON.stringify(step)})`
            switch (step.op) {
              case "append":
                yield* c.append(id, [
                  new UserMessage({ content: `u${index}` }),
                  ...step.arguments.map((argument, i) =>
                    new AssistantMessage({
                      content: [{ type: "tool_use", id: `toolu_${index}_${i}`, name: "write_file", input: { path: "f", content: ARGUMENT_POOL[argument]! } }]
                    })
                  ),
                  ...step.blobs.map((blob, i) => snapshotOf(`f${i}`, BLOB_POOL[blob]!))
                ])
                // New blobs are all referenced: an append keeps a swept store swept.
                break
              case "truncate": {
                const head = yield* c.head(id)
                yield* c.truncate(id, head === 0 ? 0 : step.keep % (head + 1))
                swept[step.session] = false
                break
              }
              case "delete":
                yield* c.delete(id)
                swept[step.session] = true
                break
              case "sweep":
                yield* c.sweepSnapshots(id)
                swept[step.session] = true
                break
            }
            yield* checkSnapshotInvariant(c, id, swept[step.session]!, after)
          }
        })).pipe(Effect.provide(layer))))
    }),
    { numRuns: Math.max(10, Math.round((options.propertyRuns ?? 200) / 4)), ...options.fastCheck }
  )
}

export const snapshotStoreTests = <E>({ layer, options, runner, test, timeoutMs }: ConformanceSuite<E>): void => {
  runner.describe("snapshot store", () => {
    test("a content snapshot is logged as a stored reference; its bytes are kept once per session", (c, p) =>
      Effect.gen(function*() {
        const id = p + "blobs"
        const bytes = new Uint8Array(4096).map((_, i) => (i * 7) % 256)
        yield* c.append(id, [snapshotOf("a.txt", bytes), snapshotOf("b.txt", bytes)])
        yield* c.append(id, [snapshotOf("a.txt", bytes), snapshotOf("c.txt", new Uint8Array([1]))])
        const states = (yield* readAll(c, id)).map((s) => (s.event as FileSnapshot).state)
        assert.deepEqual(states.map((state) => state._tag), ["stored", "stored", "stored", "stored"])
        const listed = yield* c.listSnapshots(id)
        assert.deepEqual(listed.map((blob) => blob.sha256).sort(), [sha256Hex(bytes), sha256Hex(new Uint8Array([1]))].sort())
        for (const blob of listed) assert.ok(blob.storedBytes > 0, "a stored size")
        const original = Array.from(bytes)
        const sha256 = sha256Hex(bytes)
        assert.deepEqual(Array.from(yield* c.readSnapshot(id, sha256)), original)
        // A caller changing its buffer afterwards changes nothing stored.
        bytes.fill(0)
        assert.deepEqual(Array.from(yield* c.readSnapshot(id, sha256)), original)
      }))

    test("a hash the store does not hold, or no hash at all, is SnapshotBlobError; stores are per session", (c, p) =>
      Effect.gen(function*() {
        const id = p + "s1"
        const bytes = new Uint8Array([5, 6, 7])
        yield* c.append(id, [snapshotOf("x", bytes)])
        const other = yield* expectFailure(c.readSnapshot(p + "s2", sha256Hex(bytes)), SnapshotBlobError, "other session")
        assert.equal(other.reason, "missing")
        for (const bad of ["0".repeat(64), "../log", "A".repeat(64), ""]) {
          const error = yield* expectFailure(c.readSnapshot(id, bad), SnapshotBlobError, `hash ${bad}`)
          assert.equal(error.reason, "missing")
        }
      }))

    test("bytes that do not match their hash, or a reference to a blob not held, are refused and store nothing", (c, p) =>
      Effect.gen(function*() {
        const id = p + "bad"
        yield* c.append(id, [new UserMessage({ content: "before" })])
        const bytes = new Uint8Array([1, 2, 3])
        const lying = new FileSnapshot({
          toolUseId: "toolu_1",
          path: "x",
          state: { _tag: "content", data: bytes, mode: 0o644, size: 3, sha256: sha256Hex(new Uint8Array([9])) }
        })
        const wrongSize = new FileSnapshot({
          toolUseId: "toolu_1",
          path: "x",
          state: { _tag: "content", data: bytes, mode: 0o644, size: 4, sha256: sha256Hex(bytes) }
        })
        const dangling = new FileSnapshot({
          toolUseId: "toolu_1",
          path: "x",
          state: { _tag: "stored", sha256: "b".repeat(64), size: 3, mode: 0o644 }
        })
        for (const event of [lying, wrongSize, dangling]) {
          const error = yield* expectFailure(c.append(id, [new UserMessage({ content: "x" }), event]), InvalidEventError, event.state._tag)
          assert.equal(error.index, 1)
        }
        assert.equal(yield* c.head(id), 1)
        assert.deepEqual(yield* c.listSnapshots(id), [])
        // A reference to a blob the session does hold is fine (a copy of an event, say).
        yield* c.append(id, [snapshotOf("y", bytes)])
        yield* c.append(id, [new FileSnapshot({ toolUseId: "toolu_2", path: "z", state: { _tag: "stored", sha256: sha256Hex(bytes), size: 3, mode: 0o600 } })])
        assert.equal(yield* c.head(id), 3)
      }))

    test("large tool-call arguments go to the store, once, shared with snapshots of the same bytes", (c, p) =>
      Effect.gen(function*() {
        const id = p + "args"
        // 2 UTF-8 bytes per character: the threshold is in bytes.
        const big = "é".repeat(STORED_ARGUMENT_MIN_BYTES / 2)
        const justBelow = "x".repeat(STORED_ARGUMENT_MIN_BYTES - 1)
        const loneSurrogate = "\ud800".repeat(STORED_ARGUMENT_MIN_BYTES)
        const bigBytes = new TextEncoder().encode(big)
        yield* c.append(id, [
          new AssistantMessage({
            content: [
              { type: "text", text: "writing" },
              { type: "tool_use", id: "toolu_a", name: "write_file", input: { path: "a.txt", content: big } },
              { type: "tool_use", id: "toolu_b", name: "write_file", input: { path: "b.txt", content: justBelow } },
              { type: "tool_use", id: "toolu_c", name: "write_file", input: { path: "c.txt", content: loneSurrogate } },
              { type: "tool_use", id: "toolu_d", name: "write_file", input: { path: "d.txt", content: big, mode: 0o600 } }
            ]
          })
        ])
        const [stored] = yield* readAll(c, id)
        const blocks = (stored!.event as AssistantMessage).content
        const reference = { key: "content", sha256: sha256Hex(bigBytes), size: bigBytes.length }
        assert.deepEqual(blocks[1], { type: "tool_use", id: "toolu_a", name: "write_file", input: { path: "a.txt" }, storedArguments: [reference] })
        assert.deepEqual(blocks[2], { type: "tool_use", id: "toolu_b", name: "write_file", input: { path: "b.txt", content: justBelow } })
        assert.deepEqual(blocks[3], { type: "tool_use", id: "toolu_c", name: "write_file", input: { path: "c.txt", content: loneSurrogate } })
        assert.deepEqual(blocks[4], { type: "tool_use", id: "toolu_d", name: "write_file", input: { path: "d.txt", mode: 0o600 }, storedArguments: [reference] })
        assert.equal(new TextDecoder().decode(yield* c.readSnapshot(id, reference.sha256)), big)
        // The file those bytes were written to, snapshotted later, shares the blob.
        yield* c.append(id, [snapshotOf("a.txt", bigBytes)])
        assert.deepEqual((yield* c.listSnapshots(id)).map((blob) => blob.sha256), [reference.sha256])
        // An event read back can be appended again as it is (its blob is held).
        yield* c.append(id, [stored!.event])
        assert.equal(yield* c.head(id), 3)
        assert.equal(yield* c.sweepSnapshots(id), 0, "referenced by the tool calls and the snapshot")
      }))

    test("stored arguments that are ambiguous, repeated or not held are refused and change nothing", (c, p) =>
      Effect.gen(function*() {
        const id = p + "badargs"
        const bytes = new TextEncoder().encode("y".repeat(STORED_ARGUMENT_MIN_BYTES))
        yield* c.append(id, [snapshotOf("y.txt", bytes)])
        const held = { key: "content", sha256: sha256Hex(bytes), size: bytes.length }
        const callWith = (input: JsonValue, storedArguments: ReadonlyArray<typeof held>) =>
          new AssistantMessage({ content: [{ type: "tool_use", id: "toolu_x", name: "write_file", input, storedArguments }] })
        const refused = [
          ["the key is also in the input", callWith({ path: "y.txt", content: "inline" }, [held])],
          ["the key is listed twice", callWith({ path: "y.txt" }, [held, held])],
          ["the blob is not held", callWith({ path: "y.txt" }, [{ ...held, sha256: "c".repeat(64) }])],
          ["the input is not an object", callWith("text", [held])]
        ] as const
        for (const [why, event] of refused) {
          const error = yield* expectFailure(c.append(id, [new UserMessage({ content: "x" }), event]), InvalidEventError, why)
          assert.equal(error.index, 1, why)
        }
        assert.equal(yield* c.head(id), 1)
        yield* c.append(id, [callWith({ path: "y.txt" }, [held])])
        assert.equal(yield* c.head(id), 2)
      }))

    test("an append refused on its expected head stores no blob", (c, p) =>
      Effect.gen(function*() {
        const id = p + "conflict"
        yield* c.append(id, [new UserMessage({ content: "one" })])
        yield* expectFailure(c.append(id, [snapshotOf("x", new Uint8Array([4]))], 0), CheckpointConflictError, "stale head")
        assert.deepEqual(yield* c.listSnapshots(id), [])
      }))

    test("truncate keeps every referenced blob; sweep removes exactly the unreferenced; delete removes all", (c, p) =>
      Effect.gen(function*() {
        const id = p + "sweep"
        const [a, b, shared] = [new Uint8Array([1]), new Uint8Array([2]), new Uint8Array([3])]
        yield* c.append(id, [snapshotOf("a", a), snapshotOf("s", shared)])
        yield* c.append(id, [snapshotOf("b", b), snapshotOf("s2", shared)])
        yield* c.truncate(id, 2)
        assert.equal((yield* c.listSnapshots(id)).length, 3, "truncate alone removes no blob")
        assert.equal(yield* c.sweepSnapshots(id), 1)
        assert.deepEqual((yield* c.listSnapshots(id)).map((blob) => blob.sha256).sort(), [sha256Hex(a), sha256Hex(shared)].sort())
        yield* expectFailure(c.readSnapshot(id, sha256Hex(b)), SnapshotBlobError, "swept blob")
        assert.deepEqual(Array.from(yield* c.readSnapshot(id, sha256Hex(shared))), [3])
        assert.equal(yield* c.sweepSnapshots(id), 0, "a second sweep finds nothing")
        yield* c.delete(id)
        assert.deepEqual(yield* c.listSnapshots(id), [])
        assert.equal(yield* c.sweepSnapshots(p + "never"), 0)
      }))

    test("a sweep limited to some hashes deletes only those of them no event references", (c, p) =>
      Effect.gen(function*() {
        const id = p + "sweep-only"
        const [a, b, kept] = [new Uint8Array([5]), new Uint8Array([6]), new Uint8Array([7])]
        yield* c.append(id, [snapshotOf("k", kept)])
        yield* c.append(id, [snapshotOf("a", a)])
        yield* c.append(id, [snapshotOf("b", b)])
        yield* c.truncate(id, 1)
        // a and b are both unreferenced now; only a is named, with a referenced blob and one never stored.
        const never = sha256Hex(new Uint8Array([8]))
        assert.equal(yield* c.sweepSnapshots(id, { only: [sha256Hex(a), sha256Hex(kept), never] }), 1)
        assert.deepEqual((yield* c.listSnapshots(id)).map((blob) => blob.sha256).sort(), [sha256Hex(b), sha256Hex(kept)].sort())
        assert.equal(yield* c.sweepSnapshots(id, { only: [] }), 0)
        assert.equal(yield* c.sweepSnapshots(id), 1, "a full sweep finds b")
      }))

    runner.it(
      "random append/truncate/delete/sweep sequences never leave a referenced blob missing, nor an unreferenced one after a sweep",
      () => runSnapshotProperty(layer, options),
      Math.max(timeoutMs, 600_000)
    )
  })
}
