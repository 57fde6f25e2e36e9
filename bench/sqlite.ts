/**
 * SQLite backend benchmarks, each next to raw better-sqlite3 running the same statements
 * and transactions in the same run.
 */
import { execFile } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import Database from "better-sqlite3"
import { sqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { encodeStoredEvent } from "../src/core.js"
import { eventFor, foldRate, median, ms, ratio, rawSqliteAppender } from "./shared.js"

const run = promisify(execFile)
const freshFile = () => join(mkdtempSync(join(tmpdir(), "bench-sqlite-")), "sessions.db")

/** Create the schema through the library, so raw and library runs use identical tables. */
const prepared = async (synchronous: "normal" | "full") => {
  const file = freshFile()
  const c = sqliteCheckpointer({ file, synchronous })
  await c.head("warm")
  await c.close()
  return file
}

const rawAppends = async (count: number, synchronous: "normal" | "full") => {
  const db = new Database(await prepared(synchronous))
  db.pragma("journal_mode = WAL")
  db.pragma(`synchronous = ${synchronous === "full" ? "FULL" : "NORMAL"}`)
  const append = rawSqliteAppender(db, "bench")
  const encoded = (i: number) => JSON.stringify(encodeStoredEvent({ seq: 1, ts: 0, event: eventFor(i) }).event)
  const start = process.hrtime.bigint()
  for (let i = 0; i < count; i++) append(encoded(i))
  const rate = count / (ms(start) / 1000)
  db.close()
  return rate
}

const libraryAppends = async (count: number, synchronous: "normal" | "full") => {
  const c = sqliteCheckpointer({ file: await prepared(synchronous), synchronous })
  const start = process.hrtime.bigint()
  for (let i = 0; i < count; i++) await c.append("bench", [eventFor(i)])
  const rate = count / (ms(start) / 1000)
  await c.close()
  return rate
}

const eventLoopUnderContention = async (mode: "library" | "naive", file: string, durationMs: number) => {
  const worker = join(import.meta.dirname, "sqlite-writer.ts")
  const spawnWriter = (monitor: boolean) =>
    run(process.execPath, ["--import", "tsx", worker, file, mode, String(durationMs), monitor ? "1" : "0"], {
      cwd: join(import.meta.dirname, "..")
    }).then(({ stdout }) => JSON.parse(stdout.trim().split("\n").at(-1)!) as { appends: number; p99: number; max: number })
  const results = await Promise.all([spawnWriter(true), spawnWriter(false), spawnWriter(false), spawnWriter(false)])
  return { monitored: results[0]!, total: results.reduce((sum, r) => sum + r.appends, 0) }
}

export const runSqliteBench = async () => {
  const rows: Array<Array<string>> = []
  for (const synchronous of ["normal", "full"] as const) {
    const count = synchronous === "full" ? 400 : 3000
    await rawAppends(300, synchronous)
    await libraryAppends(300, synchronous)
    const raw: Array<number> = []
    const lib: Array<number> = []
    for (let trial = 0; trial < 3; trial++) {
      raw.push(await rawAppends(count, synchronous))
      lib.push(await libraryAppends(count, synchronous))
    }
    rows.push([
      `single-event append, synchronous ${synchronous} (median of 3 × ${count})`,
      `${median(lib).toFixed(0)}/s`,
      `${median(raw).toFixed(0)}/s`,
      ratio(median(lib), median(raw))
    ])
  }

  // Replay of 100,000 events: read + decode + fold, against raw SELECT + JSON.parse.
  const file = freshFile()
  const c = sqliteCheckpointer({ file })
  for (let i = 0; i < 100_000; i += 5_000) await c.append("replay", Array.from({ length: 5_000 }, (_, k) => eventFor(i + k)))
  const raw = new Database(file, { readonly: true })
  const select = raw.prepare("SELECT seq, ts, event FROM lite_agent_events WHERE session_id = ? ORDER BY seq")
  const rawStart = process.hrtime.bigint()
  let parsed = 0
  for (const row of select.iterate("replay") as Iterable<{ event: string }>) {
    JSON.parse(row.event)
    parsed++
  }
  const rawRate = parsed / (ms(rawStart) / 1000)
  raw.close()
  const replay = await foldRate(c.layer, "replay")
  rows.push(["read + decode + fold (Effect stream), 100,000 events", `${replay.toFixed(0)}/s`, `${rawRate.toFixed(0)}/s (SELECT + JSON.parse)`, ratio(replay, rawRate)])
  await c.close()

  // Event-loop delay of one writer among 4 processes hammering one session.
  for (const mode of ["library", "naive"] as const) {
    const shared = await prepared("normal")
    const { monitored, total } = await eventLoopUnderContention(mode, shared, 4000)
    rows.push([
      `writer event-loop delay, 4 processes × 4 s, ${mode === "library" ? "async busy wait (lite-agent)" : "native busy_timeout 5000 (naive)"}`,
      `p99 ${monitored.p99.toFixed(1)} ms, max ${monitored.max.toFixed(1)} ms`,
      `${total} appends in all`,
      ""
    ])
  }
  return rows
}
