/**
 * `checkpointerConformance(name, layer)`: the one suite every `Checkpointer` backend runs —
 * example-based contract tests and model-based property tests (fast-check `commands`)
 * that compare the backend with an in-memory model after every command.
 *
 * It registers tests with whatever runner is active: Vitest (with `globals`), Jest, Mocha
 * and `node:test` all work. Without globals, pass your runner's `describe` and `it`:
 *
 * ```ts
 * import { describe, it } from "vitest"
 * checkpointerConformance("my backend", MyBackend.layer, { runner: { describe, it } })
 * ```
 */
import assert from "node:assert/strict"
import { Arbitrary, Chunk, Effect, Exit, FastCheck as fc, Layer, ManagedRuntime, Queue, Schema, Scope, Stream } from "effect"
import { Checkpointer, type CheckpointerService, type FollowItem, type FollowOptions, NO_GENERATION } from "../core/Checkpointer.js"
import { sha256Hex } from "../core/sha256.js"
import { decodeOptionsOrThrow, Flag, isPlainObject, PositiveInteger, PositiveMilliseconds, recognised } from "../core/options.js"
import {
  CheckpointConflictError,
  CheckpointerClosedError,
  ConfigurationError,
  InvalidEventError,
  InvalidSeqError,
  InvalidSessionIdError,
  SnapshotBlobError
} from "../core/errors.js"
import {
  type AssistantBlock,
  AssistantMessage,
  BackgroundCompleted,
  blobReferences,
  Compaction,
  FileChange,
  FileSnapshot,
  type JsonValue,
  RestoreEnded,
  RestoreStarted,
  RuntimeMessage,
  SessionEvent,
  type SessionEventEncoded,
  SessionMetadata,
  STORED_ARGUMENT_MIN_BYTES,
  type StoredEvent,
  ToolResult,
  UserMessage
} from "../core/events.js"

export interface ConformanceRunner {
  readonly describe: (name: string, body: () => void) => unknown
  readonly it: (name: string, body: () => Promise<void>, timeoutMs?: number) => unknown
}

const isRunner = (value: unknown): value is ConformanceRunner =>
  typeof value === "object" && value !== null && "describe" in value && typeof value.describe === "function" &&
  "it" in value && typeof value.it === "function"

export const ConformanceOptions = Schema.Struct({
  /**
   * The backend is persistent: building `layer` again sees what earlier builds stored
   * (a file directory, a database file). Property sequences then mix close-and-reopen
   * steps in, and the example tests check that data survives a reopen.
   */
  reopen: Schema.optional(Flag),
  /** Random command sequences in the property test. Default 200. */
  propertyRuns: Schema.optional(PositiveInteger),
  /** Longest random command sequence. Default 40. */
  maxCommands: Schema.optional(PositiveInteger),
  /** Extra fast-check parameters, e.g. `{ seed, path }` to replay a reported failure (passed to fast-check as given). */
  fastCheck: Schema.optional(
    recognised("an object of fast-check parameters", (value): value is fc.Parameters<unknown> => isPlainObject(value))
  ),
  /** Per-test timeout in ms. Default 120000. */
  timeoutMs: Schema.optional(PositiveMilliseconds),
  /** Defaults to the runner's global `describe`/`it`. */
  runner: Schema.optional(recognised("a runner { describe, it }", isRunner))
})
export interface ConformanceOptions extends Schema.Schema.Type<typeof ConformanceOptions> {}

const globalRunner = (): ConformanceRunner => {
  const globals = globalThis as { describe?: ConformanceRunner["describe"]; it?: ConformanceRunner["it"] }
  if (typeof globals.describe !== "function" || typeof globals.it !== "function") {
    throw new Error(
      "checkpointerConformance: no global describe/it found; pass { runner: { describe, it } } from your test runner"
    )
  }
  return { describe: globals.describe, it: globals.it }
}

// ---------------------------------------------------------------------------
// Sample events: every kind, every optional field, awkward text.
// ---------------------------------------------------------------------------

const awkwardText = "héllo wörld — 你好，世界 🚀 \u{1F468}\u200D\u{1F469}\u200D\u{1F467} \"quotes\" \\ back\\slash \n\r\n\t tab"
const largeText = "0123456789abcdef".repeat(64 * 1024) // 1 MiB

