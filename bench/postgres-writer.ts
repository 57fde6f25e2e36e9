/**
 * A writer process for the Postgres contention benchmark: appends single events to one shared
 * session as fast as it can for `durationMs` — through lite-agent, or through raw `pg` running
 * the same statements — and reports its appends and event-loop delay percentiles.
 *
 * argv: <url> <schema> <mode: library | raw> <durationMs> <monitor: 0|1>
 */
import { monitorEventLoopDelay } from "node:perf_hooks"
import pg from "pg"
import { postgresCheckpointer } from "../src/checkpoint-postgres.js"
import { UserMessage } from "../src/index.js"
import { rawPostgresAppender } from "./postgres-raw.js"
import { reportLoopDelay } from "./shared.js"

const [url, schema, mode, durationArg, monitorArg] = process.argv.slice(2)
const durationMs = Number(durationArg)
const histogram = monitorEventLoopDelay({ resolution: 1 })
if (monitorArg === "1") histogram.enable()
let appends = 0

if (mode === "library") {
  const c = postgresCheckpointer({ url: url!, schema: schema!, busyTimeoutMs: 30_000 })
  await c.head("contended")
  const deadline = Date.now() + durationMs
  while (Date.now() < deadline) {
    await c.append("contended", [new UserMessage({ content: `w${process.pid} ${appends}`, origin: "user" })])
    appends++
  }
  await c.close()
} else {
  const pool = new pg.Pool({ connectionString: url!, max: 10 })
  const append = rawPostgresAppender(pool, schema!, "contended")
  const deadline = Date.now() + durationMs
  while (Date.now() < deadline) {
    await append(JSON.stringify({ _tag: "UserMessage", content: `w${process.pid} ${appends}`, origin: "user" }))
    appends++
  }
  await pool.end()
}
reportLoopDelay(appends, histogram)
