/**
 * The file backend under real concurrency and real crashes: separate Node processes
 * (test/workers/*.ts) append to one session directory, race on expected heads, get killed
 * with SIGKILL mid-append, and die while holding the session lock. Everything is checked
 * afterwards from a fresh `fileCheckpointer` on the same directory.
 *
 * Starting a Node process that loads Effect costs seconds on a small machine, so the
 * writer processes of the concurrency tests are shared (started once, driven over IPC) and
 * the crash and lock tests start their next process while the current one works.
 */
import { readdirSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { describe, expect, it } from "vitest"
import { MAX_POLL_MS } from "../src/backends/file/SessionLock.js"
import { CheckpointBusyError, fileCheckpointer, UserMessage } from "../src/index.js"
import type { AppenderConfig } from "./workers/appender.js"
import { contentOf, expectCleanExit, isRunning, makeTempDir, startWorker } from "./support/processes.js"
import { checkWholeBatches, expectContiguous, readFresh as readStore, writerPool, writerScenarios } from "./support/writers.js"

// ---------------------------------------------------------------------------------------
// Temp directories and child processes
// ---------------------------------------------------------------------------------------

/** An appender.ts process, started now, that begins its work on `go()`. */
const startAppender = (config: AppenderConfig) => {
  const worker = startWorker("appender.ts", [JSON.stringify(config)])
  const go = async () => {
    await worker.waitForLine((line) => line === "ready")
    worker.child.stdin!.end("go\n")
  }
  return { worker, go }
}

const readFresh = (dir: string, session: string) => readStore("file", dir, session)

// ---------------------------------------------------------------------------------------
// 1-2. Many writers, and racing on one expected head (shared with the SQLite backend)
// ---------------------------------------------------------------------------------------

writerScenarios(writerPool("file", async () => makeTempDir("writers")), { retryCount: 200, timeoutMs: 120_000 })

// ---------------------------------------------------------------------------------------
// 3. SIGKILL during appends
// ---------------------------------------------------------------------------------------


describe("file backend: writer processes killed with SIGKILL", () => {
  it("5 SIGKILLs at random points during 2,000 appends: acknowledged appends survive, no partial batch, appending continues", async () => {
    const dir = makeTempDir("crash")
    const session = "crashy"
    const target = 2_000
    const cycles = 5
    const acknowledged: Array<number> = []
    let kills = 0
    let unacknowledged = 0
    let tornTails = 0

    // One cycle flushes every append (fsync); the others are about process crashes only.
    const synchronousOf = (cycle: number) => (cycle === 2 ? "full" : "normal")
    const startCycle = (cycle: number) =>
      startAppender({ mode: "crash", dir, session, cycle, target, synchronous: synchronousOf(cycle) })

    let upcoming = startCycle(0)
    for (let cycle = 0; cycle <= cycles; cycle++) {
      const kill = cycle < cycles // the last writer, left alone, finishes the 2,000
      const { go, worker } = upcoming
      await go()
      if (kill) upcoming = startCycle(cycle + 1) // loads while this one appends
      const startHead = Number((await worker.waitForLine((line) => line.startsWith("start "))).slice("start ".length))
      let killAfterAcks: number | undefined
      if (kill) {
        // Let it make a random number of appends (counted, not timed: a fast machine must not
        // finish the 2,000 first), then kill it wherever it is — mid-append, often.
        killAfterAcks = 1 + Math.floor(Math.random() * 60)
        let acks = 0
        await Promise.race([worker.waitForLine((line) => line.startsWith("ack ") && ++acks >= killAfterAcks!), worker.closed])
        if (isRunning(worker.child)) {
          worker.child.kill("SIGKILL")
          kills++
        }
      }
      const { code, signal } = await worker.closed
      if (signal === null) {
        expect({ code, stderr: worker.stderr() }, `cycle ${cycle}`).toEqual({ code: 0, stderr: "" })
      }
      const acks = worker.lines.filter((line) => line.startsWith("ack ")).map((line) => Number(line.slice(4)))
      acknowledged.push(...acks)
      const lastAck = acks.at(-1) ?? startHead

      // A fresh checkpointer sees every acknowledged append and only whole batches.
      const checkpointer = fileCheckpointer({ dir })
      try {
        const head = await checkpointer.head(session)
        const events = await checkpointer.read(session)
        expect(head).toBeGreaterThanOrEqual(lastAck)
        // At most the one append in flight (up to 5 events) can be stored but unacknowledged.
        expect(head - lastAck).toBeLessThanOrEqual(5)
        if (head > lastAck) unacknowledged++
        expectContiguous(events.map((e) => e.seq), head)
        checkWholeBatches(events.map(contentOf), acknowledged)
        const integrity = await checkpointer.checkIntegrity()
        expect(integrity.ok, integrity.detail).toBe(true)
        const torn = /torn tail/.test(integrity.detail)
        if (torn) tornTails++
        console.log(
          `crash cycle ${cycle} (${synchronousOf(cycle)}, ` +
            (signal === "SIGKILL" ? `SIGKILL after its ack ${killAfterAcks}` : `ran to the end`) +
            `): started at ${startHead}, ${acks.length} appends acknowledged, last ack ${lastAck}, head ${head}` +
            (torn ? ", torn tail left" : "")
        )
        if (head < target) {
          // Appending continues normally on top of whatever the crash left.
          const next = await checkpointer.append(session, [new UserMessage({ content: `probe${cycle}:0/1` })], head)
          expect(next).toBe(head + 1)
          acknowledged.push(next)
          const after = await checkpointer.read(session, { sinceSeq: head })
          expect(after.map((s) => [s.seq, contentOf(s)])).toEqual([[head + 1, `probe${cycle}:0/1`]])
        }
      } finally {
        await checkpointer.close()
      }
    }

    const { contents, events, head } = await readFresh(dir, session)
    expect(head).toBe(target)
    expectContiguous(events.map((e) => e.seq), target)
    const batches = checkWholeBatches(contents, acknowledged).length
    const tornFiles = readdirSync(join(dir, session)).filter((name) => name.startsWith("torn-"))
    console.log(
      `crash test: ${kills} SIGKILLs, ${batches} batches in ${target} events; ${unacknowledged} kills came after a ` +
        `write and before its acknowledgement, ${tornTails} left a torn tail (${tornFiles.length} torn-* files kept)`
    )
    expect(kills).toBe(cycles)
  })
})

// ---------------------------------------------------------------------------------------
// 4. SIGKILL the lock holder
// ---------------------------------------------------------------------------------------

describe("file backend: the process holding the session lock is killed", () => {
  it("a held lock refuses appends (CheckpointBusyError); after SIGKILL of the holder a waiting append gets it promptly", async () => {
    const dir = makeTempDir("lock")
    const trials = 3
    const sessionOf = (trial: number) => `locked-${trial}`
    // Start every process up front; each waits for its turn.
    const holders = Array.from({ length: trials }, (_, trial) => startWorker("lock-holder.ts", [dir, sessionOf(trial)]))
    const busy = startAppender({ mode: "once", dir, session: sessionOf(0), busyTimeoutMs: 300, content: "other process" })
    const later = startAppender({ mode: "once", dir, session: sessionOf(0), content: "later" })
    const takeovers: Array<number> = []

    for (let trial = 0; trial < trials; trial++) {
      const session = sessionOf(trial)
      const holder = holders[trial]!
      await holder.waitForLine((line) => line === "locked")

      // The lock is real: an append from this process gives up after its 300 ms…
      const impatient = fileCheckpointer({ dir, busyTimeoutMs: 300 })
      try {
        const refused = await impatient.append(session, [new UserMessage({ content: "impatient" })]).then(
          (head) => new Error(`append succeeded (head ${head}) while another process held the lock`),
          (error: unknown) => error
        )
        expect(refused).toBeInstanceOf(CheckpointBusyError)
        expect(refused).toMatchObject({ _tag: "CheckpointBusyError", sessionId: session })
        expect((refused as CheckpointBusyError).waitedMs).toBeGreaterThanOrEqual(300)
      } finally {
        await impatient.close()
      }
      if (trial === 0) {
        // …and so does one from another process.
        await busy.go()
        const line = await busy.worker.waitForLine((l) => l.startsWith("ok ") || l.startsWith("error "))
        await expectCleanExit(busy.worker)
        expect(line).toMatch(/^error CheckpointBusyError /)
      }

      // A patient append waits for the lock while the holder lives…
      const patient = fileCheckpointer({ dir })
      try {
        await patient.list() // open the checkpointer before the clock starts
        let settledAt: number | undefined
        const appended = patient.append(session, [new UserMessage({ content: `after takeover ${trial}` })]).finally(() => {
          settledAt = performance.now()
        })
        appended.catch(() => {}) // awaited below
        await sleep(200)
        expect(settledAt).toBeUndefined()

        // …and gets it once the holder is killed.
        let exitedAt: number | undefined
        holder.child.once("exit", () => {
          exitedAt = performance.now()
        })
        const killedAt = performance.now()
        expect(holder.child.kill("SIGKILL")).toBe(true)
        expect(await appended).toBe(1)
        const { signal } = await holder.closed
        expect(signal).toBe("SIGKILL")
        const fromKill = settledAt! - killedAt
        takeovers.push(fromKill)
        console.log(
          `lock takeover ${trial}: the waiting append succeeded ${fromKill.toFixed(1)} ms after SIGKILL was sent ` +
            `(${exitedAt === undefined ? "?" : (settledAt! - exitedAt).toFixed(1)} ms after the parent saw the exit; ` +
            `MAX_POLL_MS = ${MAX_POLL_MS})`
        )
        // Generous: the documented bound is one poll interval after the kernel reaps the holder.
        expect(fromKill).toBeLessThan(2_000)
      } finally {
        await patient.close()
      }

      const { contents, events, head } = await readFresh(dir, session)
      expect(head).toBe(1)
      expectContiguous(events.map((e) => e.seq), 1)
      expect(contents).toEqual([`after takeover ${trial}`])
    }

    // With no holder left, another process appends straight away.
    await later.go()
    expect(await later.worker.waitForLine((l) => l.startsWith("ok ") || l.startsWith("error "))).toBe("ok 2")
    await expectCleanExit(later.worker)
    expect((await readFresh(dir, sessionOf(0))).contents).toEqual(["after takeover 0", "later"])
    console.log(
      `lock takeover after SIGKILL over ${takeovers.length} trials: ` +
        `min ${Math.min(...takeovers).toFixed(1)} ms, max ${Math.max(...takeovers).toFixed(1)} ms`
    )
  })
})