/** One event of every kind, with every optional field set somewhere. */
const SAMPLE_SNAPSHOT_BYTES = new Uint8Array([0, 1, 2, 255, 254, 13, 10, 0])
/** What a file held before a restore, in the sample `RestoreStarted`. */
const SAMPLE_RESTORE_BEFORE_BYTES = new TextEncoder().encode("the agent's version, ü\n")

/** A tool call as a store keeps it: each top-level string argument of at least `STORED_ARGUMENT_MIN_BYTES` UTF-8 bytes moved out. */
const withArgumentsStored = (block: AssistantBlock): AssistantBlock => {
  if (block.type !== "tool_use" || !isPlainObject(block.input)) return block
  const input: Record<string, JsonValue> = { ...block.input }
  const storedArguments = [...(block.storedArguments ?? [])]
  for (const [key, value] of Object.entries(input)) {
    if (typeof value !== "string" || !value.isWellFormed()) continue
    const bytes = new TextEncoder().encode(value)
    if (bytes.length < STORED_ARGUMENT_MIN_BYTES) continue
    storedArguments.push({ key, sha256: sha256Hex(bytes), size: bytes.length })
    delete input[key]
  }
  return storedArguments.length === 0 ? block : { ...block, input, storedArguments }
}

/**
 * `event` as a store keeps it: a `content` snapshot becomes a `stored` reference to its bytes,
 * and a tool call's large string arguments become stored arguments.
 */
export const asStored = (event: SessionEvent): SessionEvent => {
  switch (event._tag) {
    case "AssistantMessage":
      return new AssistantMessage({ ...event, content: event.content.map(withArgumentsStored) })
    case "FileSnapshot":
      return event.state._tag !== "content" ? event : new FileSnapshot({
        toolUseId: event.toolUseId,
        path: event.path,
        state: { _tag: "stored", sha256: event.state.sha256, size: event.state.size, mode: event.state.mode }
      })
    case "RestoreStarted":
      return new RestoreStarted({
        ...event,
        files: event.files.map((file) =>
          file.before._tag !== "content" ? file : {
            ...file,
            before: { _tag: "stored", sha256: file.before.sha256, size: file.before.size, mode: file.before.mode }
          }
        )
      })
    default:
      return event
  }
}

/** Inline snapshot bytes with their true size and hash, as a store accepts them. */
const withTrueHash = <S extends { readonly data: Uint8Array }>(state: S): S => ({ ...state, size: state.data.length, sha256: sha256Hex(state.data) })

/**
 * `event` made acceptable to any store (for generated events): a `content` snapshot gets the
 * size and hash of its bytes, a `stored` reference (whose blob a fresh store lacks) becomes a
 * `missing` snapshot, and tool calls lose their stored arguments (same reason).
 */
export const storable = (event: SessionEvent): SessionEvent => {
  switch (event._tag) {
    case "AssistantMessage":
      return new AssistantMessage({
        ...event,
        content: event.content.map((block) => {
          if (block.type !== "tool_use" || block.storedArguments === undefined) return block
          const { storedArguments: _dropped, ...rest } = block
          return rest
        })
      })
    case "FileSnapshot":
      // A reference to a blob the store does not hold is refused: none in random events.
      return new FileSnapshot({
        toolUseId: event.toolUseId,
        path: event.path,
        state: event.state._tag === "content" ? withTrueHash(event.state) : event.state._tag === "stored" ? { _tag: "missing" } : event.state
      })
    case "RestoreStarted":
      return new RestoreStarted({
        ...event,
        files: event.files.map((file) => ({
          ...file,
          before: file.before._tag === "content" ? withTrueHash(file.before) : file.before._tag === "stored" ? { _tag: "missing" } : file.before
        }))
      })
    default:
      return event
  }
}

