/** Pieces every benchmark shares: timing, medians, ratios, the events written, raw SQL appends. */
import { type IntervalHistogram, monitorEventLoopDelay } from "node:perf_hooks"
import type Database from "better-sqlite3"
import { Effect, type Layer, Stream } from "effect"
import { AssistantMessage, Checkpointer, Session, UserMessage } from "../src/core.js"
import { CheckpointBusyError, CheckpointConflictError, type PromiseCheckpointer } from "../src/index.js"

export const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6
export const median = (values: Array<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
export const ratio = (value: number, baseline: number) => `${(value / baseline).toFixed(2)}×`

/** Alternating prompts and answers of realistic size, as an application builds them: class instances (validated). */
export const eventFor = (i: number) =>
  i % 2 === 0
    ? new UserMessage({ content: `prompt ${i}: please refactor the module and keep the tests green`, origin: "user" })
    : new AssistantMessage({ content: [{ type: "text", text: `answer ${i}: done, the tests pass and the diff is small` }] })

/**
 * The same event's JSON as a program without lite-agent would make it: a plain object, stringified
 * (the raw baselines' cost of building an event; the bytes are those lite-agent stores).
 */
export const rawEventJson = (i: number) =>
  JSON.stringify(
    i % 2 === 0
      ? { content: `prompt ${i}: please refactor the module and keep the tests green`, origin: "user", _tag: "UserMessage" }
      : { content: [{ type: "text", text: `answer ${i}: done, the tests pass and the diff is small` }], _tag: "AssistantMessage" }
  )

/**
 * The raw better-sqlite3 baseline: the statements and transaction the SQLite backend runs for
 * a single-event append (read the head, insert head+1, move the head), as one immediate
 * transaction. Returns a function appending one encoded event's JSON to `sessionId`.
 */
export const rawSqliteAppender = (db: Database.Database, sessionId: string) => {
  const head = db.prepare("SELECT head FROM lite_agent_sessions WHERE id = ?").pluck()
  const insert = db.prepare("INSERT INTO lite_agent_events (session_id, seq, ts, event) VALUES (?, ?, ?, ?)")
  const upsert = db.prepare(
    "INSERT INTO lite_agent_sessions (id, head, mtime, generation) VALUES (?, ?, ?, 1) ON CONFLICT (id) DO UPDATE SET head = excluded.head, mtime = excluded.mtime"
  )
  const append = db.transaction((eventJson: string) => {
    const next = ((head.get(sessionId) as number | undefined) ?? 0) + 1
    insert.run(sessionId, next, Date.now(), eventJson)
    upsert.run(sessionId, next, Date.now())
  })
  return (eventJson: string) => append.immediate(eventJson)
}

/**
 * Events per second of read + decode + fold of `sessionId` through the Effect stream, measured
 * on a second pass (the first warms up, as the raw baselines' JSON.parse is warm too).
 */
export const foldRate = async (layer: Layer.Layer<Checkpointer, unknown>, sessionId: string) => {
  const fold = Effect.flatMap(Checkpointer, (checkpointer) =>
    Stream.runFold(checkpointer.read(sessionId), Session.emptySessionState, Session.step)).pipe(Effect.provide(layer))
  await Effect.runPromise(fold)
  const start = process.hrtime.bigint()
  const state = await Effect.runPromise(fold)
  return state.head / (ms(start) / 1000)
}

/** A contention writer's report: its appends and its event-loop delay percentiles, as one JSON line. */
export const reportLoopDelay = (appends: number, histogram: IntervalHistogram, cpuMs = 0) => {
  histogram.disable()
  process.stdout.write(JSON.stringify({
    appends,
    cpuMs,
    p50: histogram.percentile(50) / 1e6,
    p99: histogram.percentile(99) / 1e6,
    max: histogram.max / 1e6
  }) + "\n")
}

/** What a contention writer reports (see `reportLoopDelay`). */
export interface WriterReport {
  readonly appends: number
  /** CPU time (user + system) the writer used during its run. */
  readonly cpuMs: number
  readonly p50: number
  readonly p99: number
  readonly max: number
}

/**
 * Run `count` writer processes (`node --import tsx <script> ...args(index)`), and start their
 * timed runs at the same instant, once every one has loaded and opened its store: process
 * start-up (compiling, loading modules) would otherwise overlap the others' runs and measure
 * nothing but itself. Resolves to each writer's report.
 */
export const runWriters = async (
  script: string,
  args: (index: number) => ReadonlyArray<string>,
  count = 4
): Promise<Array<WriterReport>> => {
  const { spawn } = await import("node:child_process")
  let ready = 0
  let release: () => void = () => undefined
  const allReady = new Promise<void>((resolve) => (release = resolve))
  const writers = Array.from({ length: count }, (_, index) => {
    const child = spawn(process.execPath, ["--import", "tsx", script, ...args(index)], { stdio: ["pipe", "pipe", "inherit"] })
    let output = ""
    let announced = false
    child.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString("utf8")
      if (!announced && output.includes("ready\n")) {
        announced = true
        if (++ready === count) release()
      }
    })
    const exited = new Promise<WriterReport>((resolve, reject) =>
      child.on("exit", (code) =>
        code === 0
          ? resolve(JSON.parse(output.trim().split("\n").at(-1)!) as WriterReport)
          : reject(new Error(`writer ${index} exited with ${code}: ${output}`))))
    return { child, exited }
  })
  await allReady
  for (const { child } of writers) child.stdin.end("go\n")
  return Promise.all(writers.map((writer) => writer.exited))
}

