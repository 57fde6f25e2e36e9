/**
 * The one picture of a session's tree that the terminal and the viewer draw: the current branch
 * flat, other branches where they part, exactly one row where the session is — for trees made by
 * restores, switches and undos in the fold, and for any such tree at random.
 */
import { FastCheck as fc } from "effect"
import { describe, expect, it } from "vitest"
import { AssistantMessage, LeafMoved, Session, type SessionEvent, type StoredEvent, UserMessage } from "../src/core.js"
import { pictureRows, treePicture } from "../src/core/treePicture.js"

/** A log written by prompts, replies and moves; `to` names a node by the prompt it comes before. */
const logOf = (steps: ReadonlyArray<string | { readonly before: string } | { readonly reply: string }>) => {
  const log: Array<StoredEvent> = []
  const promptSeq = new Map<string, number>()
  const parents: Array<number> = []
  let leaf = 0
  const add = (event: SessionEvent, node: boolean) => {
    const seq = log.length + 1
    log.push({ seq, ts: 1_000 + seq, event })
    if (node) {
      parents[seq] = leaf
      leaf = seq
    }
    return seq
  }
  for (const step of steps) {
    if (typeof step === "string") promptSeq.set(step, add(new UserMessage({ content: step, origin: "user" }), true))
    else if ("reply" in step) add(new AssistantMessage({ content: [{ type: "text", text: step.reply }] }), true)
    else {
      const to = parents[promptSeq.get(step.before)!]!
      add(new LeafMoved({ from: leaf, to, reason: "restore" }), false)
      leaf = to
    }
  }
  return { log, promptSeq }
}

const shown = (state: Session.SessionState, folded?: ReadonlySet<number>) =>
  pictureRows(treePicture(Session.tree(state)), folded).map((row) =>
    `${"  ".repeat(row.depth)}${row.kind === "tip" ? `tip${row.here ? " (here)" : ""}${row.folded === undefined ? "" : ` +${row.folded}`}` : row.checkpoint!.prompt}${
      row.parts ? " <" : ""
    }`
  )

describe("the tree's picture", () => {
  it("a long branch is one flat list, whatever its length", () => {
    const prompts = Array.from({ length: 40 }, (_, index) => `p${index}`)
    const { log } = logOf(prompts.flatMap((prompt) => [prompt, { reply: "ok" }]))
    const rows = shown(Session.fold(log))
    expect(rows).toEqual([...prompts, "tip (here)"])
  })

  it("after a restore the current branch stays flat and the branch left behind parts where it left", () => {
    const { log } = logOf(["one", { reply: "1" }, "two", { reply: "2" }, "three", { reply: "3" }, { before: "two" }, "two again", { reply: "2'" }])
    expect(shown(Session.fold(log))).toEqual([
      "one",
      "  two <",
      "  three",
      "  tip",
      "two again",
      "tip (here)"
    ])
  })

  it("a restore with nothing sent since: the session is right after the checkpoint it went back to", () => {
    const { log } = logOf(["one", { reply: "1" }, "two", { reply: "2" }, { before: "two" }])
    expect(shown(Session.fold(log))).toEqual(["one", "  two <", "  tip", "tip (here)"])
  })

  it("a branch left from before the first prompt parts at the start; nested partings nest once each", () => {
    const { log } = logOf([
      "a", { reply: "1" }, "b", { reply: "2" }, "c", { reply: "3" },
      { before: "a" }, "x", { reply: "4" },
      { before: "c" }, "c2", { reply: "5" },
      { before: "x" }, "y", { reply: "6" }
    ])
    // The current branch is y; a's branch parts at the start (a, b, c), and c2's from it at b:
    // of two branches the older goes on in the list.
    expect(shown(Session.fold(log))).toEqual([
      "  a <",
      "  b",
      "    c2 <",
      "    tip",
      "  c",
      "  tip",
      "  x <",
      "  tip",
      "y",
      "tip (here)"
    ])
  })

  it("a folded branch shows its tip and how much it hides", () => {
    const { log } = logOf(["one", { reply: "1" }, "two", { reply: "2" }, "three", { reply: "3" }, { before: "two" }, "two again", { reply: "2'" }])
    const state = Session.fold(log)
    const side = treePicture(Session.tree(state)).main.steps[0]!.sideBranches[0]!
    expect(shown(state, new Set([side.tip]))).toEqual(["one", "  tip +2 <", "two again", "tip (here)"])
  })

  it("any tree: every checkpoint and every branch's tip once, exactly one row where the session is, the current branch at depth 0", () => {
    type Step = string | { readonly before: string } | { readonly reply: string }
    const stepsArb = fc.array(fc.oneof(fc.constant("p" as const), fc.constant("reply" as const), fc.nat({ max: 30 })), { maxLength: 60 })
    fc.assert(
      fc.property(stepsArb, (choices) => {
        const steps: Array<Step> = []
        const prompts: Array<string> = []
        for (const choice of choices) {
          if (choice === "p") {
            prompts.push(`p${prompts.length}`)
            steps.push(prompts.at(-1)!)
          } else if (choice === "reply") steps.push({ reply: "r" })
          else if (prompts.length > 0) steps.push({ before: prompts[choice % prompts.length]! })
        }
        const state = Session.fold(logOf(steps).log)
        const tree = Session.tree(state)
        const rows = pictureRows(treePicture(tree))
        const checkpointRows = rows.filter((row) => row.kind === "checkpoint").map((row) => row.seq)
        expect([...checkpointRows].sort((a, b) => a - b)).toEqual(tree.checkpoints.map((checkpoint) => checkpoint.seq).sort((a, b) => a - b))
        const tipRows = rows.filter((row) => row.kind === "tip").map((row) => row.seq)
        expect([...tipRows].sort((a, b) => a - b)).toEqual(tree.branches.filter((branch) => branch.pruned !== true).map((branch) => branch.leaf))
        expect(rows.filter((row) => row.here).map((row) => row.seq)).toEqual([tree.leaf])
        expect(rows.filter((row) => row.depth === 0 && row.kind === "checkpoint").map((row) => row.seq)).toEqual(
          tree.checkpoints.filter((checkpoint) => checkpoint.current).map((checkpoint) => checkpoint.seq)
        )
        // A side branch is one level deeper than the branch it parts from, never more.
        for (const [index, row] of rows.entries()) {
          if (index > 0) expect(row.depth).toBeLessThanOrEqual(rows[index - 1]!.depth + 1)
        }
      }),
      { numRuns: 300 }
    )
  })
})