export const sampleEvents = (): ReadonlyArray<SessionEvent> => [
  new SessionMetadata({
    formatVersion: 1,
    title: awkwardText,
    workdir: "/home/dev/project",
    model: "claude-sonnet-4-6",
    labels: { team: "core", "emoji 🚀": "yes" }
  }),
  new SessionMetadata({ formatVersion: 1 }),
  new UserMessage({ content: awkwardText, origin: "user" }),
  new UserMessage({ content: [{ type: "text", text: "first block" }, { type: "text", text: awkwardText }], origin: "user" }),
  new UserMessage({ content: "a record from before the marker" }),
  new RuntimeMessage({ kind: "reminder", content: "<system-reminder>keep going</system-reminder>" }),
  new RuntimeMessage({ kind: "repair", content: [{ type: "text", text: "tool call t1 was interrupted" }] }),
  new RuntimeMessage({ kind: "background_completion", content: "task b1 finished" }),
  new AssistantMessage({
    content: [
      { type: "text", text: awkwardText },
      {
        type: "tool_use",
        id: "toolu_01",
        name: "write_file",
        input: {
          path: "src/a.ts",
          content: largeText,
          nested: { list: [1, -2.5, 1e300, true, null, "x", { deep: [[[]]] }], empty: {} }
        }
      }
    ],
    model: "claude-sonnet-4-6",
    stopReason: "tool_use",
    usage: { inputTokens: 1234, outputTokens: 56 }
  }),
  new AssistantMessage({ content: [] }),
  new ToolResult({ toolUseId: "toolu_01", toolName: "write_file", content: "ok", isError: false }),
  new ToolResult({
    toolUseId: "toolu_02",
    toolName: "bash",
    content: [{ type: "text", text: "exit 1\n" + awkwardText }],
    isError: true
  }),
  // A large record in the log itself: tool results stay inline.
  new ToolResult({ toolUseId: "toolu_03", toolName: "read_file", content: largeText, isError: false }),
  new FileSnapshot({
    toolUseId: "toolu_01",
    path: "src/ünïcode dir/a b.ts",
    state: {
      _tag: "content",
      data: SAMPLE_SNAPSHOT_BYTES,
      mode: 0o644,
      size: SAMPLE_SNAPSHOT_BYTES.length,
      sha256: sha256Hex(SAMPLE_SNAPSHOT_BYTES)
    }
  }),
  new FileSnapshot({ toolUseId: "toolu_01", path: "new.txt", state: { _tag: "missing" } }),
  new FileSnapshot({
    toolUseId: "toolu_03",
    path: "big.bin",
    state: { _tag: "unavailable", reason: "larger than the 10 MiB snapshot cap", size: 20_000_000 }
  }),
  new FileSnapshot({ toolUseId: "toolu_03", path: "fifo", state: { _tag: "unavailable", reason: "not a regular file" } }),
  new FileChange({
    toolUseId: "toolu_01",
    path: "src/a.ts",
    operation: "write",
    after: { _tag: "file", sha256: "b".repeat(64), size: largeText.length, mode: 0o755 }
  }),
  new FileChange({ toolUseId: "toolu_04", path: "gone.txt", operation: "delete", after: { _tag: "absent" } }),
  new FileChange({ toolUseId: "toolu_05", path: "legacy.txt", operation: "edit" }),
  new Compaction({
    summary: awkwardText,
    keptFromSeq: 3,
    tokensBefore: 100_000,
    tokensAfter: 2_000,
    instructions: "keep the API decisions"
  }),
  new Compaction({ summary: "", tokensBefore: 0, tokensAfter: 0 }),
  new BackgroundCompleted({
    taskId: "bg-1",
    command: "npm test",
    exitCode: 0,
    output: awkwardText,
    outputTruncated: false
  }),
  new BackgroundCompleted({
    taskId: "bg-2",
    command: "sleep 100",
    exitCode: null,
    signal: "SIGTERM",
    output: "",
    outputTruncated: true
  }),
  new RestoreStarted({
    checkpoint: 2,
    conversation: true,
    files: [
      {
        path: "src/ünïcode dir/a b.ts",
        before: {
          _tag: "content",
          data: SAMPLE_RESTORE_BEFORE_BYTES,
          mode: 0o755,
          size: SAMPLE_RESTORE_BEFORE_BYTES.length,
          sha256: sha256Hex(SAMPLE_RESTORE_BEFORE_BYTES)
        },
        target: { _tag: "file", sha256: sha256Hex(SAMPLE_SNAPSHOT_BYTES), size: SAMPLE_SNAPSHOT_BYTES.length, mode: 0o644 }
      },
      { path: "new.txt", before: { _tag: "missing" }, target: { _tag: "absent" } }
    ]
  }),
  new RestoreStarted({ checkpoint: 1, conversation: false, files: [] }),
  new RestoreEnded({ startedSeq: 24, outcome: "finished" }),
  new RestoreEnded({ startedSeq: 25, outcome: "undone" })
]

