/**
 * The pure half of compaction, over random conversations (tool calls answered at once, late,
 * or never; background completions in between; crash repairs; earlier compactions): the cut
 * never separates a call from its result, and the prompt after the `Compaction` event is
 * system + summary + kept tail, in the shape providers accept.
 */
import { FastCheck as fc } from "effect"
import { describe, expect, it } from "vitest"
import { normalizeTranscript, planCompaction, transcriptItems } from "../src/agent/compactionPlan.js"
import { promptFromSession } from "../src/agent/prompt.js"
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

type Op =
  | { readonly op: "user" }
  | { readonly op: "text" }
  | { readonly op: "background" }
  | { readonly op: "repair" }
  | { readonly op: "compact" }
  | { readonly op: "call"; readonly answered: ReadonlyArray<boolean>; readonly late: boolean }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ op: "user" as const }) },
  { weight: 3, arbitrary: fc.constant({ op: "text" as const }) },
  { weight: 1, arbitrary: fc.constant({ op: "background" as const }) },
  { weight: 1, arbitrary: fc.constant({ op: "repair" as const }) },
  { weight: 1, arbitrary: fc.constant({ op: "compact" as const }) },
  {
    weight: 4,
    arbitrary: fc.record({
      op: fc.constant("call" as const),
      answered: fc.array(fc.boolean(), { minLength: 1, maxLength: 3 }),
      late: fc.boolean()
    })
  }
)

/** The events a run of ops would log (a repair answers every call left open, as the agent's does). */
const eventsOf = (ops: ReadonlyArray<Op>): Array<SessionEvent> => {
  const events: Array<SessionEvent> = []
  const open: Array<{ id: string; name: string }> = []
  let calls = 0
  let lastUserSeq: number | undefined
  for (const [index, step] of ops.entries()) {
    switch (step.op) {
      case "user":
        events.push(new UserMessage({ content: `prompt ${index} ${"words ".repeat(index % 7)}`, origin: "user" }))
        lastUserSeq = events.length
        break
      case "text":
        events.push(new AssistantMessage({ content: [{ type: "text", text: `answer ${index} ${"more ".repeat(index % 11)}` }] }))
        break
      case "background":
        events.push(new BackgroundCompleted({ taskId: `bg_${index}`, command: "make", exitCode: 0, output: "ok\n".repeat(index % 5), outputTruncated: false }))
        break
      case "repair":
        for (const call of open.splice(0)) {
          events.push(new ToolResult({ toolUseId: call.id, toolName: call.name, content: "interrupted", isError: true }))
        }
        events.push(new RuntimeMessage({ kind: "repair", content: "the previous turn stopped" }))
        break
      case "compact":
        events.push(new Compaction({
          summary: `summary at ${index}`,
          tokensBefore: 100,
          tokensAfter: 10,
          ...(lastUserSeq === undefined ? {} : { keptFromSeq: lastUserSeq })
        }))
        break
      case "call": {
        const made = step.answered.map(() => ({ id: `toolu_${++calls}`, name: calls % 2 === 0 ? "bash" : "read_file" }))
        events.push(new AssistantMessage({
          content: made.map((call) => ({ type: "tool_use" as const, id: call.id, name: call.name, input: { n: calls } }))
        }))
        if (step.late) events.push(new BackgroundCompleted({ taskId: `bg_late_${index}`, command: "sleep 1", exitCode: 0, output: "", outputTruncated: false }))
        made.forEach((call, i) => {
          if (step.answered[i]) events.push(new ToolResult({ toolUseId: call.id, toolName: call.name, content: "x".repeat(index * 13), isError: false }))
          else open.push(call)
        })
        break
      }
    }
  }
  return events
}

const fold = (events: ReadonlyArray<SessionEvent>) => Session.fold(events.map((event, index) => ({ seq: index + 1, ts: index, event })))

/** Non-system roles, with a tool message counted as the user's side (providers merge them into one user turn). */
const sides = (messages: ReturnType<typeof promptFromSession>) =>
  messages.filter((message) => message.role !== "system").map((message) => (message.role === "assistant" ? "A" : "U"))

