/**
 * Housekeeping: what a session costs (`sessionStats`) and pruning old sessions
 * (`pruneSessions`), on every backend, through the promise facade.
 */
import { describe, expect, it } from "vitest"
import { AgentBusyError, ConfigurationError, createLiteAgent, type LiteAgent } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { BACKENDS } from "./support/agentSim.js"
import { closeAfterEach, promiseCheckpointer, tempDir } from "./support/agent.js"

const track = closeAfterEach()

const write = (content: string) => ({ toolCalls: [{ name: "write_file", input: { path: "a.txt", content } }] })

describe.each(BACKENDS)("housekeeping on the %s backend", (backend) => {
  const setup = (turns: Parameters<typeof scripted>[0]) => {
    const checkpointer = promiseCheckpointer(backend)
    const agent: LiteAgent = createLiteAgent({ model: scripted(turns), workdir: tempDir("housekeeping"), checkpointer })
    track(checkpointer)
    track(agent)
    return { agent, checkpointer }
  }

  it("sessionStats: events, log bytes, and the snapshot store's blobs", async () => {
    const v1 = "x".repeat(5000)
    const { agent, checkpointer } = setup([write(v1), { text: "1" }, write("v2"), { text: "2" }, write("v3"), { text: "3" }])
    expect(await agent.sessionStats("never-used")).toEqual({ events: 0, logBytes: 0, snapshotBytes: 0, snapshots: 0 })
    await agent.send("first")
    const first = await agent.sessionStats(agent.sessionId)
    // The first write found no file (its snapshot is "missing", which holds no blob); the capture after it stored what it wrote.
    expect(first).toMatchObject({ events: await checkpointer.head(agent.sessionId), snapshots: 1, snapshotBytes: 5000 })
    expect(first.logBytes).toBeGreaterThan(0)
    await agent.send("second")
    await agent.send("third")
    const third = await agent.sessionStats(agent.sessionId)
    // One blob per content, however many snapshots and captures name it: v1, v2, v3.
    expect(third.snapshots).toBe(3)
    // The JSON codec and SQLite store blobs as their bytes: 5000 + 2 + 2.
    expect(third.snapshotBytes).toBe(5004)
    expect(third.logBytes).toBeGreaterThan(first.logBytes)
  })

  it("pruneSessions deletes by age and count, never the current session, and only when idle", async () => {
    const { agent } = setup([
      { text: "a" },
      { text: "b" },
      { text: "c" },
      { toolCalls: [{ name: "shell", input: { command: "sleep 1" } }] },
      { text: "slow" }
    ])
    for (const sessionId of ["old-1", "old-2", "old-3"]) {
      await agent.send("hello", { sessionId })
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    const current = agent.sessionId
    expect(await agent.pruneSessions({ keepLast: 5 })).toEqual([])
    // Most recent first: old-3, old-2, old-1. Keep 1; the current session (never used, not listed) is not touched.
    expect(await agent.pruneSessions({ keepLast: 1 })).toEqual(["old-2", "old-1"])
    expect((await agent.listSessions()).map((session) => session.id)).toEqual(["old-3"])
    await expect(agent.pruneSessions({})).rejects.toBeInstanceOf(ConfigurationError)
    await expect(agent.pruneSessions({ keepLst: 1 } as never)).rejects.toMatchObject({ _tag: "ConfigurationError", option: "keepLst" })

    const running = agent.send("slow", { sessionId: current })
    await new Promise((resolve) => setTimeout(resolve, 200))
    await expect(agent.pruneSessions({ olderThanMs: 0 })).rejects.toBeInstanceOf(AgentBusyError)
    await running
    expect(await agent.pruneSessions({ olderThanMs: 0 })).toEqual(["old-3"])
    expect((await agent.listSessions()).map((session) => session.id)).toEqual([current])
  })

  it("pruneSessions keeps a session a fork still shares, and deletes it with the fork", async () => {
    const { agent } = setup([{ text: "a" }, { text: "b" }])
    await agent.send("hello", { sessionId: "old-1" })
    await agent.send("hello", { sessionId: "old-2" })
    const elsewhere = `${tempDir("housekeeping-fork")}/side`
    await agent.fork("old-1", undefined, { id: "keeper", workdir: elsewhere })
    await agent.clear()
    // Most recent first: keeper, old-2, old-1; old-1 stays while keeper reads its events.
    expect(await agent.pruneSessions({ keepLast: 1 })).toEqual(["old-2"])
    expect((await agent.listSessions()).map((session) => session.id).sort()).toEqual(["keeper", "old-1"])
    expect((await agent.tree("keeper")).forkedFrom).toEqual({ session: "old-1", at: expect.any(Number) })
    expect(await agent.pruneSessions({ olderThanMs: 0 })).toEqual(["keeper", "old-1"])
    expect(await agent.listSessions()).toEqual([])
  })
})