const encodeEvent = Schema.encodeSync(SessionEvent)

const simpleEvent: fc.Arbitrary<SessionEventEncoded> = fc.oneof(
  fc.string({ maxLength: 40 }).map((text): SessionEventEncoded => ({ _tag: "UserMessage", content: text, origin: "user" })),
  fc.string({ maxLength: 40 }).map((text): SessionEventEncoded => ({
    _tag: "AssistantMessage",
    content: [{ type: "text", text }]
  })),
  fc.tuple(fc.string({ minLength: 1, maxLength: 8 }), fc.fullUnicodeString({ maxLength: 20 })).map((
    [id, text]
  ): SessionEventEncoded => ({ _tag: "ToolResult", toolUseId: id, toolName: "bash", content: text, isError: false }))
)

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

let uniqueCounter = 0
/** A session-id prefix no other test (or earlier run on a persistent store) uses. */
const uniquePrefix = (label: string): string =>
  `c${Date.now().toString(36)}${process.pid.toString(36)}${(uniqueCounter++).toString(36)}-${label}-`

const readAll = (c: CheckpointerService, sessionId: string, sinceSeq?: number) =>
  Effect.map(
    Stream.runCollect(c.read(sessionId, sinceSeq === undefined ? undefined : { sinceSeq })),
    Chunk.toReadonlyArray
  )

const encodedEvents = (stored: ReadonlyArray<StoredEvent>) => stored.map((s) => encodeEvent(s.event))

/** Fails unless `effect` fails with an instance of `errorClass`; returns that error. */
const expectFailure = <A>(
  effect: Effect.Effect<unknown, unknown>,
  errorClass: abstract new(...args: ReadonlyArray<never>) => A,
  what: string
): Effect.Effect<A> =>
  Effect.flatMap(Effect.exit(effect), (exit) =>
    Effect.sync(() => {
      if (Exit.isSuccess(exit)) assert.fail(`${what}: expected ${errorClass.name}, but it succeeded`)
      const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
      assert.ok(
        failure instanceof errorClass,
        `${what}: expected ${errorClass.name}, got ${String(failure ?? exit.cause)}`
      )
      return failure as A
    }))

const sleep = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

/** File systems stamp modification times coarsely; wait long enough that activity order is observable. */
const ACTIVITY_GAP_MS = 30

// ---------------------------------------------------------------------------
// The suite
// ---------------------------------------------------------------------------

export const checkpointerConformance = <E>(
  name: string,
  layer: Layer.Layer<Checkpointer, E>,
  input: ConformanceOptions = {}
): void => {
  const options = decodeOptionsOrThrow(ConformanceOptions, input, "conformance options")
  const runner = options.runner ?? globalRunner()
  const timeoutMs = options.timeoutMs ?? 120_000
  const test = (title: string, body: (c: CheckpointerService, prefix: string) => Effect.Effect<void, unknown, Scope.Scope>) =>
    runner.it(
      title,
      () =>
        Effect.runPromise(
          Effect.scoped(Effect.flatMap(Checkpointer, (c) => body(c, uniquePrefix("t")))).pipe(Effect.provide(layer))
        ),
      timeoutMs
    )

  runner.describe(`Checkpointer conformance: ${name}`, () => {
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
          const events = fc.sample(Arbitrary.make(SessionEvent), { numRuns: 150, seed: 42 }).map(storable)
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

    runner.describe("follow", () => {
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

      runner.it(
        "random append/truncate/delete/sweep sequences never leave a referenced blob missing, nor an unreferenced one after a sweep",
        () => runSnapshotProperty(layer, options),
        Math.max(timeoutMs, 600_000)
      )
    })

    runner.describe("model-based properties", () => {
      runner.it(
        "random command sequences behave like the model",
        () => runModelProperty(layer, options),
        Math.max(timeoutMs, 600_000)
      )
    })
  })
}

