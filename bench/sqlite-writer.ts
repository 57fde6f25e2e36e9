/**
 * A writer process for the event-loop benchmark: appends single events to one shared
 * session as fast as it can (retrying conflicts and busy errors) for `durationMs`, and
 * reports its event-loop delay percentiles.
 *
 * argv: <file> <mode: library | naive> <durationMs> <monitor: 0|1> <sessions: shared | own>
 */
import { monitorEventLoopDelay } from "node:perf_hooks"
import Database from "better-sqlite3"
import { sqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { CheckpointBusyError, CheckpointConflictError, UserMessage } from "../src/index.js"
import { rawSqliteAppender, reportLoopDelay } from "./shared.js"

const [file, mode, durationArg, monitorArg, sessionsArg] = process.argv.slice(2)
const sessionId = sessionsArg === "own" ? `writer-${process.pid}` : "contended"
const durationMs = Number(durationArg)
const histogram = monitorEventLoopDelay({ resolution: 1 })
if (monitorArg === "1") histogram.enable()
const deadline = Date.now() + durationMs
let appends = 0

if (mode === "library") {
  const c = sqliteCheckpointer({ file: file!, busyTimeoutMs: 5000 })
  while (Date.now() < deadline) {
    try {
      await c.append(sessionId, [new UserMessage({ content: `w${process.pid} ${appends}`, origin: "user" })])
      appends++
    } catch (error) {
      if (!(error instanceof CheckpointConflictError || error instanceof CheckpointBusyError)) throw error
    }
    // Let timers run between appends, as a server would.
    await new Promise((resolve) => setImmediate(resolve))
  }
  await c.close()
} else {
  // The naive way: better-sqlite3's own busy timeout, which blocks the thread while it waits.
  const db = new Database(file!)
  db.pragma("journal_mode = WAL")
  db.pragma("busy_timeout = 5000")
  const append = rawSqliteAppender(db, sessionId)
  while (Date.now() < deadline) {
    append(JSON.stringify({ _tag: "UserMessage", content: `w${process.pid} ${appends}`, origin: "user" }))
    appends++
    await new Promise((resolve) => setImmediate(resolve))
  }
  db.close()
}
reportLoopDelay(appends, histogram)
