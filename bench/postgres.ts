/**
 * PostgreSQL backend benchmarks, each next to raw `pg` running the same statements and
 * transactions in the same run, on a throwaway server started for the run
 * (test/support/postgres.ts: the machine's own PostgreSQL binaries).
 */
import { execFile } from "node:child_process"
import { join } from "node:path"
import { promisify } from "node:util"
import pg from "pg"
import { postgresCheckpointer } from "../src/checkpoint-postgres.js"
import { encodeStoredEvent } from "../src/core.js"
import { startPostgres } from "../test/support/postgres.js"
import { eventFor, foldRate, median, ms, ratio } from "./shared.js"
import { rawPostgresAppender } from "./postgres-raw.js"

const run = promisify(execFile)

export const runPostgresBench = async () => {
  const server = await startPostgres()
  const rows: Array<Array<string>> = []
  let schemas = 0
  /** A schema created through the library, so raw and library runs use identical tables. */
  const prepared = async () => {
    const schema = `bench_${++schemas}`
    const c = postgresCheckpointer({ url: server.url, schema })
    await c.head("warm")
    await c.close()
    return schema
  }
  const rawAppends = async (count: number) => {
    const schema = await prepared()
    const pool = new pg.Pool({ connectionString: server.url, max: 10 })
    const append = rawPostgresAppender(pool, schema, "bench")
    const encoded = (i: number) => JSON.stringify(encodeStoredEvent({ seq: 1, ts: 0, event: eventFor(i) }).event)
    const start = process.hrtime.bigint()
    for (let i = 0; i < count; i++) await append(encoded(i))
    const rate = count / (ms(start) / 1000)
    await pool.end()
    return rate
  }
  const libraryAppends = async (count: number) => {
    const c = postgresCheckpointer({ url: server.url, schema: await prepared() })
    await c.head("bench")
    const start = process.hrtime.bigint()
    for (let i = 0; i < count; i++) await c.append("bench", [eventFor(i)])
    const rate = count / (ms(start) / 1000)
    await c.close()
    return rate
  }
  try {
    const count = 2000
    await rawAppends(300)
    await libraryAppends(300)
    const raw: Array<number> = []
    const lib: Array<number> = []
    for (let trial = 0; trial < 3; trial++) {
      raw.push(await rawAppends(count))
      lib.push(await libraryAppends(count))
    }
    rows.push([`single-event append (median of 3 × ${count})`, `${median(lib).toFixed(0)}/s`, `${median(raw).toFixed(0)}/s`, ratio(median(lib), median(raw))])

    // Replay of 100,000 events: read + decode + fold, against a raw SELECT + JSON.parse of the same rows.
    const schema = await prepared()
    const c = postgresCheckpointer({ url: server.url, schema })
    for (let i = 0; i < 100_000; i += 5_000) await c.append("replay", Array.from({ length: 5_000 }, (_, k) => eventFor(i + k)))
    const client = new pg.Client({ connectionString: server.url })
    await client.connect()
    const select = () => client.query<{ seq: string; ts: string; event: string }>(
      `SELECT seq, ts, event FROM ${schema}.lite_agent_events WHERE session_id = $1 ORDER BY seq`,
      ["replay"]
    )
    await select()
    const rawStart = process.hrtime.bigint()
    const result = await select()
    for (const row of result.rows) JSON.parse(row.event)
    const rawRate = result.rows.length / (ms(rawStart) / 1000)
    await client.end()
    const replay = await foldRate(c.layer, "replay")
    rows.push(["read + decode + fold (Effect stream), 100,000 events", `${replay.toFixed(0)}/s`, `${rawRate.toFixed(0)}/s (SELECT + JSON.parse)`, ratio(replay, rawRate)])
    await c.close()

    // 4 processes appending to one session for 4 s: total throughput, and one writer's event-loop delay.
    const contention: Record<string, { total: number; p99: number; max: number }> = {}
    for (const mode of ["library", "raw"] as const) {
      const shared = await prepared()
      const worker = join(import.meta.dirname, "postgres-writer.ts")
      const spawnWriter = (monitor: boolean) =>
        run(process.execPath, ["--import", "tsx", worker, server.url, shared, mode, "4000", monitor ? "1" : "0"], {
          cwd: join(import.meta.dirname, "..")
        }).then(({ stdout }) => JSON.parse(stdout.trim().split("\n").at(-1)!) as { appends: number; p99: number; max: number })
      const results = await Promise.all([spawnWriter(true), spawnWriter(false), spawnWriter(false), spawnWriter(false)])
      contention[mode] = { total: results.reduce((sum, r) => sum + r.appends, 0), p99: results[0]!.p99, max: results[0]!.max }
    }
    const library = contention["library"]!
    const rawContention = contention["raw"]!
    rows.push([
      "4 processes × 4 s appending to one session: appends in all",
      `${library.total}`,
      `${rawContention.total}`,
      ratio(library.total, rawContention.total)
    ])
    rows.push([
      "the same: one writer's event-loop delay",
      `p99 ${library.p99.toFixed(1)} ms, max ${library.max.toFixed(1)} ms`,
      `p99 ${rawContention.p99.toFixed(1)} ms, max ${rawContention.max.toFixed(1)} ms`,
      ""
    ])
  } finally {
    server.destroy()
  }
  return rows
}
