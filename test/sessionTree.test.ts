/**
 * The session as a tree, in the pure fold: a `LeafMoved` moves the current leaf, later events
 * continue the branch ending there, and the state is always the fold of that branch alone —
 * whether the log is folded event by event, at once (two passes, the current branch only) or in
 * two parts. Nothing before a move is lost: every branch can be moved back to.
 */
import { Equal, FastCheck as fc, Schema } from "effect"
import { describe, expect, it } from "vitest"
import {
  AssistantMessage,
  LeafMoved,
  Session,
  SessionEvent,
  type StoredEvent,
  UserMessage,
  WorkspaceCaptured
} from "../src/core.js"
import { sha256Hex } from "../src/core/internal/sha256.js"

type Action =
  | { readonly kind: "prompt"; readonly text: string }
  | { readonly kind: "reply"; readonly text: string }
  | { readonly kind: "capture"; readonly path: string; readonly content: string }
  | { readonly kind: "move"; readonly pick: number; readonly reason: "restore" | "undo" | "redo" | "switch" }
  | { readonly kind: "oddMove"; readonly to: number }

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  fc.record({ kind: fc.constant("prompt" as const), text: fc.string({ minLength: 1, maxLength: 6 }) }),
  fc.record({ kind: fc.constant("reply" as const), text: fc.string({ maxLength: 6 }) }),
  fc.record({ kind: fc.constant("capture" as const), path: fc.constantFrom("a.ts", "b.ts", "src/c.ts"), content: fc.string({ maxLength: 4 }) }),
  fc.record({ kind: fc.constant("move" as const), pick: fc.nat(), reason: fc.constantFrom("restore" as const, "undo" as const, "redo" as const, "switch" as const) }),
  fc.record({ kind: fc.constant("oddMove" as const), to: fc.nat({ max: 40 }) })
)

const encoder = new TextEncoder()

/** A log built from the actions, with a model of the tree beside it: each node's parent, the leaf, the move targets. */
const build = (actions: ReadonlyArray<Action>) => {
  const log: Array<StoredEvent> = []
  const parent = new Map<number, number>()
  const targets = new Set<number>([0])
  let leaf = 0
  const add = (event: SessionEvent) => {
    const seq = log.length + 1
    log.push({ seq, ts: 1_000 + seq, event })
    return seq
  }
  const node = (event: SessionEvent) => {
    if (event._tag === "UserMessage") targets.add(leaf)
    const seq = add(event)
    parent.set(seq, leaf)
    leaf = seq
  }
  for (const action of actions) {
    switch (action.kind) {
      case "prompt":
        node(new UserMessage({ content: action.text, origin: "user" }))
        break
      case "reply":
        node(new AssistantMessage({ content: [{ type: "text", text: action.text }] }))
        break
      case "capture": {
        const data = encoder.encode(action.content)
        node(new WorkspaceCaptured({
          cause: { _tag: "checkpoint" },
          coverage: "c",
          changes: [{ path: action.path, state: { _tag: "stored", sha256: sha256Hex(data), size: data.length, mode: 0o644 } }]
        }))
        break
      }
      case "move": {
        const choices = Array.from(targets).sort((a, b) => a - b)
        const to = choices[action.pick % choices.length]!
        add(new LeafMoved({ from: leaf, to, reason: action.reason }))
        targets.add(leaf)
        leaf = to
        break
      }
      case "oddMove": {
        // A move to a point no move may go to (not before a user message, never left, never a target): not followed.
        const seq = add(new LeafMoved({ from: leaf, to: action.to, reason: "switch" }))
        if (targets.has(action.to)) {
          targets.add(leaf)
          leaf = action.to
        } else {
          log[seq - 1] = { ...log[seq - 1]!, event: new LeafMoved({ from: leaf, to: action.to, reason: "switch" }) }
        }
        break
      }
    }
  }
  const branch: Array<StoredEvent> = []
  for (let at = leaf; at > 0; at = parent.get(at)!) branch.unshift(log[at - 1]!)
  return { log, leaf, branch }
}

