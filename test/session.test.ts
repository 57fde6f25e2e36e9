import { createHash } from "node:crypto"
import { Arbitrary, Chunk, Effect, Equal, FastCheck as fc, Schema, Stream } from "effect"
import { describe, expect, it } from "vitest"
import {
  AssistantMessage,
  BackgroundCompleted,
  Checkpointer,
  Compaction,
  FileChange,
  FileSnapshot,
  MemoryCheckpointer,
  RestoreEnded,
  RestoreStarted,
  RuntimeMessage,
  Session,
  SessionEvent,
  SessionMetadata,
  type StoredEvent,
  ToolResult,
  UserMessage
} from "../src/core.js"
import { asStored, storable } from "../src/testing.js"

const stored = (events: ReadonlyArray<SessionEvent>, startTs = 1_700_000_000_000): Array<StoredEvent> =>
  events.map((event, i) => ({ seq: i + 1, ts: startTs + i, event }))


/** A comparable picture of a state, independent of object identity (events are re-decoded by backends). */
const picture = (state: Session.SessionState) => {
  const encode = Schema.encodeSync(SessionEvent)
  const conversation = Session.conversation(state)
  return {
    head: state.head,
    lastTs: state.lastTs,
    summary: conversation.summary,
    conversation: conversation.entries.map((e) => ({ seq: e.seq, ts: e.ts, event: encode(e.event) })),
    allMessages: state.messages.toArray().map((e) => e.seq),
    checkpoints: Session.checkpoints(state),
    pending: Session.pendingToolCalls(state),
    files: [...Chunk.toReadonlyArray(Chunk.fromIterable(state.files))]
      .map(([path]) => [path, Session.fileHistory(state, path).map((entry) => ({ ...entry }))] as const)
      .sort(([a], [b]) => (a < b ? -1 : 1)),
    usage: { ...state.usage },
    metadata: { ...state.metadata, labels: [...state.metadata.labels].sort() }
  }
}

const eventsArb = fc.array(Arbitrary.make(SessionEvent), { maxLength: 25 })

describe("fold laws", () => {
  it("incremental step equals batch fold, and folding in two parts equals folding at once", () => {
    fc.assert(
      fc.property(eventsArb, fc.nat(), (events, cut) => {
        const log = stored(events)
        const k = log.length === 0 ? 0 : cut % (log.length + 1)
        let incremental = Session.emptySessionState
        for (const s of log) incremental = Session.step(incremental, s)
        const batch = Session.fold(log)
        expect(Equal.equals(incremental, batch)).toBe(true)
        const prefix = Session.fold(log.slice(0, k))
        const prefixPicture = picture(prefix)
        expect(Equal.equals(Session.fold(log.slice(k), prefix), batch)).toBe(true)
        // Folding onto a state leaves that state as it was.
        expect(picture(prefix)).toEqual(prefixPicture)
        expect(Equal.equals(prefix, Session.fold(log.slice(0, k)))).toBe(true)
      }),
      { numRuns: 200 }
    )
  })

  it("folding a prefix equals the state before the rest of the events", () => {
    fc.assert(
      fc.property(eventsArb, (events) => {
        const log = stored(events)
        let state = Session.emptySessionState
        log.forEach((s, i) => {
          expect(Equal.equals(Session.fold(log.slice(0, i)), state)).toBe(true)
          state = Session.step(state, s)
        })
      }),
      { numRuns: 100 }
    )
  })

  it("truncating to k then folding equals folding the first k events", async () => {
    await fc.assert(
      fc.asyncProperty(eventsArb, fc.nat(), async (generated, cut) => {
        // What a store accepts, and how it keeps it (snapshot bytes go to its snapshot store); a
        // fork's first event starts a new session only (the conformance suite's fork tests store it).
        const events = generated.filter((event) => event._tag !== "SessionForked").map(storable)
        const k = events.length === 0 ? 0 : cut % (events.length + 1)
        const afterTruncate = await Effect.runPromise(
          Effect.gen(function*() {
            const c = yield* Checkpointer
            yield* c.append("s", events)
            yield* c.truncate("s", k)
            return yield* Stream.runFold(c.read("s"), Session.emptySessionState, Session.step)
          }).pipe(Effect.scoped, Effect.provide(MemoryCheckpointer.layer))
        )
        const expected = Session.fold(stored(events.map(asStored)).slice(0, k))
        expect(afterTruncate.head).toBe(k)
        // Timestamps come from the store's clock; compare everything else.
        const strip = (state: Session.SessionState) => {
          const { lastTs: _lastTs, conversation, checkpoints, ...rest } = picture(state)
          return {
            ...rest,
            conversation: conversation.map(({ ts: _ts, ...entry }) => entry),
            checkpoints: checkpoints.map(({ ts: _ts, ...checkpoint }) => checkpoint)
          }
        }
        expect(strip(afterTruncate)).toEqual(strip(expected))
      }),
      { numRuns: 100 }
    )
  })
})

