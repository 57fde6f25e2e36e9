/** The object store: objects kept once for the whole store, refused when they lie, collected when no log references them. */
import assert from "node:assert/strict"
import { Effect, FastCheck as fc, type Layer } from "effect"
import { Checkpointer, type CheckpointerService } from "../core/Checkpointer.js"
import { CheckpointConflictError, ConfigurationError, InvalidEventError, SnapshotBlobError } from "../core/errors.js"
import { AssistantMessage, FileSnapshot, type JsonValue, STORED_ARGUMENT_MIN_BYTES, UserMessage, WorkspaceCaptured } from "../core/events.js"
import { blobReferences } from "../core/internal/blobs.js"
import { sha256Hex } from "../core/internal/sha256.js"
import { DEFAULT_GRACE_MS, type GcOptions, MIN_GRACE_MS } from "../core/internal/objectCollection.js"
import { expectFailure, readAll, shiftedBy } from "./helpers.js"
import { manifestCapture } from "./manifestSamples.js"
import { type ConformanceOptions, type ConformanceSuite, uniquePrefix } from "./runner.js"

const snapshotOf = (path: string, data: Uint8Array) =>
  new FileSnapshot({ toolUseId: "toolu_snap", path, state: { _tag: "content", data, mode: 0o644, size: data.length, sha256: sha256Hex(data) } })

/** Past every grace period: a collection run this much later deletes whatever no log references. */
const LATER_MS = 2 * DEFAULT_GRACE_MS

/** Tool-call arguments large enough to be stored, and a few contents; the first argument is also one of the contents. Unique to `salt`: the store is shared. */
const poolsFor = (salt: string) => {
  const argumentPool = ["p", "q"].map((letter) => (salt + letter).repeat(Math.ceil(STORED_ARGUMENT_MIN_BYTES / (salt.length + 1))))
  const blobPool = [
    ...Array.from({ length: 5 }, (_, i) => new TextEncoder().encode(`${salt}:${i}:`.repeat(8 + i))),
    new TextEncoder().encode(argumentPool[0])
  ]
  return { argumentPool, blobPool }
}
const POOL_BLOBS = 6
const POOL_ARGUMENTS = 2

type SnapshotOp =
  | { readonly op: "append"; readonly session: 0 | 1; readonly blobs: ReadonlyArray<number>; readonly arguments: ReadonlyArray<number> }
  | { readonly op: "truncate"; readonly session: 0 | 1; readonly keep: number }
  | { readonly op: "delete"; readonly session: 0 | 1 }
  | { readonly op: "gc"; readonly later: boolean }

const snapshotOpArb: fc.Arbitrary<SnapshotOp> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant("append" as const),
      session: fc.constantFrom(0 as const, 1 as const),
      blobs: fc.array(fc.nat({ max: POOL_BLOBS - 1 }), { maxLength: 3 }),
      arguments: fc.array(fc.nat({ max: POOL_ARGUMENTS - 1 }), { maxLength: 2 })
    })
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("truncate" as const), session: fc.constantFrom(0 as const, 1 as const), keep: fc.nat({ max: 100 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant("delete" as const), session: fc.constantFrom(0 as const, 1 as const) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant("gc" as const), later: fc.boolean() }) }
)

/** The objects the sessions' events reference. */
const referencedBy = (c: CheckpointerService, ids: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const referenced = new Set<string>()
    for (const id of ids) {
      for (const { event } of yield* readAll(c, id)) {
        for (const sha256 of blobReferences(event)) referenced.add(sha256)
      }
    }
    return referenced
  })

/**
 * Every object a session references reads back and is listed for it; after a collection run
 * past the grace period, the pool's objects no session references are gone.
 */
