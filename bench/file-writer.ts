/**
 * A writer process for the file backend's contention benchmark: appends single events as fast
 * as it can (retrying conflicts and busy errors) for `durationMs`, to one shared session or a
 * session of its own, after a warm-up (`WARM_UP_MS`), and reports its appends, CPU time and
 * event-loop delay.
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
const monitor = monitorArg === "1"
const sessionId = sessionsArg === "own" ? `writer-${process.pid}` : "contended"

if (mode === "library") {
  const c = fileCheckpointer({ dir: dir! })
  await c.head(sessionId)
  await timedWriterRun(durationMs, monitor, (session, deadline) => appendUntil(c, session, deadline, inFlight), sessionId)
  await c.close()
} else {
  const sleeper = new Int32Array(new SharedArrayBuffer(4))
  const tail = Buffer.alloc(4096)
  await timedWriterRun(durationMs, monitor, async (session, deadline) => {
    const lockPath = join(dir!, `${session}.lock`)
    const logPath = join(dir!, `${session}.log`)
    let appends = 0
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
    return appends
  }, sessionId)
}