describe("planCompaction over random conversations", () => {
  it("never splits a call from its result, and the projected prompt is system + summary + a valid kept tail", () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 40 }), fc.nat({ max: 400 }), (ops, keep) => {
        const state = fold(eventsOf(ops))
        const plan = planCompaction(state, keep)
        if ("nothingToReduce" in plan) return
        const { entries } = Session.conversation(state)
        expect([...plan.summarized, ...plan.kept]).toEqual(entries)
        expect(plan.keptFromSeq).toBe(plan.kept[0]?.seq)
        if (plan.kept.length > 0) expect(plan.kept[0]!.event._tag).toBe("UserMessage")

        // No call summarized whose result is kept.
        const summarizedCalls = new Set(plan.summarized.flatMap(({ event }) =>
          event._tag === "AssistantMessage" ? event.content.flatMap((block) => (block.type === "tool_use" ? [block.id] : [])) : []
        ))
        for (const { event } of plan.kept) {
          if (event._tag === "ToolResult") expect(summarizedCalls.has(event.toolUseId)).toBe(false)
        }

        // The summarizer sees every call answered.
        const transcript = normalizeTranscript(plan.summarized.flatMap(({ event }) => transcriptItems(event)))
        const results = new Set(transcript.items.flatMap((item) => (item.role === "tool result" ? [item.toolUseId] : [])))
        for (const item of transcript.items) if (item.role === "tool call") expect(results.has(item.toolUseId)).toBe(true)

        // The prompt after the Compaction event.
        const projected = Session.step(state, {
          seq: state.head + 1,
          ts: 0,
          event: new Compaction({
            summary: "THE SUMMARY",
            tokensBefore: 1,
            tokensAfter: 0,
            ...(plan.keptFromSeq === undefined ? {} : { keptFromSeq: plan.keptFromSeq })
          })
        })
        const messages = promptFromSession(projected, "sys")
        expect(messages[0]).toEqual({ role: "system", content: "sys" })
        expect(JSON.stringify(messages[1])).toContain("THE SUMMARY")
        expect(messages[1]!.role).toBe("user")
        const roles = sides(messages)
        roles.forEach((side, i) => {
          if (i > 0 && side === "A") expect(roles[i - 1]).toBe("U")
        })
        // Every call answered in the message right after it, with exactly its ids; no result without its call.
        messages.forEach((message, i) => {
          if (message.role === "assistant" && typeof message.content !== "string") {
            const ids = message.content.flatMap((part) => (part.type === "tool-call" ? [part.id] : []))
            if (ids.length === 0) return
            const next = messages[i + 1]
            expect(next?.role).toBe("tool")
            if (next?.role === "tool") expect(next.content.map((part) => part.id).sort()).toEqual([...ids].sort())
          }
          if (message.role === "tool") expect(messages[i - 1]?.role).toBe("assistant")
        })
        const keptPrompts = plan.kept.flatMap(({ event }) => (event._tag === "UserMessage" ? [event.content] : []))
        const promptTexts = JSON.stringify(messages)
        for (const text of keptPrompts) expect(promptTexts).toContain(JSON.stringify(text).slice(1, -1))
      }),
      { numRuns: 300 }
    )
  })

  it("keeps the longest tail within keepRecentTokens, and summarizes everything when even the last prompt's turn is larger", () => {
    const state = fold([
      new UserMessage({ content: "one", origin: "user" }),
      new AssistantMessage({ content: [{ type: "text", text: "a".repeat(400) }] }),
      new UserMessage({ content: "two", origin: "user" }),
      new AssistantMessage({ content: [{ type: "text", text: "b".repeat(400) }] }),
      new UserMessage({ content: "three", origin: "user" }),
      new AssistantMessage({ content: [{ type: "text", text: "c".repeat(400) }] })
    ])
    const keptPrompts = (keep: number) => {
      const plan = planCompaction(state, keep)
      if ("nothingToReduce" in plan) throw new Error(plan.nothingToReduce)
      return plan.kept.flatMap(({ event }) => (event._tag === "UserMessage" ? [event.content] : []))
    }
    expect(keptPrompts(250)).toEqual(["two", "three"])
    expect(keptPrompts(120)).toEqual(["three"])
    expect(keptPrompts(50)).toEqual([])
    expect(planCompaction(fold([new UserMessage({ content: "only", origin: "user" })]), 0)).toMatchObject({
      nothingToReduce: "only 1 message(s) could be summarized"
    })
  })

  it("keeps the summarizer's transcript within its budget: the start and the end, the middle said to be left out", () => {
    const items = Array.from({ length: 100 }, (_, i) => ({ role: "assistant" as const, text: `message ${i} `.padEnd(960, ".") }))
    const fitted = normalizeTranscript(items, 20_000)
    expect(fitted.omitted).toBeGreaterThan(0)
    expect(fitted.items[0]!.text).toContain("message 0 ")
    expect(fitted.items.at(-1)!.text).toContain("message 99 ")
    expect(fitted.items.some((item) => item.role === "runtime" && item.text.includes(`${fitted.omitted} message(s) left out`))).toBe(true)
    expect(fitted.items.reduce((total, item) => total + item.text.length, 0)).toBeLessThanOrEqual(20_000)
    expect(fitted.items).toHaveLength(100 - fitted.omitted + 1)
    expect(normalizeTranscript(items).omitted).toBe(0)
  })
})
