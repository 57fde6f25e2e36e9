/**
 * The pure mapping from a session's fold to the `@effect/ai` prompt: the shape providers
 * demand (each tool call answered in the next user turn, results first) even when the log
 * holds something else.
 */
import { describe, expect, it } from "vitest"
import * as Prompt from "@effect/ai/Prompt"
import { Schema } from "effect"
import { promptFromSession, promptOf, UNANSWERED_TOOL_CALL } from "../src/agent/prompt.js"
import {
  AssistantMessage,
  BackgroundCompleted,
  Compaction,
  RuntimeMessage,
  type SessionEvent,
  ToolResult,
  UserMessage
} from "../src/core/events.js"
import * as Session from "../src/core/session.js"

const fold = (events: ReadonlyArray<SessionEvent>) => Session.fold(events.map((event, index) => ({ seq: index + 1, ts: index, event })))
const call = (id: string, name = "bash") => ({ type: "tool_use" as const, id, name, input: { command: id } })
const user = (content: string) => new UserMessage({ content, origin: "user" })

describe("promptFromSession", () => {
  it("maps a plain exchange, with the system prompt first", () => {
    const state = fold([user("hi"), new AssistantMessage({ content: [{ type: "text", text: "hello" }] })])
    expect(promptFromSession(state, "be brief")).toEqual([
      { role: "system", content: "be brief" },
      { role: "user", content: [{ type: "text", text: "hi" }] },
      { role: "assistant", content: [{ type: "text", text: "hello" }] }
    ])
  })

  it("puts a turn's tool results before its texts, whatever order the log has", () => {
    const state = fold([
      user("go"),
      new AssistantMessage({ content: [call("t1")] }),
      new BackgroundCompleted({ taskId: "bg_1", command: "make", exitCode: 0, output: "built\n", outputTruncated: false }),
      new ToolResult({ toolUseId: "t1", toolName: "bash", content: "ok", isError: false })
    ])
    const messages = promptFromSession(state, undefined)
    expect(messages.map((message) => message.role)).toEqual(["user", "assistant", "tool", "user"])
    expect(messages[2]).toMatchObject({ content: [{ type: "tool-result", id: "t1", result: "ok", isFailure: false }] })
    expect(JSON.stringify(messages[3])).toContain("background task completed")
    expect(JSON.stringify(messages[3])).toContain("built")
  })

  it("answers calls left without a result, and turns results of no recent call into text", () => {
    const state = fold([
      user("go"),
      new AssistantMessage({ content: [call("t1"), call("t2")] }),
      new ToolResult({ toolUseId: "t1", toolName: "bash", content: "ok", isError: false }),
      new ToolResult({ toolUseId: "old", toolName: "read_file", content: "stale", isError: false }),
      user("next"),
      new AssistantMessage({ content: [call("t3")] })
    ])
    const messages = promptFromSession(state, undefined)
    expect(messages.map((message) => message.role)).toEqual(["user", "assistant", "tool", "user", "assistant", "tool"])
    expect(messages[2]).toMatchObject({
      content: [
        { id: "t1", isFailure: false },
        { id: "t2", isFailure: true, result: UNANSWERED_TOOL_CALL }
      ]
    })
    expect(JSON.stringify(messages[3])).toContain("result of an earlier read_file call")
    expect(messages[5]).toMatchObject({ content: [{ id: "t3", isFailure: true, result: UNANSWERED_TOOL_CALL }] })
  })

  it("skips empty assistant messages, merges consecutive ones, and marks runtime text", () => {
    const state = fold([
      user("a"),
      new AssistantMessage({ content: [] }),
      new RuntimeMessage({ kind: "repair", content: "previous turn stopped" }),
      user("b"),
      new AssistantMessage({ content: [{ type: "text", text: "" }, { type: "text", text: "one" }] }),
      new AssistantMessage({ content: [{ type: "text", text: "two" }] })
    ])
    expect(promptFromSession(state, "")).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "a" },
          { type: "text", text: "[lite-agent repair]\nprevious turn stopped" },
          { type: "text", text: "b" }
        ]
      },
      { role: "assistant", content: [{ type: "text", text: "one" }, { type: "text", text: "two" }] }
    ])
  })

  it("starts from the compaction summary and the kept messages", () => {
    const state = fold([
      user("old"),
      new AssistantMessage({ content: [{ type: "text", text: "old answer" }] }),
      new Compaction({ summary: "we talked", tokensBefore: 100, tokensAfter: 10 }),
      user("new")
    ])
    expect(promptFromSession(state, undefined)).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "[lite-agent summary of the earlier conversation]\nwe talked" },
          { type: "text", text: "new" }
        ]
      }
    ])
  })

  it("never opens with the model's turn and drops whitespace-only text", () => {
    // A log that starts with the model (written by another tool, or imported).
    const state = fold([
      new AssistantMessage({ content: [{ type: "text", text: "kept answer" }, { type: "text", text: " \n " }] }),
      user("next")
    ])
    const messages = promptFromSession(state, undefined)
    expect(messages.map((message) => message.role)).toEqual(["user", "assistant", "user"])
    expect(messages[0]).toEqual({ role: "user", content: [{ type: "text", text: "[lite-agent note]\nthe conversation continues" }] })
    expect(messages[1]).toEqual({ role: "assistant", content: [{ type: "text", text: "kept answer" }] })
  })

  it("promptOf builds the same prompt that LanguageModel would decode from the encoded messages", () => {
    const state = fold([
      user("go"),
      new AssistantMessage({ content: [{ type: "text", text: "on it" }, call("t1", "write_file")] }),
      new ToolResult({ toolUseId: "t1", toolName: "write_file", content: "wrote a", isError: false }),
      new RuntimeMessage({ kind: "repair", content: "note" }),
      new AssistantMessage({ content: [call("t2")] })
    ])
    const encode = Schema.encodeSync(Prompt.Prompt)
    expect(encode(promptOf(state, "sys"))).toEqual(encode(Prompt.make(promptFromSession(state, "sys"))))
  })

  it("shows a stored argument as a note with its size and hash, never as missing", () => {
    const storedArguments = [{ key: "content", sha256: "a".repeat(64), size: 524288 }]
    const state = fold([
      user("write it"),
      new AssistantMessage({ content: [{ type: "tool_use", id: "t1", name: "write_file", input: { path: "big.txt" }, storedArguments }] }),
      new ToolResult({ toolUseId: "t1", toolName: "write_file", content: "wrote big.txt", isError: false })
    ])
    const [, assistant] = promptFromSession(state, undefined)
    expect(assistant).toMatchObject({ role: "assistant", content: [{ type: "tool-call", id: "t1", params: { path: "big.txt" } }] })
    expect(JSON.stringify(assistant)).toContain(`"content":"[lite-agent: 524288 bytes kept in the session's snapshot store (sha256 ${"a".repeat(64)})`)
  })

  it("extended turn by turn, the prompt equals the one built from scratch, for newer and older states alike", () => {
    const events: Array<SessionEvent> = [
      user("one"),
      new AssistantMessage({ content: [{ type: "text", text: "calling" }, call("t1")] }),
      new ToolResult({ toolUseId: "t1", toolName: "bash", content: "ok", isError: false }),
      new AssistantMessage({ content: [call("t2")] }),
      new BackgroundCompleted({ taskId: "bg_1", command: "make", exitCode: 1, output: "", outputTruncated: false }),
      new ToolResult({ toolUseId: "t2", toolName: "bash", content: "done", isError: false }),
      new AssistantMessage({ content: [{ type: "text", text: "two" }] }),
      new AssistantMessage({ content: [] }),
      user("three"),
      new AssistantMessage({ content: [call("t3")] }),
      new Compaction({ summary: "so far", tokensBefore: 50, tokensAfter: 5, keptFromSeq: 9 }),
      new ToolResult({ toolUseId: "t3", toolName: "bash", content: "later", isError: false }),
      user("four")
    ]
    const stored = events.map((event, index) => ({ seq: index + 1, ts: index, event }))
    const states = [Session.emptySessionState]
    for (const record of stored) states.push(Session.step(states[states.length - 1]!, record))
    const encode = Schema.encodeSync(Prompt.Prompt)
    const fresh = (count: number) => Session.fold(stored.slice(0, count).map((record) => ({ ...record })))
    // Forwards (each call extends the last), then backwards (each call sees a shorter conversation).
    for (const index of [...states.keys(), ...[...states.keys()].reverse()]) {
      const state = states[index]!
      expect(promptFromSession(state, "sys"), `after ${index} events`).toEqual(promptFromSession(fresh(index), "sys"))
      expect(encode(promptOf(state, "sys")), `built, after ${index} events`).toEqual(encode(Prompt.make(promptFromSession(fresh(index), "sys"))))
    }
  })
})