// ---------------------------------------------------------------------------
// Model-based property test
// ---------------------------------------------------------------------------

interface Model {
  /** Keyed by symbolic name ("a", "b", "c"); the real session id adds a per-run prefix. */
  readonly sessions: Map<string, Array<SessionEventEncoded>>
}

const SESSION_NAMES = ["a", "b", "c"] as const

/** The system under test: a live runtime over the layer that a reopen command rebuilds. */
class Real<E> {
  private runtime: ManagedRuntime.ManagedRuntime<Checkpointer, E>
  /** A fresh id space per run keeps runs independent on persistent stores. */
  private readonly prefix = uniquePrefix("m")
  constructor(private readonly layer: Layer.Layer<Checkpointer, E>) {
    this.runtime = ManagedRuntime.make(layer)
  }
  id(name: string): string {
    return this.prefix + name
  }
  run<A>(use: (c: CheckpointerService) => Effect.Effect<A, unknown>): Promise<Exit.Exit<A, unknown>> {
    return this.runtime.runPromiseExit(Effect.flatMap(Checkpointer, use))
  }
  async reopen(): Promise<void> {
    await this.runtime.dispose()
    this.runtime = ManagedRuntime.make(this.layer)
  }
  dispose(): Promise<void> {
    return this.runtime.dispose()
  }
}

type Cmd<E> = fc.AsyncCommand<Model, Real<E>>

const valueOf = <A>(exit: Exit.Exit<A, unknown>, what: string): A => {
  if (Exit.isSuccess(exit)) return exit.value
  return assert.fail(`${what} failed unexpectedly: ${String(exit.cause)}`)
}
const errorOf = (exit: Exit.Exit<unknown, unknown>): unknown =>
  Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined

/** After every mutation: each session's head and contents equal the model's. */
const compareAll = async <E>(model: Model, real: Real<E>, after: string) => {
  for (const name of SESSION_NAMES) {
    const id = real.id(name)
    const expected = model.sessions.get(name) ?? []
    const [head, stored] = valueOf(await real.run((c) => Effect.zip(c.head(id), readAll(c, id))), `${after}: read ${name}`)
    assert.equal(head, expected.length, `${after}: head of ${name}`)
    assert.deepEqual(stored.map((s) => s.seq), expected.map((_, i) => i + 1), `${after}: seqs of ${name}`)
    assert.deepEqual(encodedEvents(stored), expected, `${after}: events of ${name}`)
  }
}

type ExpectMode = { readonly kind: "none" } | { readonly kind: "current" } | { readonly kind: "offset"; readonly by: number }

const expectedHeadFor = (mode: ExpectMode, head: number): number | undefined =>
  mode.kind === "none" ? undefined : mode.kind === "current" ? head : Math.max(0, head + mode.by)

const expectModeArb: fc.Arbitrary<ExpectMode> = fc.oneof(
  fc.constant<ExpectMode>({ kind: "none" }),
  fc.constant<ExpectMode>({ kind: "current" }),
  fc.constantFrom(-2, -1, 1, 3).map((by): ExpectMode => ({ kind: "offset", by }))
)

