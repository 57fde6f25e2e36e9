/**
 * One process's wall clock set wrong — ahead or behind by an hour, or set back again and again
 * while it waits — with real processes on real files and databases (issue 30). The clock is
 * moved by test/support/skewedClock.ts, preloaded in the worker: `Date.now()` and `new Date()`
 * move, while the monotonic clock and the file system's times run true.
 *
 * - Timeouts are measured on a monotonic clock: a waiter whose clock keeps going back still
 *   gives up after its `busyTimeoutMs` (file lock and SQLite write lock).
 * - The file backend's lock leases are judged on the file system's clock: a process whose clock
 *   is ahead does not take a live lock, one whose clock is behind does not lose its own, and a
 *   paused holder's lock is still taken over once its lease ran out whichever clock is off.
 * - The waiters' marks, which a holder that keeps the lock looks at to give way, too.
 */
import { readFileSync, statSync } from "node:fs"
import { join, resolve } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { pathToFileURL } from "node:url"
import Database from "better-sqlite3"
import { afterAll, afterEach, describe, expect, it } from "vitest"
import { CLOCK_OFFSET_FILE, setClockOffset } from "./support/skewedClock.js"
import { isRunning, live, makeTempDir, removeTempDirs, startWorker } from "./support/processes.js"
import type { ClockWorkerConfig, ClockWorkerResult } from "./workers/clock-worker.js"

const HOUR_MS = 3_600_000
const SESSION = "s"
/** Far above every timeout below and far below an hour: a wait on the wall clock would outlast it. */
const GENEROUS_MS = 30_000

const preload = pathToFileURL(resolve(import.meta.dirname, "support", "skewedClock.ts")).href

/** A clock file of its own, set to `offsetMs`: the options that start a worker on that clock. */
const skewedClock = (offsetMs: number) => {
  const file = join(makeTempDir("clock"), "offset-ms")
  setClockOffset(file, offsetMs)
  return { file, options: { imports: [preload], env: { [CLOCK_OFFSET_FILE]: file } } }
}

const startClockWorker = (config: ClockWorkerConfig, offsetMs = 0) => {
  const clock = skewedClock(offsetMs)
  const worker = startWorker("clock-worker.ts", [JSON.stringify(config)], clock.options)
  return {
    worker,
    clockFile: clock.file,
    go: async () => {
      await worker.waitForLine((line) => line === "ready")
      worker.child.stdin!.end("go\n")
    },
    result: async () => JSON.parse(await worker.waitForLine((line) => line.startsWith("{"))) as ClockWorkerResult
  }
}

/** test/workers/lock-holder.ts on a clock `offsetMs` off: holds the session's lock until killed. */
const startHolder = async (dir: string, offsetMs: number, leaseMs?: number) => {
  const holder = startWorker("lock-holder.ts", [dir, SESSION, ...(leaseMs === undefined ? [] : [String(leaseMs)])], skewedClock(offsetMs).options)
  await holder.waitForLine((line) => line === "locked")
  return holder
}

/** `promise`, or a failure saying `what` once `ms` have passed. */
const within = async <T>(promise: Promise<T>, ms: number, what: string): Promise<T> => {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(what)), ms)
  })
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

/** Set the clock of `clockFile` back an hour, and another hour every 20 ms, until `until` settles. */
const keepSettingBack = async <T>(clockFile: string, until: Promise<T>): Promise<T> => {
  let offsetMs = 0
  const step = () => {
    offsetMs -= HOUR_MS
    setClockOffset(clockFile, offsetMs)
  }
  step()
  const stepping = setInterval(step, 20)
  try {
    return await until
  } finally {
    clearInterval(stepping)
  }
}

const lockPath = (dir: string) => join(dir, ".locks", SESSION)
const lockHolderPid = (dir: string) => (JSON.parse(readFileSync(lockPath(dir), "utf8")) as { pid: number }).pid

/** Resolves once the lock file's modification time changes: its holder renewed it. */
const renewed = async (dir: string) => {
  const first = statSync(lockPath(dir), { bigint: true }).mtimeNs
  while (statSync(lockPath(dir), { bigint: true }).mtimeNs === first) await sleep(10)
}

afterEach(() => {
  // Holders hold until killed (stopped ones included).
  for (const child of live) child.kill("SIGKILL")
})
afterAll(removeTempDirs)

