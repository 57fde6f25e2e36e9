/**
 * A writer process for the event-loop benchmark: appends single events to one shared
 * session as fast as it can (retrying conflicts and busy errors) for `durationMs`, after a warm-up
 * (`WARM_UP_MS`), and reports its appends, CPU time and event-loop delay percentiles.
 *
 * argv: <file> <mode: library | naive> <durationMs> <monitor: 0|1> <sessions: shared | own> [<inFlight>, library only; default 1]
 */
import Database from "better-sqlite3"
import { sqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { appendUntil, timedWriterRun, rawSqliteAppender } from "./shared.js"

const [file, mode, durationArg, monitorArg, sessionsArg, inFlightArg] = process.argv.slice(2)
const inFlight = Number(inFlightArg ?? 1)
const sessionId = sessionsArg === "own" ? `writer-${process.pid}` : "contended"
const durationMs = Number(durationArg)
const monitor = monitorArg === "1"

if (mode === "library") {
  const c = sqliteCheckpointer({ file: file!, busyTimeoutMs: 5000 })
  await c.head(sessionId)
  await timedWriterRun(durationMs, monitor, (session, deadline) => appendUntil(c, session, deadline, inFlight), sessionId)
  await c.close()
} else {
  // The naive way: better-sqlite3's own busy timeout, which blocks the thread while it waits.
  const db = new Database(file!)
  db.pragma("journal_mode = WAL")
  db.pragma("busy_timeout = 5000")
  await timedWriterRun(durationMs, monitor, async (session, deadline) => {
    const append = rawSqliteAppender(db, session)
    let appends = 0
    while (Date.now() < deadline) {
      append(JSON.stringify({ _tag: "UserMessage", content: `w${process.pid} ${appends}`, origin: "user" }))
      appends++
      await new Promise((resolve) => setImmediate(resolve))
    }
    return appends
  }, sessionId)
  db.close()
}