/** What the current branch shows, comparable across folds. */
const picture = (state: Session.SessionState) => {
  const encode = Schema.encodeSync(SessionEvent)
  return {
    leaf: state.leaf,
    conversation: Session.conversation(state).entries.map((entry) => ({ seq: entry.seq, event: encode(entry.event) })),
    checkpoints: Session.checkpoints(state).map(({ files, prompt, seq }) => ({ seq, prompt, files })),
    workspace: Array.from(state.workspace).sort(([a], [b]) => (a < b ? -1 : 1))
  }
}

describe("the session tree in the fold", () => {
  it("the state is the fold of the current branch alone, however the log is folded", () => {
    fc.assert(
      fc.property(fc.array(actionArb, { maxLength: 40 }), fc.nat(), (actions, cut) => {
        const { branch, leaf, log } = build(actions)
        let incremental = Session.emptySessionState
        for (const stored of log) incremental = Session.step(incremental, stored)
        const atOnce = Session.fold(log)
        const k = cut % (log.length + 1)
        const inTwoParts = Session.fold(log.slice(k), Session.fold(log.slice(0, k)))
        // The branch folded as a linear session: its events alone, in order.
        const linear = Session.fold(branch.map((stored) => ({ ...stored })), Session.emptySessionState)
        for (const state of [incremental, atOnce, inTwoParts]) {
          expect(state.branchUnknown).toBe(false)
          expect(state.head).toBe(log.length)
          expect(state.leaf).toBe(leaf)
          expect(picture(state)).toEqual({ ...picture(linear), leaf })
        }
        expect(Equal.equals(incremental, atOnce)).toBe(true)
        expect(Equal.equals(inTwoParts, atOnce)).toBe(true)
      }),
      { numRuns: 300 }
    )
  })

  it("undo reverses the last move and redo the last undo; a restore or a switch empties the redo history", () => {
    const prompt = (text: string) => new UserMessage({ content: text, origin: "user" })
    const log: Array<StoredEvent> = []
    const add = (event: SessionEvent) => log.push({ seq: log.length + 1, ts: log.length + 1, event })
    add(prompt("one")) // 1
    add(new AssistantMessage({ content: [{ type: "text", text: "1" }] })) // 2
    add(prompt("two")) // 3
    add(new AssistantMessage({ content: [{ type: "text", text: "2" }] })) // 4
    add(new LeafMoved({ from: 4, to: 2, reason: "restore" })) // 5: back to before "two"
    let state = Session.fold(log)
    expect(state.leaf).toBe(2)
    expect(Session.checkpoints(state).map((checkpoint) => checkpoint.prompt)).toEqual(["one"])
    expect(state.undoable.map((move) => [move.from, move.to])).toEqual([[4, 2]])
    add(prompt("three")) // 6, a new branch from 2
    add(new LeafMoved({ from: 6, to: 4, reason: "undo" })) // 7: back where the restore started
    state = Session.fold(log)
    expect(Session.checkpoints(state).map((checkpoint) => checkpoint.prompt)).toEqual(["one", "two"])
    expect(state.undoable).toEqual([])
    expect(state.redoable.map((move) => [move.from, move.to])).toEqual([[6, 4]])
    add(new LeafMoved({ from: 4, to: 6, reason: "redo" })) // 8: where the undo started, the "three" branch
    state = Session.fold(log)
    expect(Session.checkpoints(state).map((checkpoint) => checkpoint.prompt)).toEqual(["one", "three"])
    expect(state.redoable).toEqual([])
    expect(state.undoable.map((move) => [move.from, move.to])).toEqual([[4, 6]])
    add(new LeafMoved({ from: 6, to: 0, reason: "restore" })) // 9: to before "one"
    state = Session.fold(log)
    expect(state.messages.length).toBe(0)
    expect(state.redoable).toEqual([])
    expect(state.undoable.map((move) => [move.from, move.to])).toEqual([[4, 6], [6, 0]])
    // Every event is still in the log, and every branch can be gone back to.
    expect(state.head).toBe(9)
  })
})