const checkSnapshotInvariant = (c: CheckpointerService, ids: ReadonlyArray<string>, pool: ReadonlyArray<Uint8Array>, collected: boolean, after: string) =>
  Effect.gen(function*() {
    for (const id of ids) {
      const referenced = yield* referencedBy(c, [id])
      for (const sha256 of referenced) {
        const data = yield* c.readSnapshot(id, sha256)
        assert.equal(sha256Hex(data), sha256, `${after}: object ${sha256} reads back`)
      }
      const listed = (yield* c.listSnapshots(id)).map((object) => object.sha256).sort()
      assert.deepEqual(listed, [...referenced].sort(), `${after}: ${id} lists what it references`)
    }
    if (!collected) return
    const referenced = yield* referencedBy(c, ids)
    for (const data of pool) {
      const sha256 = sha256Hex(data)
      if (referenced.has(sha256)) continue
      const gone = yield* Effect.flip(c.readSnapshot(ids[0]!, sha256))
      assert.ok(gone instanceof SnapshotBlobError && gone.reason === "missing", `${after}: unreferenced ${sha256} was collected`)
    }
  })

const runSnapshotProperty = async <E>(layer: Layer.Layer<Checkpointer, E>, options: ConformanceOptions) => {
  await fc.assert(
    fc.asyncProperty(fc.array(snapshotOpArb, { minLength: 1, maxLength: 12 }), async (ops) => {
      const prefix = uniquePrefix("blob")
      const { argumentPool, blobPool } = poolsFor(prefix)
      const ids = [`${prefix}0`, `${prefix}1`]
      await Effect.runPromise(Effect.scoped(Effect.flatMap(Checkpointer, (c) =>
        Effect.gen(function*() {
          let collected = false
          for (const [index, step] of ops.entries()) {
            const after = `step ${index} (${JSON.stringify(step)})`
            switch (step.op) {
              case "append":
                yield* c.append(ids[step.session]!, [
                  new UserMessage({ content: `u${index}` }),
                  ...step.arguments.map((argument, i) =>
                    new AssistantMessage({
                      content: [{ type: "tool_use", id: `toolu_${index}_${i}`, name: "write_file", input: { path: "f", content: argumentPool[argument]! } }]
                    })
                  ),
                  ...step.blobs.map((blob, i) => snapshotOf(`f${i}`, blobPool[blob]!))
                ])
                break
              case "truncate": {
                const id = ids[step.session]!
                const head = yield* c.head(id)
                yield* c.truncate(id, head === 0 ? 0 : step.keep % (head + 1))
                break
              }
              case "delete":
                yield* c.delete(ids[step.session]!)
                break
              case "gc":
                yield* (step.later ? shiftedBy(LATER_MS)(c.gc()) : c.gc())
                break
            }
            // An append, truncate or delete may leave unreferenced objects: only a later collection removes them.
            collected = step.op === "gc" ? step.later : step.op === "append" ? collected : false
            yield* checkSnapshotInvariant(c, ids, blobPool, collected, after)
          }
          // Leave the shared store as it was, bar objects: later collections read every log.
          for (const id of ids) yield* c.delete(id)
        })).pipe(Effect.provide(layer))))
    }),
    { numRuns: Math.max(10, Math.round((options.propertyRuns ?? 200) / 4)), ...options.fastCheck }
  )
}