describe("a wall clock set back while a process waits: the timeout holds", () => {
  it("file backend: a waiter (busyTimeoutMs 1000) whose clock goes back an hour, again and again, gives up with CheckpointBusyError all the same", async () => {
    const dir = makeTempDir("clock-file-busy")
    const waiter = startClockWorker({ mode: "append", backend: "file", location: dir, session: SESSION, busyTimeoutMs: 1_000 })
    const holder = await startHolder(dir, 0)
    await waiter.go()
    const result = await keepSettingBack(
      waiter.clockFile,
      within(waiter.result(), GENEROUS_MS, `still waiting ${GENEROUS_MS} ms into a 1000 ms wait: it follows the wall clock`)
    )
    expect(result).toMatchObject({ ok: false, tag: "CheckpointBusyError" })
    // Its clock had gone back by the time it gave up.
    expect(result.clockOffsetMs).toBeLessThan(-HOUR_MS / 2)
    expect(isRunning(holder.child)).toBe(true)
    expect(lockHolderPid(dir)).toBe(holder.child.pid)
  })

  it("SQLite: a waiter (busyTimeoutMs 1000) whose clock goes back an hour, again and again, gives up with CheckpointBusyError all the same", async () => {
    const file = join(makeTempDir("clock-sqlite-busy"), "store.db")
    const waiter = startClockWorker({ mode: "append", backend: "sqlite", location: file, session: SESSION, busyTimeoutMs: 1_000 })
    await waiter.worker.waitForLine((line) => line === "ready")
    // Another connection holds the write lock throughout.
    const holder = new Database(file)
    try {
      holder.exec("BEGIN IMMEDIATE")
      await waiter.go()
      const result = await keepSettingBack(
        waiter.clockFile,
        within(waiter.result(), GENEROUS_MS, `still waiting ${GENEROUS_MS} ms into a 1000 ms wait: it follows the wall clock`)
      )
      expect(result).toMatchObject({ ok: false, tag: "CheckpointBusyError" })
      expect(result.clockOffsetMs).toBeLessThan(-HOUR_MS / 2)
      expect(holder.inTransaction).toBe(true)
    } finally {
      holder.close()
    }
  })
})

describe("file backend: lock leases judged on the file system's clock", () => {
  it("a process whose clock is an hour ahead does not take over a live holder's lock", async () => {
    const dir = makeTempDir("clock-ahead-judge")
    const waiter = startClockWorker({ mode: "append", backend: "file", location: dir, session: SESSION, busyTimeoutMs: 2_000 }, HOUR_MS)
    const holder = await startHolder(dir, 0)
    await waiter.go()
    const result = await waiter.result()
    expect(result).toMatchObject({ ok: false, tag: "CheckpointBusyError" })
    expect(lockHolderPid(dir)).toBe(holder.child.pid)
  })

  it("a holder whose clock is an hour behind keeps its lock: renewing it does not make it look expired", async () => {
    const dir = makeTempDir("clock-behind-holder")
    const waiter = startClockWorker({ mode: "append", backend: "file", location: dir, session: SESSION, busyTimeoutMs: 3_000 })
    const holder = await startHolder(dir, -HOUR_MS)
    await renewed(dir)
    await waiter.go()
    const result = await waiter.result()
    expect(result).toMatchObject({ ok: false, tag: "CheckpointBusyError" })
    expect(lockHolderPid(dir)).toBe(holder.child.pid)
  })

  it("a process whose clock is an hour behind takes over a paused holder's lock once its lease ran out", async () => {
    const dir = makeTempDir("clock-behind-judge")
    const waiter = startClockWorker({ mode: "append", backend: "file", location: dir, session: SESSION, busyTimeoutMs: GENEROUS_MS }, -HOUR_MS)
    const holder = await startHolder(dir, 0, 1_000)
    // Stopped, its liveness socket still accepts connections: only its lease can tell.
    expect(holder.child.kill("SIGSTOP")).toBe(true)
    await waiter.go()
    expect(await waiter.result()).toMatchObject({ ok: true, head: 1 })
  })

  it("a paused holder whose clock was an hour ahead loses its lock once its lease ran out", async () => {
    const dir = makeTempDir("clock-ahead-holder")
    const waiter = startClockWorker({ mode: "append", backend: "file", location: dir, session: SESSION, busyTimeoutMs: GENEROUS_MS })
    const holder = await startHolder(dir, HOUR_MS, 1_000)
    // Once it has renewed its lease on its clock.
    await renewed(dir)
    expect(holder.child.kill("SIGSTOP")).toBe(true)
    await waiter.go()
    expect(await waiter.result()).toMatchObject({ ok: true, head: 1 })
  })

  it("a waiter whose clock is an hour behind gets its turn from a process that keeps taking the lock", async () => {
    const dir = makeTempDir("clock-behind-wanted")
    const waiter = startClockWorker({ mode: "append", backend: "file", location: dir, session: SESSION, busyTimeoutMs: 5_000 }, -HOUR_MS)
    const taker = startClockWorker({ mode: "keep-taking", backend: "file", location: dir, session: SESSION, busyTimeoutMs: 10_000 })
    await taker.go()
    await taker.worker.waitForLine((line) => line === "taking")
    await waiter.go()
    expect(await waiter.result()).toMatchObject({ ok: true })
    expect(isRunning(taker.worker.child)).toBe(true)
  })
})
