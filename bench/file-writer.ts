/**
 * A writer process for the file backend's contention benchmark: appends single events as fast
 * as it can (retrying conflicts and busy errors) for `durationMs`, to one shared session or a
 * session of its own, and reports its appends and event-loop delay.
 *
 * - library: lite-agent's file backend.
 * - naive: what a program without it would do — a lock file created with O_EXCL, waited for
 *   with blocking 1 ms sleeps (the thread stops, like SQLite's native busy handler), the log's
 *   tail read for the head, one line appended, the lock removed.
 *
 * argv: <dir> <mode: library | naive> <durationMs> <monitor: 0|1> <sessions: shared | own> [<inFlight>, library only; default 1]
 */
import * as fs from "node:fs"
import { join } from "node:path"
import { fileCheckpointer } from "../src/index.js"
import { rawLine } from "./file.js"
import { appendUntil, timedWriterRun } from "./shared.js"

const [dir, mode, durationArg, monitorArg, sessionsArg, inFlightArg] = process.argv.slice(2)
const inFlight = Number(inFlightArg ?? 1)
const durationMs = Number(durationArg)
const sessionId = sessionsArg === "own" ? `writer-${process.pid}` : "contended"
// Every writer starts its timed run at the same instant, its store open.
const run = timedWriterRun(durationMs, monitorArg === "1")
let appends = 0

if (mode === "library") {
  const c = fileCheckpointer({ dir: dir! })
  await c.head(sessionId)
  const deadline = await run.start()
  appends = await appendUntil(c, sessionId, deadline, inFlight)
  await c.close()
} else {
  const sleeper = new Int32Array(new SharedArrayBuffer(4))
  const lockPath = join(dir!, `${sessionId}.lock`)
  const logPath = join(dir!, `${sessionId}.log`)
  const tail = Buffer.alloc(4096)
  const deadline = await run.start()
  while (Date.now() < deadline) {
    let lock: number | undefined
    while (lock === undefined) {
      try {
        lock = fs.openSync(lockPath, "wx")
      } catch {
        Atomics.wait(sleeper, 0, 0, 1)
      }
    }
    const log = fs.openSync(logPath, "a+")
    const size = fs.fstatSync(log).size
    const read = fs.readSync(log, tail, 0, Math.min(size, tail.length), Math.max(0, size - tail.length))
    const head = read === 0 ? 0 : Number(tail.toString("utf8", 0, read).split("\n").at(-2)?.split("\t")[1] ?? 0)
    fs.writeSync(log, rawLine(head + 1, appends))
    fs.closeSync(log)
    fs.closeSync(lock)
    fs.unlinkSync(lockPath)
    appends++
    await new Promise((resolve) => setImmediate(resolve))
  }
}
run.report(appends)
