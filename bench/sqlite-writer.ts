/**
 * A writer process for the event-loop benchmark: appends single events to one shared
 * session as fast as it can (retrying conflicts and busy errors) for `durationMs`, and
 * reports its event-loop delay percentiles.
 *
 * argv: <file> <mode: library | naive> <durationMs> <monitor: 0|1>
 */
import { monitorEventLoopDelay } from "node:perf_hooks"
import Database from "better-sqlite3"
import { sqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { CheckpointBusyError, CheckpointConflictError, UserMessage } from "../src/index.js"

const [file, mode, durationArg, monitorArg] = process.argv.slice(2)
const durationMs = Number(durationArg)
const histogram = monitorEventLoopDelay({ resolution: 1 })
if (monitorArg === "1") histogram.enable()
const deadline = Date.now() + durationMs
let appends = 0

if (mode === "library") {
  const c = sqliteCheckpointer({ file: file!, busyTimeoutMs: 5000 })
  while (Date.now() < deadline) {
    try {
      await c.append("contended", [new UserMessage({ content: `w${process.pid} ${appends}`, origin: "user" })])
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
  const head = db.prepare("SELECT head FROM lite_agent_sessions WHERE id = ?").pluck()
  const insert = db.prepare("INSERT INTO lite_agent_events (session_id, seq, ts, event) VALUES (?, ?, ?, ?)")
  const upsert = db.prepare(
    "INSERT INTO lite_agent_sessions (id, head, mtime, generation) VALUES (?, ?, ?, 1) ON CONFLICT (id) DO UPDATE SET head = excluded.head, mtime = excluded.mtime"
  )
  const append = db.transaction((text: string) => {
    const next = ((head.get("contended") as number | undefined) ?? 0) + 1
    insert.run("contended", next, Date.now(), JSON.stringify({ _tag: "UserMessage", content: text, origin: "user" }))
    upsert.run("contended", next, Date.now())
  })
  while (Date.now() < deadline) {
    append.immediate(`w${process.pid} ${appends}`)
    appends++
    await new Promise((resolve) => setImmediate(resolve))
  }
  db.close()
}
histogram.disable()
process.stdout.write(JSON.stringify({
  appends,
  p50: histogram.percentile(50) / 1e6,
  p99: histogram.percentile(99) / 1e6,
  max: histogram.max / 1e6
}) + "\n")