export const snapshotStoreTests = <E>({ layer, options, runner, test, timeoutMs }: ConformanceSuite<E>): void => {
  runner.describe("object store", () => {
    test("a content snapshot is logged as a stored reference; its bytes are one object for every session", (c, p) =>
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
        // Another session storing the same bytes references the same object.
        const other = p + "other"
        yield* c.append(other, [snapshotOf("copy.txt", new Uint8Array(original))])
        assert.deepEqual(yield* c.listSnapshots(other), listed.filter((blob) => blob.sha256 === sha256))
        assert.deepEqual((yield* c.stats(other)).snapshots, 1)
        assert.deepEqual(Array.from(yield* c.readSnapshot(other, sha256)), original)
      }))

    test("a hash the store does not hold, or no hash at all, is SnapshotBlobError", (c, p) =>
      Effect.gen(function*() {
        const id = p + "s1"
        const bytes = new TextEncoder().encode(p + "held")
        yield* c.append(id, [snapshotOf("x", bytes)])
        const absent = yield* expectFailure(c.readSnapshot(id, sha256Hex(new TextEncoder().encode(p + "never stored"))), SnapshotBlobError, "never stored")
        assert.equal(absent.reason, "missing")
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
        assert.deepEqual((yield* c.listSnapshots(id)).map((blob) => blob.sha256), [reference.sha256], "the tool calls and the snapshot name one object")
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

    test("an append refused on its expected head stores no object", (c, p) =>
      Effect.gen(function*() {
        const id = p + "conflict"
        yield* c.append(id, [new UserMessage({ content: "one" })])
        const bytes = new TextEncoder().encode(p + "conflict")
        yield* expectFailure(c.append(id, [snapshotOf("x", bytes)], 0), CheckpointConflictError, "stale head")
        assert.deepEqual(yield* c.listSnapshots(id), [])
        yield* expectFailure(c.readSnapshot(id, sha256Hex(bytes)), SnapshotBlobError, "nothing stored")
      }))

    test("gc deletes the objects no log references once they are older than the grace period; never a referenced one", (c, p) =>
      Effect.gen(function*() {
        const id = p + "gc"
        const other = p + "gc-other"
        const [a, b, shared] = ["a", "b", "shared"].map((name) => new TextEncoder().encode(`${p}:${name}`))
        yield* c.append(id, [snapshotOf("a", a!), snapshotOf("s", shared!)])
        yield* c.append(id, [snapshotOf("b", b!), snapshotOf("s2", shared!)])
        yield* c.append(other, [snapshotOf("s", shared!)])
        yield* c.truncate(id, 1)
        assert.deepEqual(Array.from(yield* c.readSnapshot(id, sha256Hex(b!))), Array.from(b!), "a truncate alone deletes no object")
        // Just stored: kept for the grace period, whoever references it.
        const now = yield* c.gc()
        assert.ok(now.recent >= 1 && now.referenced >= 2, JSON.stringify(now))
        assert.deepEqual(Array.from(yield* c.readSnapshot(id, sha256Hex(b!))), Array.from(b!))
        const later = yield* shiftedBy(LATER_MS)(c.gc())
        assert.ok(later.deleted >= 1 && later.freedBytes > 0, JSON.stringify(later))
        assert.equal((yield* expectFailure(c.readSnapshot(id, sha256Hex(b!)), SnapshotBlobError, "collected")).reason, "missing")
        for (const kept of [a!, shared!]) assert.deepEqual(Array.from(yield* c.readSnapshot(id, sha256Hex(kept))), Array.from(kept))
        // Deleting a session frees what only it referenced; what another session references stays.
        yield* c.delete(id)
        yield* shiftedBy(LATER_MS)(c.gc())
        yield* expectFailure(c.readSnapshot(id, sha256Hex(a!)), SnapshotBlobError, "only the deleted session named it")
        assert.deepEqual(Array.from(yield* c.readSnapshot(other, sha256Hex(shared!))), Array.from(shared!))
        const again = yield* shiftedBy(LATER_MS)(c.gc())
        assert.equal(again.deleted, 0, "a second collection finds nothing of ours")
        assert.equal(again.recent, 0)
      }))

    test("a writer that stores or references an old unreferenced object keeps it; a reference to a collected one is refused", (c, p) =>
      Effect.gen(function*() {
        const [reused, referencedOnly, lost] = ["reused", "referenced", "lost"].map((name) => new TextEncoder().encode(`${p}:${name}`))
        // Stored long ago by a session since deleted: unreferenced and past the grace period.
        yield* shiftedBy(-LATER_MS)(c.append(p + "old", [snapshotOf("r", reused!), snapshotOf("o", referencedOnly!), snapshotOf("l", lost!)]))
        yield* c.delete(p + "old")
        const stored = (bytes: Uint8Array) => new FileSnapshot({ toolUseId: "t", path: "x", state: { _tag: "stored", sha256: sha256Hex(bytes), size: bytes.length, mode: 0o644 } })
        // One writer stores the same bytes again, another only names an object it finds stored: both touch them.
        yield* c.append(p + "new", [snapshotOf("r", reused!), stored(referencedOnly!)])
        yield* c.delete(p + "new")
        const report = yield* c.gc({ graceMs: MIN_GRACE_MS })
        assert.ok(report.recent >= 2, JSON.stringify(report))
        for (const kept of [reused!, referencedOnly!]) assert.deepEqual(Array.from(yield* c.readSnapshot(p + "new", sha256Hex(kept))), Array.from(kept))
        yield* expectFailure(c.readSnapshot(p + "new", sha256Hex(lost!)), SnapshotBlobError, "untouched, it was collected")
        const refused = yield* expectFailure(c.append(p + "late", [new UserMessage({ content: "x" }), stored(lost!)]), InvalidEventError, "names a collected object")
        assert.equal(refused.index, 1)
        assert.equal(yield* c.head(p + "late"), 0)
      }))

    test("du says what each session references, shares and holds alone, and what no session references", (c, p) =>
      Effect.gen(function*() {
        const [mine, both, cut] = ["mine", "both", "cut"].map((name) => new TextEncoder().encode(`${p}:${name}`.repeat(3)))
        yield* c.append(p + "a", [snapshotOf("m", mine!), snapshotOf("b", both!)])
        yield* c.append(p + "a", [snapshotOf("c", cut!)])
        yield* c.truncate(p + "a", 2)
        yield* c.append(p + "b", [snapshotOf("b", both!)])
        const usage = yield* c.du()
        const of = (id: string) => usage.sessions.find((session) => session.id === id)!
        assert.deepEqual(of(p + "a").referenced.objects, 2)
        assert.deepEqual(of(p + "a").shared, { objects: 1, bytes: (yield* c.listSnapshots(p + "b"))[0]!.storedBytes })
        assert.equal(of(p + "a").own.objects, 1)
        assert.equal(of(p + "a").own.bytes + of(p + "a").shared.bytes, of(p + "a").referenced.bytes)
        assert.deepEqual(of(p + "b").own, { objects: 0, bytes: 0 })
        assert.ok(of(p + "a").logBytes > 0)
        // The cut object is stored and no one's.
        assert.ok(usage.unreferenced.objects >= 1)
        assert.equal(usage.objects.objects, usage.referenced.objects + usage.unreferenced.objects)
        assert.equal(usage.objects.bytes, usage.referenced.bytes + usage.unreferenced.bytes)
        assert.equal(usage.logBytes, usage.sessions.reduce((total, session) => total + session.logBytes, 0))
        // Deleting b makes `both` a's own.
        yield* c.delete(p + "b")
        const after = (yield* c.du()).sessions.find((session) => session.id === p + "a")!
        assert.deepEqual(after.own.objects, 2)
        assert.equal((yield* c.du()).sessions.some((session) => session.id === p + "b"), false)
      }))

    test("a first capture listed by a manifest logs its chunks' hashes alone, reads back whole, and shares chunks with later sessions", (c, p) =>
      Effect.gen(function*() {
        const files = Array.from({ length: 600 }, (_, i) => ({ path: `src/dir${i % 7}/file-${i}.ts`, data: new TextEncoder().encode(`${p}:${i}\n`) }))
        const first = manifestCapture(files, [])
        yield* c.append(p + "first", [first.event])
        const read = (yield* readAll(c, p + "first"))[0]!.event as WorkspaceCaptured
        assert.deepEqual(read.changes.map((change) => change.path), files.map((file) => file.path))
        assert.ok(read.changes.every((change) => change.firstSeen === true && change.state._tag === "stored"))
        assert.ok((yield* c.stats(p + "first")).logBytes < 12_000, "the log keeps no path")
        for (const file of files.slice(0, 3)) assert.deepEqual(Array.from(yield* c.readSnapshot(p + "first", sha256Hex(file.data))), Array.from(file.data))
        // A later session over the same tree with one file changed: the chunks it shares are references.
        const changed = files.map((file, i) => (i === 10 ? { ...file, data: new TextEncoder().encode(`${p}:changed`) } : file))
        const second = manifestCapture(changed, first.chunks, new Set(files.map((file) => sha256Hex(file.data))))
        assert.ok(second.event.manifest!.filter((chunk) => chunk._tag === "stored").length >= first.chunks.length - 2, "most chunks shared")
        yield* c.append(p + "second", [second.event])
        const secondRead = (yield* readAll(c, p + "second"))[0]!.event as WorkspaceCaptured
        assert.deepEqual(
          secondRead.changes.map((change) => (change.state._tag === "stored" ? change.state.sha256 : "")),
          changed.map((file) => sha256Hex(file.data))
        )
        // gc follows the chunks to the files: nothing referenced goes, what only a deleted session named does.
        yield* c.delete(p + "first")
        yield* shiftedBy(LATER_MS)(c.gc())
        for (const file of changed) assert.deepEqual(Array.from(yield* c.readSnapshot(p + "second", sha256Hex(file.data))), Array.from(file.data))
        yield* expectFailure(c.readSnapshot(p + "second", sha256Hex(files[10]!.data)), SnapshotBlobError, "only the deleted session's chunk named it")
        const usage = (yield* c.du()).sessions.find((session) => session.id === p + "second")!
        assert.ok(usage.referenced.objects >= changed.length + second.event.manifest!.length, JSON.stringify(usage))
      }))

    test("a capture whose changes are not what its manifest lists, or that names no chunk, is refused and stores nothing", (c, p) =>
      Effect.gen(function*() {
        const id = p + "refused"
        yield* c.append(id, [new UserMessage({ content: "before" })])
        const files = [{ path: "a.txt", data: new TextEncoder().encode(p + "a") }, { path: "b.txt", data: new TextEncoder().encode(p + "b") }]
        const { event } = manifestCapture(files, [])
        const garbage = new TextEncoder().encode(p + "no chunk")
        const variants: ReadonlyArray<readonly [string, WorkspaceCaptured]> = [
          ["a dangling chunk", new WorkspaceCaptured({ ...event, manifest: [{ _tag: "stored", sha256: "c".repeat(64), size: 10, mode: 0 }] })],
          ["bytes that are no chunk", new WorkspaceCaptured({ ...event, manifest: [{ _tag: "content", data: garbage, mode: 0, size: garbage.length, sha256: sha256Hex(garbage) }] })],
          ["another path", new WorkspaceCaptured({ ...event, changes: event.changes.map((change, i) => (i === 1 ? { ...change, path: "c.txt" } : change)) })],
          ["a path not first seen", new WorkspaceCaptured({ ...event, changes: event.changes.map(({ firstSeen: _seen, ...change }) => change) })],
          ["another state", new WorkspaceCaptured({ ...event, changes: event.changes.map((change, i) => (i === 0 ? { ...change, state: { _tag: "missing" as const } } : change)) })],
          ["a path left out", new WorkspaceCaptured({ ...event, changes: event.changes.slice(1) })],
          ["a failed capture", new WorkspaceCaptured({ ...event, changes: [], failure: "it failed" })]
        ]
        for (const [what, variant] of variants) {
          const error = yield* expectFailure(c.append(id, [new UserMessage({ content: "x" }), variant]), InvalidEventError, what)
          assert.equal(error.index, 1, what)
        }
        assert.equal(yield* c.head(id), 1)
        assert.deepEqual(yield* c.listSnapshots(id), [])
      }))

    test("gc refuses a grace period shorter than a writer's touch is valid for, or an unknown option", (c) =>
      Effect.gen(function*() {
        // What a caller without types could pass.
        const given: ReadonlyArray<unknown> = [{ graceMs: MIN_GRACE_MS - 1 }, { graceMs: 0 }, { graceMs: -5 }, { grace: 1000 }]
        for (const options of given) {
          const error = yield* expectFailure(c.gc(options as GcOptions), ConfigurationError, JSON.stringify(options))
          assert.match(error.message, /grace/)
        }
      }))

    runner.it(
      "random append/truncate/delete/gc sequences never leave a referenced object missing, nor an unreferenced one after a later gc",
      () => runSnapshotProperty(layer, options),
      Math.max(timeoutMs, 600_000)
    )
  })
}
