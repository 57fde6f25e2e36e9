/**
 * Pruning branches through the agent and the promise facade, on every backend: a branch a
 * restore left behind is pruned, shown as pruned, and refused to a switch and an undo with
 * `branch_pruned`; the per-branch usage lists only live branches.
 */
import { describe, expect, it } from "vitest"
import { createLiteAgent, type LiteAgent, RestoreRefusedError } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { BACKENDS } from "./support/agentSim.js"
import { closeAfterEach, promiseCheckpointer, tempDir } from "./support/agent.js"

const track = closeAfterEach()

const write = (content: string) => ({ toolCalls: [{ name: "write_file", input: { path: "a.txt", content } }] })

const refusalOf = async (promise: Promise<unknown>) => {
  const error = await promise.then(() => undefined, (cause: unknown) => cause)
  expect(error).toBeInstanceOf(RestoreRefusedError)
  return error instanceof RestoreRefusedError ? error.refusals.map((refusal) => refusal.reason) : []
}

describe.each(BACKENDS)("pruning branches on the %s backend", (backend) => {
  it("a branch a restore left behind is pruned: shown as pruned, refused to a switch and an undo, gone from the per-branch usage", async () => {
    const checkpointer = promiseCheckpointer(backend)
    const agent: LiteAgent = createLiteAgent({
      model: scripted([write("one"), { text: "1" }, write("two, the old way"), { text: "2" }, write("three, the new way"), { text: "3" }, { text: "4" }]),
      workdir: tempDir("prune-branches"),
      checkpointer
    })
    track(checkpointer)
    track(agent)
    await agent.send("first")
    await agent.send("the old way")
    const second = (await agent.listCheckpoints(agent.sessionId))[1]!
    await agent.restore(agent.sessionId, second.seq)
    await agent.send("the new way")
    const before = await agent.tree(agent.sessionId)
    const oldTip = before.branches.find((branch) => !branch.current)!.leaf
    const usage = (await checkpointer.du({ branches: true })).sessions.find((session) => session.id === agent.sessionId)!
    expect(usage.branches!.map((branch) => branch.tip)).toEqual([oldTip, before.leaf])
    expect(usage.branches!.find((branch) => branch.tip === oldTip)!.own.objects).toBeGreaterThan(0)

    // Nothing is old enough an hour back; anything is with olderThanMs: 0.
    expect((await agent.pruneBranches({ olderThanMs: 60 * 60_000 })).sessions[0]!.kept.map((branch) => branch.reason)).toEqual(["recent"])
    const report = await agent.pruneBranches({ olderThanMs: 0, sessionId: agent.sessionId })
    expect(report.skipped).toEqual([])
    expect(report.sessions.map((session) => [session.sessionId, session.pruned.map((branch) => branch.tip)])).toEqual([[agent.sessionId, [oldTip]]])

    const tree = await agent.tree(agent.sessionId)
    expect(tree.branches.find((branch) => branch.leaf === oldTip)).toMatchObject({ pruned: true, checkpoint: null, current: false })
    expect(tree.checkpoints.map((checkpoint) => checkpoint.prompt)).toEqual(["first", "the new way"])
    expect(tree.undo).toBeUndefined()
    expect(await refusalOf(agent.switchBranch(agent.sessionId, oldTip))).toEqual(["branch_pruned"])
    expect(await refusalOf(agent.undo(agent.sessionId))).toEqual(["branch_pruned"])
    const after = (await checkpointer.du({ branches: true })).sessions.find((session) => session.id === agent.sessionId)!
    expect(after.branches!.map((branch) => branch.tip)).toEqual([tree.leaf])
    expect(after.referenced.objects).toBeLessThan(usage.referenced.objects)
    // The session goes on as before.
    await agent.send("and on")
    expect((await agent.tree(agent.sessionId)).branches.filter((branch) => branch.pruned === true).map((branch) => branch.leaf)).toEqual([oldTip])
  })
})
