/**
 * The session tree: a restore, its undo, a switch to another branch and a fork on a 5,000-event
 * session against the same on a 50-event session (file backend, the whole workspace captured),
 * and the fold of a log whose current branch has 50 events among 5,000 against a linear
 * 50-event log. Medians of `ROUNDS` rounds; each figure a ratio against a baseline of the run.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { AssistantMessage, LeafMoved, Session, type StoredEvent, UserMessage } from "../src/core.js"
import { createLiteAgent, fileCheckpointer } from "../src/index.js"
import { scripted, type ScriptedTurn } from "../src/provider.js"
import { median, ms } from "./shared.js"

const ROUNDS = 7

interface Moves {
  readonly events: number
  readonly restoreMs: number
  readonly undoMs: number
  readonly switchMs: number
  readonly forkMs: number
}

/**
 * A collection before each timed operation (the bench runs with --expose-gc): none pays for the
 * garbage the operations before it left, which a larger session's heap makes dearer to collect.
 */
const gc = () => (globalThis as { gc?: () => void }).gc?.()

/** A session of about `events` events (text turns first, then file-writing turns), then restores, undos and switches timed. */
const measureMoves = async (events: number): Promise<Moves> => {
  const workdir = mkdtempSync(join(tmpdir(), "lite-agent-bench-tree-work-"))
  for (let i = 0; i < 20; i++) writeFileSync(join(workdir, `f${i}.ts`), `export const v${i} = ${i}\n`)
  const store = mkdtempSync(join(tmpdir(), "lite-agent-bench-tree-store-"))
  const checkpointer = fileCheckpointer({ dir: store })
  // The long part of the session: text turns appended as the agent would log them.
  const filler = Math.max(0, events - 40)
  for (let i = 0; i < filler; i += 2) {
    await checkpointer.append("tree", [
      new UserMessage({ content: `earlier prompt ${i}: explain the module`, origin: "user" }),
      new AssistantMessage({ content: [{ type: "text", text: `earlier answer ${i}: it parses the config and calls the handler` }] })
    ])
  }
  // Then turns that write a file each: what the restores, undos and switches put back.
  const write = (round: number): Array<ScriptedTurn> => [
    { toolCalls: [{ name: "write_file", input: { path: `f${round % 20}.ts`, content: `export const v = ${round}\n` } }] },
    { text: "done" }
  ]
  const turns = Array.from({ length: 4 + 2 * ROUNDS }, (_, round) => write(round)).flat()
  const agent = createLiteAgent({ model: scripted(turns), workdir, checkpointer, sessionId: "tree" })
  for (let round = 0; round < 4; round++) await agent.send(`write ${round}`)
  const restoreTimes: Array<number> = []
  const undoTimes: Array<number> = []
  const switchTimes: Array<number> = []
  const forkTimes: Array<number> = []
  // Every round ends back on the branch it started on: the same last checkpoint. (Listed once:
  // listing a long session's checkpoints makes garbage a timed operation would pay for.)
  const last = (await agent.listCheckpoints("tree")).at(-1)!.seq
  for (let round = 0; round < ROUNDS; round++) {
    gc()
    let start = process.hrtime.bigint()
    await agent.restore("tree", last)
    restoreTimes.push(ms(start))
    gc()
    start = process.hrtime.bigint()
    await agent.undo("tree")
    undoTimes.push(ms(start))
    // A branch of its own from the restored point, then a switch back to the one the undo returned to.
    const tipBefore = (await agent.tree("tree")).leaf
    await agent.restore("tree", last)
    await agent.send(`another way ${round}`)
    gc()
    start = process.hrtime.bigint()
    await agent.switchBranch("tree", tipBefore)
    switchTimes.push(ms(start))
    // A fork from the last checkpoint, in the workdir; its undo puts the files back for the next round.
    gc()
    start = process.hrtime.bigint()
    const fork = await agent.fork("tree", last, { id: `fork-${round}` })
    forkTimes.push(ms(start))
    await agent.undo(fork.sessionId)
    await agent.resume("tree")
  }
  const head = (await checkpointer.head("tree"))
  await agent.close()
  await checkpointer.close()
  for (const dir of [workdir, store]) rmSync(dir, { recursive: true, force: true })
  return { events: head, restoreMs: median(restoreTimes), undoMs: median(undoTimes), switchMs: median(switchTimes), forkMs: median(forkTimes) }
}

