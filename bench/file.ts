/**
 * File backend benchmarks. Every figure is a ratio against a raw baseline measured in the
 * same run: plain `node:fs` doing the same work.
 */
import { closeSync, mkdtempSync, openSync, readFileSync } from "node:fs"
import * as fs from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Stream } from "effect"
import { recordLine } from "../src/backends/file/format.js"
import { Session } from "../src/core.js"
import { eventFor, foldRate, median, ms, ratio, rawEventJson, contentionRows, runWriters } from "./shared.js"
import { fileCheckpointer } from "../src/index.js"
import type { ContentionSessions } from "./sqlite.js"


/** One event's log line, as the backend writes it (same bytes: seq, checksum, ts and event JSON). */
export const rawLine = (seq: number, i: number) => recordLine(seq, seq, `{"ts":${Date.now()},"event":${rawEventJson(i)}}`)

const callback = <A>(register: (done: (error: Error | null, value?: A) => void) => void) =>
  new Promise<A | undefined>((resolve, reject) => register((error, value) => (error ? reject(error) : resolve(value))))

/**
 * The raw baseline: Node's asynchronous `fs.appendFile` of the same line (normal), or the same
 * write followed by `fdatasync` before it counts (full). Asynchronous, as a server's writes are:
 * `appendFileSync` is faster but stops the event loop for the whole write.
 */
const rawAppends = async (dir: string, count: number, durable: boolean) => {
  const path = join(dir, "raw.log")
  closeSync(openSync(path, "a"))
  const start = process.hrtime.bigint()
  for (let i = 0; i < count; i++) {
    const line = rawLine(i + 1, i)
    if (!durable) {
      await callback<void>((done) => fs.appendFile(path, line, done))
      continue
    }
    const fd = (await callback<number>((done) => fs.open(path, "a", done)))!
    await callback<number>((done) => fs.write(fd, line, done))
    await callback<void>((done) => fs.fdatasync(fd, done))
    await callback<void>((done) => fs.close(fd, done))
  }
  return count / (ms(start) / 1000)
}

const libraryAppends = async (dir: string, count: number, synchronous: "normal" | "full") => {
  const c = fileCheckpointer({ dir, synchronous })
  const start = process.hrtime.bigint()
  // The expected head on every append, as an agent's writer passes it.
  for (let i = 0; i < count; i++) await c.append("bench", [eventFor(i)], i)
  const rate = count / (ms(start) / 1000)
  await c.close()
  return rate
}

/** Milliseconds to resume a session: its whole log read, decoded and folded (lite-agent), or read and parsed (raw). */
const resumeTimes = async (steps: number) => {
  const dir = mkdtempSync(join(tmpdir(), "bench-resume-"))
  const c = fileCheckpointer({ dir })
  for (let i = 0; i < steps; i += 1000) await c.append("resume", Array.from({ length: 1000 }, (_, k) => eventFor(i + k)))
  const rawTimes: Array<number> = []
  const libTimes: Array<number> = []
  for (let trial = 0; trial < 6; trial++) {
    const rawStart = process.hrtime.bigint()
    const lines = readFileSync(join(dir, "resume", "log"), "utf8").split("\n")
    let parsed = 0
    for (let index = 1; index < lines.length; index++) {
      const line = lines[index]!
      if (line.length === 0) continue
      JSON.parse(line.slice(line.indexOf("{")))
      parsed++
    }
    if (parsed !== steps) throw new Error("bad raw read")
    rawTimes.push(ms(rawStart))
    const libStart = process.hrtime.bigint()
    const state = Session.fold(await c.read("resume"))
    if (state.head !== steps) throw new Error("bad resume")
    libTimes.push(ms(libStart))
  }
  await c.close()
  // The first trial warms up.
  return { lib: median(libTimes.slice(1)), raw: median(rawTimes.slice(1)) }
}

/** 4 writer processes for `durationMs` on one sessions directory: their appends in all, and the first writer's event-loop delay. */
const contention = async (mode: "library" | "naive", sessions: ContentionSessions, durationMs: number, inFlight = 1) => {
  const dir = mkdtempSync(join(tmpdir(), "bench-contention-"))
  const results = await runWriters(join(import.meta.dirname, "file-writer.ts"), (index) =>
    [dir, mode, String(durationMs), index === 0 ? "1" : "0", sessions, String(inFlight)])
  return { monitored: results[0]!, total: results.reduce((sum, r) => sum + r.appends, 0), cpuMs: results.reduce((sum, r) => sum + r.cpuMs, 0) }
}

const memoryMb = () => process.memoryUsage().heapUsed / 1024 / 1024

