import { describe, expect, it } from "vitest"
import { branchThrough, checkpointChanges } from "../src/core/checkpointChanges.js"
import {
  AssistantMessage,
  FileChange,
  FileSnapshot,
  Session,
  type SessionEvent,
  type StoredEvent,
  ToolResult,
  UserMessage,
  WorkspaceCaptured
} from "../src/core.js"

const stored = (events: ReadonlyArray<SessionEvent>): Array<StoredEvent> =>
  events.map((event, index) => ({ seq: index + 1, ts: 1_700_000_000_000 + index, event }))
const prompt = (text: string) => new UserMessage({ content: text, origin: "user" })
const toolUse = (id: string) => new AssistantMessage({ content: [{ type: "tool_use", id, name: "write_file", input: { path: "a.txt" } }] })
const hash = (digit: string) => digit.repeat(64)
const left = (digit: string) => ({ _tag: "file" as const, sha256: hash(digit), size: 3, mode: 0o644 })

describe("what a checkpoint's turn changed (core/checkpointChanges.ts)", () => {
  it("a turn's change stays its own whatever later turns did; a turn cut short shows what it left as unknown", () => {
    const state = Session.fold(stored([
      prompt("one"), // 1
      toolUse("t1"), // 2
      new FileSnapshot({ toolUseId: "t1", path: "a.txt", state: { _tag: "missing" } }), // 3
      new FileChange({ toolUseId: "t1", path: "a.txt", operation: "write", after: left("1") }), // 4
      new ToolResult({ toolUseId: "t1", toolName: "write_file", content: "ok", isError: false }), // 5
      prompt("two"), // 6
      toolUse("t2"), // 7
      // Snapshotted, then never changed: the tool was cut short.
      new FileSnapshot({ toolUseId: "t2", path: "a.txt", state: { _tag: "stored", sha256: hash("1"), size: 3, mode: 0o644 } }), // 8
      prompt("three") // 9
    ]))
    expect(checkpointChanges(state, 1)).toEqual([
      { path: "a.txt", before: { kind: "absent" }, after: { kind: "file", sha256: hash("1"), size: 3, mode: 0o644, data: undefined } }
    ])
    expect(checkpointChanges(state, 6)).toEqual([
      {
        path: "a.txt",
        before: { kind: "file", sha256: hash("1"), size: 3, mode: 0o644, data: undefined },
        after: { kind: "unknown", reason: expect.stringContaining("never recorded its change") }
      }
    ])
    expect(checkpointChanges(state, 9)).toEqual([])
  })

  it("what the person changed between turns is not the turn's", () => {
    const capture = (digit: string) =>
      new WorkspaceCaptured({
        cause: { _tag: "checkpoint" },
        coverage: "c",
        changes: [{ path: "b.txt", state: { _tag: "stored", sha256: hash(digit), size: 3, mode: 0o644 } }]
      })
    const state = Session.fold(stored([
      capture("1"), // 1: the workspace before the first prompt
      prompt("one"), // 2: the agent changes nothing
      new AssistantMessage({ content: [{ type: "text", text: "nothing to do" }] }), // 3
      capture("2"), // 4: b.txt edited by hand before the next prompt
      prompt("two") // 5
    ]))
    expect(checkpointChanges(state, 2)).toEqual([])
  })

  it("a branch through a checkpoint that is not on the current one; none through a seq on no branch", () => {
    const state = Session.fold(stored([prompt("one"), prompt("two")]))
    expect(branchThrough(state, 2)).toBe(state)
    expect(branchThrough(state, 99)).toBeUndefined()
  })
})