/** A linear log of `events` text events. */
const linearLog = (events: number, from = 1): Array<StoredEvent> =>
  Array.from({ length: events }, (_, i) => ({
    seq: from + i,
    ts: from + i,
    event: i % 2 === 0
      ? new UserMessage({ content: `prompt ${from + i}`, origin: "user" })
      : new AssistantMessage({ content: [{ type: "text", text: `answer ${from + i}` }] })
  }))

/** 25 events, a branch of `abandoned` events left by a move back to the 25th, then 25 more: the current branch has 50. */
const treeLog = (abandoned: number): Array<StoredEvent> => {
  const prefix = linearLog(25)
  const left = linearLog(abandoned, 26)
  const move: StoredEvent = { seq: 26 + abandoned, ts: 0, event: new LeafMoved({ from: 25 + abandoned, to: 24, reason: "restore" }) }
  // The move goes to just before prompt 25: the 24 events before it, then 26 on the new branch.
  return [...prefix, ...left, move, ...linearLog(26, 27 + abandoned)]
}

const foldMs = (log: ReadonlyArray<StoredEvent>) => {
  const times: Array<number> = []
  for (let round = 0; round < 50; round++) {
    const start = process.hrtime.bigint()
    Session.fold(log)
    times.push(ms(start))
  }
  return median(times)
}

export const runTreeBench = async (): Promise<Array<Array<string>>> => {
  // A first run warms the code up, so that neither size pays for it.
  await measureMoves(50)
  const small = await measureMoves(50)
  const large = await measureMoves(5_000)
  const x = (value: number) => `${value.toFixed(2)}×`
  const rows: Array<Array<string>> = []
  const label = `${large.events.toLocaleString()} vs ${small.events.toLocaleString()} events`
  rows.push([label, "restore to the last checkpoint (1 file)", `${large.restoreMs.toFixed(1)} ms`, `${small.restoreMs.toFixed(1)} ms`, x(large.restoreMs / small.restoreMs)])
  rows.push([label, "undo of that restore", `${large.undoMs.toFixed(1)} ms`, `${small.undoMs.toFixed(1)} ms`, x(large.undoMs / small.undoMs)])
  rows.push([label, "switch to another branch", `${large.switchMs.toFixed(1)} ms`, `${small.switchMs.toFixed(1)} ms`, x(large.switchMs / small.switchMs)])
  rows.push([label, "fork from the last checkpoint (in the workdir)", `${large.forkMs.toFixed(1)} ms`, `${small.forkMs.toFixed(1)} ms`, x(large.forkMs / small.forkMs)])
  const linear = linearLog(50)
  const branched = treeLog(4_950)
  const current = Session.fold(branched)
  if (current.messages.length !== 50) throw new Error(`the current branch has ${current.messages.length} messages, not 50`)
  const linearFold = foldMs(linear)
  const branchedFold = foldMs(branched)
  rows.push([
    "5,000-event log (current branch 50) vs a linear 50-event log",
    "Session.fold",
    `${(branchedFold * 1000).toFixed(0)} µs`,
    `${(linearFold * 1000).toFixed(0)} µs`,
    x(branchedFold / linearFold)
  ])
  const longLinear = foldMs(linearLog(5_000))
  rows.push(["5,000-event log (current branch 50) vs a linear 5,000-event log", "Session.fold", `${(branchedFold * 1000).toFixed(0)} µs`, `${(longLinear * 1000).toFixed(0)} µs`, x(branchedFold / longLinear)])
  return rows
}