export const runFileBench = async () => {
  const rows: Array<Array<string>> = []

  for (const synchronous of ["normal", "full"] as const) {
    const count = synchronous === "full" ? 400 : 3000
    const durable = synchronous === "full"
    // Warm both paths up, then alternate three trials of each and keep the medians.
    await rawAppends(mkdtempSync(join(tmpdir(), "bench-raw-")), 300, durable)
    await libraryAppends(mkdtempSync(join(tmpdir(), "bench-lib-")), 300, synchronous)
    const raw: Array<number> = []
    const lib: Array<number> = []
    for (let trial = 0; trial < 3; trial++) {
      raw.push(await rawAppends(mkdtempSync(join(tmpdir(), "bench-raw-")), count, durable))
      lib.push(await libraryAppends(mkdtempSync(join(tmpdir(), "bench-lib-")), count, synchronous))
    }
    rows.push([
      `single-event append, synchronous ${synchronous} (median of 3 × ${count})`,
      `${median(lib).toFixed(0)}/s`,
      `${median(raw).toFixed(0)}/s (fs.appendFile${durable ? " + fdatasync" : ""})`,
      ratio(median(lib), median(raw))
    ])
  }

  const resume = await resumeTimes(5000)
  rows.push([
    "resume a 5,000-step session: read + decode + fold (promise facade), median of 5",
    `${resume.lib.toFixed(1)} ms`,
    `${resume.raw.toFixed(1)} ms (readFile + JSON.parse)`,
    ratio(resume.raw, resume.lib)
  ])

  // Replay: a 100,000-event session read, decoded and folded, against JSON.parse of the same lines.
  const events = 100_000
  const dir = mkdtempSync(join(tmpdir(), "bench-replay-"))
  const c = fileCheckpointer({ dir })
  for (let i = 0; i < events; i += 5_000) {
    await c.append("replay", Array.from({ length: 5_000 }, (_, k) => eventFor(i + k)))
  }
  const parseStart = process.hrtime.bigint()
  const text = readFileSync(join(dir, "replay", "log"), "utf8")
  let parsed = 0
  for (const line of text.split("\n").slice(1)) {
    if (line.length === 0) continue
    JSON.parse(line.slice(line.indexOf("{")))
    parsed++
  }
  const rawReplay = parsed / (ms(parseStart) / 1000)
  const replay = await foldRate(c.layer, "replay")
  rows.push([`read + decode + fold (Effect stream), ${events.toLocaleString()} events`, `${replay.toFixed(0)}/s`, `${rawReplay.toFixed(0)}/s (JSON.parse)`, ratio(replay, rawReplay)])
  const iterateStart = process.hrtime.bigint()
  let state = Session.emptySessionState
  for await (const stored of c.readIterable("replay")) state = Session.step(state, stored)
  const iterated = state.head / (ms(iterateStart) / 1000)
  rows.push([`read + decode + fold (promise facade, for await), ${events.toLocaleString()} events`, `${iterated.toFixed(0)}/s`, `${rawReplay.toFixed(0)}/s (JSON.parse)`, ratio(iterated, rawReplay)])

  // Replay memory: a streamed read of sessions of growing length keeps a flat heap.
  const heap: Array<string> = []
  for (const length of [10_000, 100_000]) {
    const id = `memory-${length}`
    if (length === 100_000) {
      // reuse the replay session
    } else {
      for (let i = 0; i < length; i += 5_000) await c.append(id, Array.from({ length: 5_000 }, (_, k) => eventFor(i + k)))
    }
    globalThis.gc?.()
    const before = memoryMb()
    let peak = before
    let seen = 0
    await Effect.runPromise(Stream.runForEach(
      Stream.fromAsyncIterable(c.readIterable(length === 100_000 ? "replay" : id), (e) => e),
      () => Effect.sync(() => {
        // Live heap (after a collection), sampled along the way: garbage is not growth.
        if (++seen % 5000 === 0) {
          globalThis.gc?.()
          peak = Math.max(peak, memoryMb())
        }
      })
    ))
    heap.push(`${length.toLocaleString()} events: +${(peak - before).toFixed(1)} MB`)
  }
  rows.push(["streamed read, largest live heap growth", heap.join("; "), "", ""])
  await c.close()

  // 4 processes × 4 s appending as fast as they can: lite-agent's writers — one append at a time,
  // and 8 at a time as a server would run them — against naive blocking ones (one at a time: they cannot do more).
  rows.push(...(await contentionRows((mode, sessions, inFlight) => contention(mode, sessions, 4000, inFlight), "blocking lock file")))
  return rows
}