describe("projections", () => {
  const prompt = (text: string) => new UserMessage({ content: text, origin: "user" })
  const toolUse = (id: string, name = "write_file") =>
    new AssistantMessage({ content: [{ type: "tool_use", id, name, input: { path: "a" } }] })
  const content = (text: string) => {
    const data = new TextEncoder().encode(text)
    return { _tag: "content" as const, data, mode: 0o644, size: data.length, sha256: createHash("sha256").update(data).digest("hex") }
  }

  it("checkpoints: one per real user prompt, oldest first; runtime messages are not checkpoints", () => {
    const state = Session.fold(stored([
      new SessionMetadata({ formatVersion: 1 }),
      prompt("first"),
      new RuntimeMessage({ kind: "reminder", content: "remember" }),
      new RuntimeMessage({ kind: "repair", content: "closed" }),
      new RuntimeMessage({ kind: "background_completion", content: "done" }),
      new BackgroundCompleted({ taskId: "t", command: "ls", exitCode: 0, output: "", outputTruncated: false }),
      new UserMessage({ content: [{ type: "text", text: "second" }, { type: "text", text: "in blocks" }], origin: "user" })
    ]))
    expect(Session.checkpoints(state).map((c) => [c.seq, c.prompt])).toEqual([[2, "first"], [7, "second\nin blocks"]])
    expect(Session.checkpoints(state)[0]!.ts).toBe(1_700_000_000_001)
  })

  it("a restore's intent is pending until a RestoreEnded names it; never a message, a checkpoint or a file change", () => {
    const intent = new RestoreStarted({
      checkpoint: 1,
      conversation: true,
      files: [{ path: "a", before: content("agent's"), target: { _tag: "absent" } }]
    })
    const events = stored([prompt("one"), toolUse("t1"), intent, new RestoreEnded({ startedSeq: 2, outcome: "undone" })])
    const open = Session.fold(events.slice(0, 3))
    expect(open.pendingRestore).toMatchObject({ seq: 3, event: { checkpoint: 1 } })
    const without = Session.fold(events.slice(0, 2))
    expect({ ...picture(open), head: 0, lastTs: 0 }).toEqual({ ...picture(without), head: 0, lastTs: 0 })
    // An end naming another intent closes nothing; one naming it does.
    expect(Session.fold(events).pendingRestore).toMatchObject({ seq: 3 })
    const closed = Session.fold([{ seq: 4, ts: 0, event: new RestoreEnded({ startedSeq: 3, outcome: "finished" }) }], open)
    expect(closed.pendingRestore).toBeUndefined()
  })

  it("checkpoints list the files changed after them, split by whether restore can put them back", () => {
    const state = Session.fold(stored([
      prompt("one"), // 1
      toolUse("t1"), // 2
      new FileSnapshot({ toolUseId: "t1", path: "a.txt", state: content("old a") }), // 3
      new FileChange({ toolUseId: "t1", path: "a.txt", operation: "write" }), // 4
      new FileSnapshot({ toolUseId: "t1", path: "new.txt", state: { _tag: "missing" } }), // 5
      new FileChange({ toolUseId: "t1", path: "new.txt", operation: "write" }), // 6
      new ToolResult({ toolUseId: "t1", toolName: "write_file", content: "ok", isError: false }), // 7
      prompt("two"), // 8
      new FileSnapshot({ toolUseId: "t2", path: "big.bin", state: { _tag: "unavailable", reason: "too large" } }), // 9
      new FileChange({ toolUseId: "t2", path: "big.bin", operation: "write" }), // 10
      new FileChange({ toolUseId: "t2", path: "nosnap.txt", operation: "edit" }), // 11
      new FileSnapshot({
        toolUseId: "t2",
        path: "cut.txt",
        state: { ...content("short"), size: 99 } // recorded size does not match: truncated
      }), // 12
      new FileChange({ toolUseId: "t2", path: "cut.txt", operation: "write" }), // 13
      new FileSnapshot({ toolUseId: "t2", path: "a.txt", state: content("a after one") }), // 14
      new FileChange({ toolUseId: "t2", path: "a.txt", operation: "edit" }), // 15
      prompt("three") // 16
    ]))
    const [one, two, three] = Session.checkpoints(state)
    expect(one).toMatchObject({
      seq: 1,
      files: ["a.txt", "new.txt"],
      unavailableFiles: ["big.bin", "cut.txt", "nosnap.txt"]
    })
    expect(two).toMatchObject({ seq: 8, files: ["a.txt"], unavailableFiles: ["big.bin", "cut.txt", "nosnap.txt"] })
    expect(three).toMatchObject({ seq: 16, files: [], unavailableFiles: [] })
  })

  it("pending tool calls are the calls without a result, in call order", () => {
    const state = Session.fold(stored([
      prompt("go"),
      new AssistantMessage({
        content: [
          { type: "text", text: "doing" },
          { type: "tool_use", id: "z-first", name: "bash", input: { command: "ls" } },
          { type: "tool_use", id: "a-second", name: "read_file", input: { path: "x" } }
        ]
      }),
      toolUse("third"),
      new ToolResult({ toolUseId: "third", toolName: "write_file", content: "ok", isError: false })
    ]))
    expect(Session.pendingToolCalls(state).map((p) => [p.toolUseId, p.name, p.seq])).toEqual([
      ["z-first", "bash", 2],
      ["a-second", "read_file", 2]
    ])
  })

  it("the conversation respects the last compaction boundary", () => {
    const events = [
      prompt("p1"), // 1
      new AssistantMessage({ content: [{ type: "text", text: "a1" }] }), // 2
      prompt("p2"), // 3
      new AssistantMessage({ content: [{ type: "text", text: "a2" }] }), // 4
      new Compaction({ summary: "summary of p1..a2", keptFromSeq: 3, tokensBefore: 100, tokensAfter: 10 }), // 5
      prompt("p3") // 6
    ]
    const kept = Session.conversation(Session.fold(stored(events)))
    expect(kept.summary).toBe("summary of p1..a2")
    expect(kept.entries.map((e) => e.seq)).toEqual([3, 4, 6])

    const noKeep = Session.conversation(Session.fold(stored([
      ...events.slice(0, 4),
      new Compaction({ summary: "all of it", tokensBefore: 100, tokensAfter: 5 }),
      prompt("p3")
    ])))
    expect(noKeep.summary).toBe("all of it")
    expect(noKeep.entries.map((e) => e.seq)).toEqual([6])

    const none = Session.conversation(Session.fold(stored(events.slice(0, 4))))
    expect(none.summary).toBeUndefined()
    expect(none.entries.map((e) => e.seq)).toEqual([1, 2, 3, 4])
    // Checkpoints are not affected by compaction: the anchors stay restorable.
    expect(Session.checkpoints(Session.fold(stored(events))).map((c) => c.seq)).toEqual([1, 3, 6])
  })

  it("token usage adds up and metadata merges, later values winning", () => {
    const state = Session.fold(stored([
      new SessionMetadata({ formatVersion: 1, title: "t1", labels: { a: "1" } }),
      new AssistantMessage({ content: [], usage: { inputTokens: 10, outputTokens: 2 } }),
      new AssistantMessage({ content: [], usage: { inputTokens: 5, outputTokens: 1 } }),
      new SessionMetadata({ formatVersion: 1, model: "m", labels: { b: "2", a: "3" } })
    ]))
    expect({ ...state.usage }).toEqual({ inputTokens: 15, outputTokens: 3 })
    expect(state.metadata.title).toBe("t1")
    expect(state.metadata.model).toBe("m")
    expect([...state.metadata.labels].sort()).toEqual([["a", "3"], ["b", "2"]])
  })

  it("the empty session has head 0 and nothing else", () => {
    expect(Session.fold([]).head).toBe(0)
    expect(Session.checkpoints(Session.emptySessionState)).toEqual([])
    expect(Session.conversation(Session.emptySessionState).entries).toEqual([])
  })
})