const commandArbitraries = <E>(reopen: boolean): Array<fc.Arbitrary<Cmd<E>>> => {
  const nameArb = fc.constantFrom(...SESSION_NAMES)
  const check = () => true
  const commands: Array<fc.Arbitrary<Cmd<E>>> = [
    fc.tuple(nameArb, fc.array(simpleEvent, { maxLength: 4 }), expectModeArb).map(([name, events, mode]) => ({
      check,
      async run(model: Model, real: Real<E>) {
        const stored = model.sessions.get(name)
        const head = stored?.length ?? 0
        const expected = expectedHeadFor(mode, head)
        const exit = await real.run((c) => c.append(real.id(name), events, expected))
        if (expected !== undefined && expected !== head) {
          const error: unknown = errorOf(exit)
          assert.ok(error instanceof CheckpointConflictError, `append expecting ${expected}: got ${String(exit)}`)
          assert.deepEqual([error.sessionId, error.expected, error.actual], [real.id(name), expected, head])
        } else {
          assert.equal(valueOf(exit, "append"), head + events.length)
          if (events.length > 0) model.sessions.set(name, [...(stored ?? []), ...events])
        }
        await compareAll(model, real, this.toString())
      },
      toString: () => `append(${name}, ${events.length} events, ${JSON.stringify(mode)})`
    })),
    fc.tuple(nameArb, fc.nat({ max: 12 })).map(([name, sinceSeq]) => ({
      check,
      async run(model: Model, real: Real<E>) {
        const expected = (model.sessions.get(name) ?? []).slice(sinceSeq)
        const stored = valueOf(await real.run((c) => readAll(c, real.id(name), sinceSeq)), "read")
        assert.deepEqual(stored.map((s) => s.seq), expected.map((_, i) => sinceSeq + i + 1), this.toString())
        assert.deepEqual(encodedEvents(stored), expected, this.toString())
      },
      toString: () => `read(${name}, sinceSeq ${sinceSeq})`
    })),
    fc.constant<Cmd<E>>({
      check,
      async run(model: Model, real: Real<E>) {
        const ids = new Map(SESSION_NAMES.map((name) => [real.id(name), name]))
        const listed = valueOf(await real.run((c) => c.list()), "list").filter((s) => ids.has(s.id))
        assert.deepEqual(listed.map((s) => ids.get(s.id)).sort(), [...model.sessions.keys()].sort(), "listed sessions")
        for (let i = 1; i < listed.length; i++) {
          assert.ok(listed[i - 1]!.mtime.getTime() >= listed[i]!.mtime.getTime(), "most recent first")
        }
      },
      toString: () => "list()"
    }),
    nameArb.map((name) => ({
      check,
      async run(model: Model, real: Real<E>) {
        valueOf(await real.run((c) => c.delete(real.id(name))), "delete")
        model.sessions.delete(name)
        await compareAll(model, real, this.toString())
      },
      toString: () => `delete(${name})`
    })),
    fc.tuple(nameArb, fc.nat({ max: 14 }), expectModeArb).map(([name, toSeq, mode]) => ({
      check,
      async run(model: Model, real: Real<E>) {
        const stored = model.sessions.get(name)
        const head = stored?.length ?? 0
        const expected = expectedHeadFor(mode, head)
        const exit = await real.run((c) => c.truncate(real.id(name), toSeq, expected))
        if (expected !== undefined && expected !== head) {
          const error: unknown = errorOf(exit)
          assert.ok(error instanceof CheckpointConflictError, `truncate expecting ${expected}: got ${String(exit)}`)
          assert.deepEqual([error.expected, error.actual], [expected, head])
        } else if (toSeq > head) {
          assert.ok(errorOf(exit) instanceof InvalidSeqError, `truncate past head: got ${String(exit)}`)
        } else {
          assert.equal(valueOf(exit, "truncate"), toSeq)
          if (stored !== undefined && toSeq < head) model.sessions.set(name, stored.slice(0, toSeq))
        }
        await compareAll(model, real, this.toString())
      },
      toString: () => `truncate(${name}, ${toSeq}, ${JSON.stringify(mode)})`
    }))
  ]
  if (reopen) {
    commands.push(fc.constant<Cmd<E>>({
      check,
      async run(model: Model, real: Real<E>) {
        await real.reopen()
        await compareAll(model, real, "reopen")
      },
      toString: () => "reopen()"
    }))
  }
  return commands
}

const runModelProperty = async <E>(layer: Layer.Layer<Checkpointer, E>, options: ConformanceOptions) => {
  await fc.assert(
    fc.asyncProperty(
      fc.commands(commandArbitraries<E>(options.reopen ?? false), { maxCommands: options.maxCommands ?? 40, size: "max" }),
      async (commands) => {
        const real = new Real(layer)
        try {
          await fc.asyncModelRun(() => ({ model: { sessions: new Map() }, real }), commands)
        } finally {
          await real.dispose()
        }
      }
    ),
    { numRuns: options.propertyRuns ?? 200, ...options.fastCheck }
  )
}

// ---------------------------------------------------------------------------
// The snapshot store's invariant, over random sequences
// ---------------------------------------------------------------------------

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
