/**
 * A writer process for the event-loop benchmark: appends single events to one shared
 * session as fast as it can (retrying conflicts and busy errors) for `durationMs`, and
 * reports its event-loop delay percentiles.
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
// Every writer starts its timed run at the same instant, its store open.
const run = timedWriterRun(durationMs, monitorArg === "1")
let appends = 0

if (mode === "library") {
  const c = sqliteCheckpointer({ file: file!, busyTimeoutMs: 5000 })
  await c.head(sessionId)
  const deadline = await run.start()
  appends = await appendUntil(c, sessionId, deadline, inFlight)
  await c.close()
} else {
  // The naive way: better-sqlite3's own busy timeout, which blocks the thread while it waits.
  const db = new Database(file!)
  db.pragma("journal_mode = WAL")
  db.pragma("busy_timeout = 5000")
  const append = rawSqliteAppender(db, sessionId)
  const deadline = await run.start()
  while (Date.now() < deadline) {
    append(JSON.stringify({ _tag: "UserMessage", content: `w${process.pid} ${appends}`, origin: "user" }))
    appends++
    await new Promise((resolve) => setImmediate(resolve))
  }
  db.close()
}
run.report(appends)