/**
 * How long each contention writer appends, unmeasured, to a session of its own before its timed
 * run: the JIT compiles the hot path first. Started cold, a 4-s run of the library's writer spent
 * about 30% of its CPU in V8's optimising compiler (`perf`), which measures V8 more than the
 * library; the naive writers warm up the same way.
 */
export const WARM_UP_MS = 3000

/**
 * A contention writer's run. `appendFor(sessionId, deadline)` is the writer's loop, resolving to
 * its appends: it runs first for `WARM_UP_MS` on a session of the writer's own; then the writer
 * says it is ready, waits for `runWriters` to start every writer at once, runs for `durationMs`
 * on `sessionId`, and prints its appends, its CPU time and its event-loop delay (measured during
 * the run, when `monitor`).
 */
export const timedWriterRun = async (
  durationMs: number,
  monitor: boolean,
  appendFor: (sessionId: string, deadline: number) => Promise<number>,
  sessionId: string
): Promise<void> => {
  await appendFor(`warm-up-${process.pid}`, Date.now() + WARM_UP_MS)
  const histogram = monitorEventLoopDelay({ resolution: 1 })
  process.stdout.write("ready\n")
  for await (const _ of process.stdin) break
  if (monitor) histogram.enable()
  const cpuAtStart = process.cpuUsage()
  const appends = await appendFor(sessionId, Date.now() + durationMs)
  const cpu = process.cpuUsage(cpuAtStart)
  reportLoopDelay(appends, histogram, (cpu.user + cpu.system) / 1000)
}

/**
 * A contention writer's library run: `inFlight` appenders at once (as a server serving that many
 * requests would run them), each appending single events to `sessionId` until `deadline`,
 * retrying conflicts and busy errors. Resolves to the appends that succeeded.
 */
export const appendUntil = async (c: PromiseCheckpointer, sessionId: string, deadline: number, inFlight: number) => {
  let appends = 0
  const appender = async () => {
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
  }
  await Promise.all(Array.from({ length: inFlight }, appender))
  return appends
}

const cpuPerAppend = (run: { readonly total: number; readonly cpuMs: number }) => `${((run.cpuMs * 1000) / run.total).toFixed(0)} µs`

/**
 * The contention rows of a backend's table: for one shared session and a session each, naive
 * writers once, and lite-agent's with 1 and 8 appends in flight, as ratios of the naive total.
 */
export const contentionRows = async (
  run: (mode: "library" | "naive", sessions: "shared" | "own", inFlight: number) => Promise<{
    readonly total: number
    /** CPU time of all the writers during their runs. */
    readonly cpuMs: number
    readonly monitored: WriterReport
  }>,
  naiveLabel: string
) => {
  const rows: Array<Array<string>> = []
  for (const sessions of ["shared", "own"] as const) {
    const naive = await run("naive", sessions, 1)
    for (const inFlight of [1, 8]) {
      const library = await run("library", sessions, inFlight)
      rows.push([
        `4 processes × 4 s, ${sessions === "shared" ? "one shared session" : "a session each"}, ${inFlight} in flight: appends in all (a writer's p99 / max event-loop delay; CPU per append)`,
        `${library.total} (${library.monitored.p99.toFixed(1)} / ${library.monitored.max.toFixed(1)} ms; ${cpuPerAppend(library)})`,
        `${naive.total} (${naive.monitored.p99.toFixed(1)} / ${naive.monitored.max.toFixed(1)} ms; ${cpuPerAppend(naive)}), ${naiveLabel}`,
        ratio(library.total, naive.total)
      ])
    }
  }
  return rows
}
