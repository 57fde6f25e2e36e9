/**
 * SQLite backend benchmarks, each next to raw better-sqlite3 running the same statements
 * and transactions in the same run.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import Database from "better-sqlite3"
import { sqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { Session } from "../src/core.js"
import { eventFor, foldRate, median, ms, ratio, rawEventJson, rawSqliteAppender, contentionRows, runWriters } from "./shared.js"

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
  const start = process.hrtime.bigint()
  for (let i = 0; i < count; i++) append(rawEventJson(i))
  const rate = count / (ms(start) / 1000)
  db.close()
  return rate
}

const libraryAppends = async (count: number, synchronous: "normal" | "full") => {
  const c = sqliteCheckpointer({ file: await prepared(synchronous), synchronous })
  const start = process.hrtime.bigint()
  // The expected head on every append, as an agent's writer passes it.
  for (let i = 0; i < count; i++) await c.append("bench", [eventFor(i)], i)
  const rate = count / (ms(start) / 1000)
  await c.close()
  return rate
}

/** Milliseconds to resume a session: its whole log read, decoded and folded (lite-agent), or SELECTed and parsed (raw). */
const resumeTimes = async (steps: number) => {
  const file = await prepared("normal")
  const c = sqliteCheckpointer({ file })
  for (let i = 0; i < steps; i += 1000) await c.append("resume", Array.from({ length: 1000 }, (_, k) => eventFor(i + k)))
  const raw = new Database(file, { readonly: true })
  const select = raw.prepare("SELECT seq, ts, event FROM lite_agent_events WHERE session_id = ? ORDER BY seq")
  const rawTimes: Array<number> = []
  const libTimes: Array<number> = []
  for (let trial = 0; trial < 6; trial++) {
    const rawStart = process.hrtime.bigint()
    const rows = select.all("resume") as Array<{ seq: number; ts: number; event: string }>
    const parsed = rows.map((row) => ({ seq: row.seq, ts: row.ts, event: JSON.parse(row.event) as unknown }))
    if (parsed.length !== steps) throw new Error("bad raw read")
    rawTimes.push(ms(rawStart))
    const libStart = process.hrtime.bigint()
    const state = Session.fold(await c.read("resume"))
    if (state.head !== steps) throw new Error("bad resume")
    libTimes.push(ms(libStart))
  }
  raw.close()
  await c.close()
  // The first trial warms up.
  return { lib: median(libTimes.slice(1)), raw: median(rawTimes.slice(1)) }
}

/** Where the writers of a contention run append: one session for all, or one each. */
export type ContentionSessions = "shared" | "own"

/** 4 writer processes for `durationMs` on one database: their appends in all, and the first writer's event-loop delay. */
const contention = async (mode: "library" | "naive", sessions: ContentionSessions, durationMs: number, inFlight = 1) => {
  const file = await prepared("normal")
  const results = await runWriters(join(import.meta.dirname, "sqlite-writer.ts"), (index) =>
    [file, mode, String(durationMs), index === 0 ? "1" : "0", sessions, String(inFlight)])
  return { monitored: results[0]!, total: results.reduce((sum, r) => sum + r.appends, 0), cpuMs: results.reduce((sum, r) => sum + r.cpuMs, 0) }
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

  const resume = await resumeTimes(5000)
  rows.push([
    "resume a 5,000-step session: read + decode + fold (promise facade), median of 5",
    `${resume.lib.toFixed(1)} ms`,
    `${resume.raw.toFixed(1)} ms (SELECT + JSON.parse)`,
    ratio(resume.raw, resume.lib)
  ])

  // 4 processes × 4 s appending as fast as they can: lite-agent's writers — one append at a time,
  // and 8 at a time as a server would run them — against naive blocking ones (one at a time: they cannot do more).
  rows.push(...(await contentionRows((mode, sessions, inFlight) => contention(mode, sessions, 4000, inFlight), "native busy_timeout")))
  return rows
}
