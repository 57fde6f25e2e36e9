/** The example-based contract every backend keeps: append, read, head, list, truncate, delete, versions. */
import assert from "node:assert/strict"
import { Arbitrary, Effect, Exit, FastCheck as fc, Layer, Scope, Stream } from "effect"
import { Checkpointer, type CheckpointerService } from "../core/Checkpointer.js"
import { CheckpointConflictError, CheckpointerClosedError, InvalidEventError, InvalidSeqError, InvalidSessionIdError } from "../core/errors.js"
import { type FileSnapshot, type RestoreStarted, SessionEvent, type SessionEventEncoded, UserMessage } from "../core/events.js"
import { encodedEvents, encodeEvent, expectFailure, readAll, sleep } from "./helpers.js"
import { type ConformanceSuite, uniquePrefix } from "./runner.js"
import { asStored, SAMPLE_RESTORE_BEFORE_BYTES, sampleEvents, storable } from "./samples.js"

/** File systems stamp modification times coarsely; wait long enough that activity order is observable. */
const ACTIVITY_GAP_MS = 30

export const contractTests = <E>({ layer, options, runner, test, timeoutMs }: ConformanceSuite<E>): void => {
  runner.describe("contract", () => {
    test("an unknown session has head 0, reads empty and is not listed", (c, p) =>
      Effect.gen(function*() {
        assert.equal(yield* c.head(p + "unknown"), 0)
        assert.deepEqual(yield* readAll(c, p + "unknown"), [])
        const listed = yield* c.list()
        assert.ok(!listed.some((s) => s.id === p + "unknown"))
      }))

    test("seqs start at 1 and stay contiguous across appends; append returns the new head", (c, p) =>
      Effect.gen(function*() {
        const id = p + "seq"
        const first = [new UserMessage({ content: "a", origin: "user" }), new UserMessage({ content: "b" })]
        assert.equal(yield* c.append(id, first), 2)
        assert.equal(yield* c.append(id, [new UserMessage({ content: "c" })]), 3)
        assert.equal(yield* c.append(id, first), 5)
        const stored = yield* readAll(c, id)
        assert.deepEqual(stored.map((s) => s.seq), [1, 2, 3, 4, 5])
        for (const s of stored) assert.ok(Number.isSafeInteger(s.ts) && s.ts > 0, `ts ${s.ts} is an epoch ms`)
        for (let i = 1; i < stored.length; i++) assert.ok(stored[i]!.ts >= stored[i - 1]!.ts, "ts never goes back")
        assert.equal(yield* c.head(id), 5)
      }))

    test("read returns seq order, and sinceSeq is exclusive", (c, p) =>
      Effect.gen(function*() {
        const id = p + "read"
        const events = Array.from({ length: 10 }, (_, i) => new UserMessage({ content: `m${i + 1}` }))
        yield* c.append(id, events.slice(0, 4))
        yield* c.append(id, events.slice(4))
        for (const since of [0, 1, 3, 9, 10, 11, 50]) {
          const stored = yield* readAll(c, id, since)
          const expected = Array.from({ length: Math.max(0, 10 - since) }, (_, i) => since + i + 1)
          assert.deepEqual(stored.map((s) => s.seq), expected, `sinceSeq ${since}`)
          assert.deepEqual(
            stored.map((s) => (s.event as UserMessage).content),
            expected.map((seq) => `m${seq}`),
            `contents after ${since}`
          )
        }
      }))

    test("append([]) stores nothing, creates nothing, returns the head and still checks expectedHead", (c, p) =>
      Effect.gen(function*() {
        const id = p + "empty"
        assert.equal(yield* c.append(id, []), 0)
        assert.ok(!(yield* c.list()).some((s) => s.id === id), "an empty append does not create the session")
        yield* c.append(id, [new UserMessage({ content: "x" })])
        assert.equal(yield* c.append(id, [], 1), 1)
        const conflict = yield* expectFailure(c.append(id, [], 0), CheckpointConflictError, "empty append, stale head")
        assert.deepEqual([conflict.expected, conflict.actual], [0, 1])
        assert.equal((yield* readAll(c, id)).length, 1)
      }))

    test("an expected-head mismatch is CheckpointConflictError with the right fields, and stores nothing", (c, p) =>
      Effect.gen(function*() {
        const id = p + "conflict"
        yield* c.append(id, [new UserMessage({ content: "one" }), new UserMessage({ content: "two" })])
        const before = encodedEvents(yield* readAll(c, id))
        for (const expected of [0, 1, 3, 7]) {
          const error = yield* expectFailure(
            c.append(id, [new UserMessage({ content: "never stored" })], expected),
            CheckpointConflictError,
            `append expecting ${expected}`
          )
          assert.equal(error.sessionId, id)
          assert.equal(error.expected, expected)
          assert.equal(error.actual, 2)
          assert.ok(error instanceof Error)
        }
        assert.deepEqual(encodedEvents(yield* readAll(c, id)), before)
        assert.equal(yield* c.head(id), 2)
        const unknown = yield* expectFailure(
          c.append(p + "fresh", [new UserMessage({ content: "x" })], 1),
          CheckpointConflictError,
          "unknown session expecting 1"
        )
        assert.deepEqual([unknown.expected, unknown.actual], [1, 0])
        assert.equal(yield* c.head(p + "fresh"), 0)
        assert.equal(yield* c.append(id, [new UserMessage({ content: "three" })], 2), 3)
        assert.equal(yield* c.append(p + "fresh", [new UserMessage({ content: "x" })], 0), 1)
      }))

    test("truncate to k keeps the first k events and the next append continues at k+1", (c, p) =>
      Effect.gen(function*() {
        const id = p + "truncate"
        yield* c.append(id, Array.from({ length: 6 }, (_, i) => new UserMessage({ content: `m${i + 1}` })))
        assert.equal(yield* c.truncate(id, 4), 4)
        assert.equal(yield* c.head(id), 4)
        assert.deepEqual((yield* readAll(c, id)).map((s) => (s.event as UserMessage).content), ["m1", "m2", "m3", "m4"])
        assert.equal(yield* c.append(id, [new UserMessage({ content: "new5" })]), 5)
        const stored = yield* readAll(c, id)
        assert.deepEqual(stored.map((s) => s.seq), [1, 2, 3, 4, 5])
        assert.equal((stored[4]!.event as UserMessage).content, "new5")
        assert.deepEqual((yield* readAll(c, id, 4)).map((s) => s.seq), [5])
      }))

    test("truncate to 0 empties the session but keeps it listed; delete removes it", (c, p) =>
      Effect.gen(function*() {
        const id = p + "zero"
        yield* c.append(id, [new UserMessage({ content: "a" }), new UserMessage({ content: "b" })])
        assert.equal(yield* c.truncate(id, 0, 2), 0)
        assert.equal(yield* c.head(id), 0)
        assert.deepEqual(yield* readAll(c, id), [])
        assert.ok((yield* c.list()).some((s) => s.id === id), "an emptied session still exists")
        assert.equal(yield* c.append(id, [new UserMessage({ content: "again" })], 0), 1)
      }))

    test("truncate with a stale expected head conflicts and changes nothing", (c, p) =>
      Effect.gen(function*() {
        const id = p + "stale-truncate"
        yield* c.append(id, Array.from({ length: 5 }, (_, i) => new UserMessage({ content: `m${i}` })))
        const before = encodedEvents(yield* readAll(c, id))
        const error = yield* expectFailure(c.truncate(id, 2, 4), CheckpointConflictError, "truncate expecting 4")
        assert.deepEqual([error.sessionId, error.expected, error.actual], [id, 4, 5])
        assert.deepEqual(encodedEvents(yield* readAll(c, id)), before)
        assert.equal(yield* c.truncate(id, 2, 5), 2)
      }))

    test("truncate past the head is InvalidSeqError; truncate to the head changes nothing", (c, p) =>
      Effect.gen(function*() {
        const id = p + "past"
        yield* c.append(id, [new UserMessage({ content: "a" }), new UserMessage({ content: "b" })])
        const error = yield* expectFailure(c.truncate(id, 3), InvalidSeqError, "truncate past head")
        assert.equal(error.argument, "toSeq")
        assert.equal(yield* c.truncate(id, 2), 2)
        assert.equal((yield* readAll(c, id)).length, 2)
        assert.equal(yield* c.truncate(p + "never", 0), 0, "truncating an unknown session to 0 is a no-op")
        assert.ok(!(yield* c.list()).some((s) => s.id === p + "never"), "and does not create it")
        yield* expectFailure(c.truncate(p + "never", 1), InvalidSeqError, "truncate unknown past head")
      }))

    test("delete removes the session: head 0, empty read, not listed; a new append starts at 1", (c, p) =>
      Effect.gen(function*() {
        const id = p + "delete"
        const other = p + "kept"
        yield* c.append(id, [new UserMessage({ content: "a" }), new UserMessage({ content: "b" })])
        yield* c.append(other, [new UserMessage({ content: "k" })])
        yield* c.delete(id)
        assert.equal(yield* c.head(id), 0)
        assert.deepEqual(yield* readAll(c, id), [])
        const ids = (yield* c.list()).map((s) => s.id)
        assert.ok(!ids.includes(id) && ids.includes(other))
        yield* c.delete(id)
        yield* c.delete(p + "never-existed")
        assert.equal(yield* c.append(id, [new UserMessage({ content: "fresh" })], 0), 1)
        assert.equal(yield* c.head(other), 1)
      }))

    test("list is ordered by last activity, most recent first", (c, p) =>
      Effect.gen(function*() {
        const [a, b, d] = [p + "a", p + "b", p + "d"]
        const mine = Effect.map(c.list(), (all) => all.filter((s) => s.id.startsWith(p)))
        for (const id of [a, b, d]) {
          yield* c.append(id, [new UserMessage({ content: id })])
          yield* sleep(ACTIVITY_GAP_MS)
        }
        assert.deepEqual((yield* mine).map((s) => s.id), [d, b, a])
        yield* c.append(a, [new UserMessage({ content: "later" })])
        yield* sleep(ACTIVITY_GAP_MS)
        assert.deepEqual((yield* mine).map((s) => s.id), [a, d, b])
        yield* c.truncate(b, 0)
        const listed = yield* mine
        assert.deepEqual(listed.map((s) => s.id), [b, a, d], "truncate is activity")
        for (const s of listed) assert.ok(s.mtime instanceof Date && !Number.isNaN(s.mtime.getTime()))
      }))

    test("sessions are isolated", (c, p) =>
      Effect.gen(function*() {
        const [a, b] = [p + "iso-a", p + "iso-b"]
        yield* c.append(a, [new UserMessage({ content: "a1" }), new UserMessage({ content: "a2" })])
        yield* c.append(b, [new UserMessage({ content: "b1" })])
        yield* c.truncate(a, 1)
        yield* c.append(b, [new UserMessage({ content: "b2" })], 1)
        assert.deepEqual((yield* readAll(c, a)).map((s) => (s.event as UserMessage).content), ["a1"])
        assert.deepEqual((yield* readAll(c, b)).map((s) => (s.event as UserMessage).content), ["b1", "b2"])
        yield* c.delete(a)
        assert.equal(yield* c.head(b), 2)
      }))

    test("every field of every event kind round-trips exactly", (c, p) =>
      Effect.gen(function*() {
        const id = p + "roundtrip"
        const events = sampleEvents()
        yield* c.append(id, events)
        const stored = yield* readAll(c, id)
        assert.equal(stored.length, events.length)
        stored.forEach((s, i) => {
          const original = asStored(events[i]!)
          assert.equal(s.event.constructor, original.constructor, `event ${i} keeps its class`)
          assert.deepEqual(encodeEvent(s.event), encodeEvent(original), `event ${i} (${original._tag})`)
        })
        // The snapshot's bytes went to the store; the log holds their reference.
        const snapshot = stored.find((s) => s.event._tag === "FileSnapshot")!.event as FileSnapshot
        assert.ok(snapshot.state._tag === "stored")
        assert.deepEqual(Array.from(yield* c.readSnapshot(id, snapshot.state.sha256)), [0, 1, 2, 255, 254, 13, 10, 0])
        // So did what a file held before a restore.
        const intent = stored.find((s) => s.event._tag === "RestoreStarted")!.event as RestoreStarted
        const before = intent.files[0]!.before
        assert.ok(before._tag === "stored")
        assert.deepEqual(Array.from(yield* c.readSnapshot(id, before.sha256)), Array.from(SAMPLE_RESTORE_BEFORE_BYTES))
      }))

    test("random events generated from the schemas round-trip exactly", (c, p) =>
      Effect.gen(function*() {
        const id = p + "arbitrary"
        // A fork's first event only starts a new session (the fork tests store it).
        const events = fc.sample(Arbitrary.make(SessionEvent), { numRuns: 150, seed: 42 })
          .filter((event) => event._tag !== "SessionForked")
          .map(storable)
        yield* c.append(id, events)
        const stored = yield* readAll(c, id)
        assert.deepEqual(stored.map((s) => encodeEvent(s.event)), events.map((e) => encodeEvent(asStored(e))))
      }))

    test("encoded JSON events are accepted and validated; a malformed one stores nothing", (c, p) =>
      Effect.gen(function*() {
        const id = p + "json"
        const json: SessionEventEncoded = { _tag: "UserMessage", content: "from JSON", origin: "user" }
        assert.equal(yield* c.append(id, [json]), 1)
        const [stored] = yield* readAll(c, id)
        assert.ok(stored!.event instanceof UserMessage)
        const malformed = [
          { _tag: "UserMessage", content: 42 },
          { _tag: "NoSuchEvent" },
          { content: "no tag" },
          null,
          "text",
          { _tag: "FileChange", toolUseId: "t", path: "", operation: "write" }
        ]
        for (const bad of malformed) {
          const error: InvalidEventError = yield* expectFailure(
            c.append(id, [json, bad as unknown as SessionEventEncoded]),
            InvalidEventError,
            `malformed ${JSON.stringify(bad)}`
          )
          assert.equal(error.index, 1)
        }
        assert.equal(yield* c.head(id), 1)
      }))

    test("invalid session ids are refused by every operation and nothing is created", (c, p) =>
      Effect.gen(function*() {
        const bad = ["", "a/b", "a\\b", "..", "x..y", ".hidden", "nul\u0000", "ctl\u0007", "tab\tid", " padded", "x".repeat(201), "lone\uD800", "lone\uDFFF"]
        for (const id of bad) {
          const what = `id ${JSON.stringify(id)}`
          yield* expectFailure(c.append(id, [new UserMessage({ content: "x" })]), InvalidSessionIdError, what)
          yield* expectFailure(c.head(id), InvalidSessionIdError, what)
          yield* expectFailure(readAll(c, id), InvalidSessionIdError, what)
          yield* expectFailure(c.truncate(id, 0), InvalidSessionIdError, what)
          yield* expectFailure(c.delete(id), InvalidSessionIdError, what)
        }
        const listed = yield* c.list()
        assert.ok(!listed.some((s) => bad.includes(s.id)))
        // Unicode and punctuation that are safe in file names are fine.
        assert.equal(yield* c.append(p + "ok:id_with-ünïcode 🚀@1", [new UserMessage({ content: "x" })]), 1)
      }))

    test("invalid seq arguments are InvalidSeqError and change nothing", (c, p) =>
      Effect.gen(function*() {
        const id = p + "args"
        yield* c.append(id, [new UserMessage({ content: "x" })])
        yield* expectFailure(readAll(c, id, -1), InvalidSeqError, "sinceSeq -1")
        yield* expectFailure(readAll(c, id, 0.5), InvalidSeqError, "sinceSeq 0.5")
        yield* expectFailure(c.truncate(id, -1), InvalidSeqError, "toSeq -1")
        yield* expectFailure(c.truncate(id, Number.NaN), InvalidSeqError, "toSeq NaN")
        yield* expectFailure(c.append(id, [new UserMessage({ content: "y" })], -1), InvalidSeqError, "expectedHead -1")
        yield* expectFailure(c.truncate(id, 0, 1.5), InvalidSeqError, "expectedHead 1.5")
        assert.equal(yield* c.head(id), 1)
      }))

    test("concurrent appends racing on the same expected head produce exactly one winner", (c, p) =>
      Effect.gen(function*() {
        const id = p + "race"
        yield* c.append(id, [new UserMessage({ content: "base" })])
        for (let round = 0; round < 5; round++) {
          const head = yield* c.head(id)
          const results = yield* Effect.all(
            Array.from({ length: 8 }, (_, racer) =>
              Effect.exit(c.append(id, [new UserMessage({ content: `r${round}-${racer}` })], head))),
            { concurrency: "unbounded" }
          )
          const winners = results.filter(Exit.isSuccess)
          assert.equal(winners.length, 1, `round ${round}: exactly one winner`)
          for (const exit of results.filter(Exit.isFailure)) {
            const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
            assert.ok(error instanceof CheckpointConflictError, `loser got ${String(error)}`)
            assert.deepEqual([error.expected, error.actual], [head, head + 1])
          }
          assert.equal(yield* c.head(id), head + 1)
        }
      }))

    test("concurrent appends without an expected head all land, each batch contiguous", (c, p) =>
      Effect.gen(function*() {
        const id = p + "concurrent"
        const writers = 6
        const batches = 5
        yield* Effect.all(
          Array.from({ length: writers }, (_, w) =>
            Effect.forEach(
              Array.from({ length: batches }, (_, b) => b),
              (b) => c.append(id, [0, 1, 2].map((i) => new UserMessage({ content: `${w}:${b}:${i}` })))
            )),
          { concurrency: "unbounded" }
        )
        const stored = yield* readAll(c, id)
        assert.deepEqual(stored.map((s) => s.seq), Array.from({ length: writers * batches * 3 }, (_, i) => i + 1))
        for (let i = 0; i < stored.length; i += 3) {
          const [w, b] = String((stored[i]!.event as UserMessage).content).split(":")
          for (let j = 0; j < 3; j++) {
            assert.equal((stored[i + j]!.event as UserMessage).content, `${w}:${b}:${j}`, "batch is contiguous")
          }
        }
      }))

    test("a long session streams in order and folds without exhausting the stack", (c, p) =>
      Effect.gen(function*() {
        const id = p + "long"
        const total = 20_000
        for (let start = 0; start < total; start += 10_000) {
          yield* c.append(id, Array.from({ length: 10_000 }, (_, i) => new UserMessage({ content: `m${start + i + 1}` })))
        }
        let expected = 15_001
        yield* Stream.runForEach(c.read(id, { sinceSeq: 15_000 }), (s) =>
          Effect.sync(() => {
            assert.equal(s.seq, expected)
            assert.equal((s.event as UserMessage).content, `m${expected}`)
            expected++
          }))
        assert.equal(expected, total + 1)
        // Folding the whole stream is the common way to replay a session.
        const folded = yield* Stream.runFold(c.read(id), 0, (count, s) => {
          assert.equal(s.seq, count + 1)
          return count + 1
        })
        assert.equal(folded, total)
      }))

    runner.it(
      "a checkpointer whose scope has closed refuses every call with CheckpointerClosedError",
      () =>
        Effect.runPromise(Effect.gen(function*() {
          const scope = yield* Scope.make()
          const context = yield* Layer.buildWithScope(layer, scope)
          const c = context.unsafeMap.get(Checkpointer.key) as CheckpointerService
          const id = uniquePrefix("closed") + "s"
          yield* c.append(id, [new UserMessage({ content: "x" })])
          yield* Scope.close(scope, Exit.void)
          yield* expectFailure(c.append(id, [new UserMessage({ content: "y" })]), CheckpointerClosedError, "append")
          yield* expectFailure(c.head(id), CheckpointerClosedError, "head")
          yield* expectFailure(readAll(c, id), CheckpointerClosedError, "read")
          yield* expectFailure(c.list(), CheckpointerClosedError, "list")
          yield* expectFailure(c.truncate(id, 0), CheckpointerClosedError, "truncate")
          yield* expectFailure(c.delete(id), CheckpointerClosedError, "delete")
        })),
      timeoutMs
    )

    if (options.reopen) {
      runner.it(
        "what was appended survives closing and reopening",
        () =>
          Effect.runPromise(Effect.gen(function*() {
            const id = uniquePrefix("reopen") + "s"
            const events = sampleEvents()
            const generationBefore = yield* Effect.scoped(Effect.flatMap(Checkpointer, (c) =>
              Effect.zipRight(c.append(id, events), Effect.map(c.version(id), (v) => v.generation))).pipe(Effect.provide(layer)))
            yield* Effect.scoped(Effect.flatMap(Checkpointer, (c) =>
              Effect.gen(function*() {
                assert.equal(yield* c.head(id), events.length)
                assert.equal((yield* c.version(id)).generation, generationBefore, "the generation survives a reopen")
                const stored = yield* readAll(c, id)
                assert.deepEqual(encodedEvents(stored), events.map((e) => encodeEvent(asStored(e))))
                yield* c.truncate(id, 3)
              })).pipe(Effect.provide(layer)))
            yield* Effect.scoped(Effect.flatMap(Checkpointer, (c) =>
              Effect.gen(function*() {
                assert.equal(yield* c.head(id), 3)
                assert.equal(yield* c.append(id, [new UserMessage({ content: "after reopen" })], 3), 4)
              })).pipe(Effect.provide(layer)))
          })),
        timeoutMs
      )
    }
  })
}
