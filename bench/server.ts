/**
 * The session server under many followers, in real processes on loopback: the server in one
 * (bench/server-process.ts), the SSE clients in another (bench/sse-clients.ts), the writer and a
 * probe of `GET /sessions` in this one. Two loads: 300 clients following one session while 2,000
 * events are appended at 80/s, and 1,000 clients spread over 100 sessions (10 each) while 2,000
 * events are appended to them in turn at the same rate. Per backend (file, SQLite, PostgreSQL):
 * append→receipt p50/p99 (from the append call) and commit→receipt (from its return: the
 * server's own part, without the store's commit), the server's CPU time per delivered event, its
 * peak RSS, and how long `GET /sessions` takes meanwhile — against a bare `node:http` server
 * writing the same frames to the same clients, measured in the same run (its events have no
 * commit: both latencies count from their making).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createInterface, type Interface } from "node:readline"
import { setTimeout as sleep } from "node:timers/promises"
import { startPostgres } from "../test/support/postgres.js"
import { BENCH_TOKEN, openStore, timedEvent, wallNow } from "./server-process.js"

const EVENTS = 2000
/** The pause between the last client's connection and the first append. */
const SETTLE_MS = 2000
const PER_SECOND = 80

interface Load {
  readonly name: string
  readonly sessions: ReadonlyArray<string>
  readonly perSession: number
}

const LOADS: ReadonlyArray<Load> = [
  { name: "300 clients, one session", sessions: ["s0"], perSession: 300 },
  { name: "1,000 clients over 100 sessions", sessions: Array.from({ length: 100 }, (_, i) => `s${i}`), perSession: 10 }
]

/**
 * To look at one part: `SERVER_BENCH_BACKENDS=postgres` (a comma-separated list) and
 * `SERVER_BENCH_LOAD=2` (1 or 2) narrow a run; the baseline is measured in every run.
 */
const BACKENDS = (process.env.SERVER_BENCH_BACKENDS ?? "file,sqlite,postgres").split(",").filter((name) => name !== "")
const ONLY_LOAD = process.env.SERVER_BENCH_LOAD === undefined ? undefined : Number(process.env.SERVER_BENCH_LOAD)

interface Measured {
  readonly p50: number
  readonly p99: number
  readonly commitP50: number
  readonly commitP99: number
  readonly delivered: number
  readonly expected: number
  readonly disordered: number
  readonly cpuMs: number
  readonly peakRssMb: number
  readonly probeP99: number
  readonly probes: number
}

const node = (script: string, args: ReadonlyArray<string>) =>
  spawn(process.execPath, ["--import", "tsx", join(import.meta.dirname, script), ...args], { stdio: ["pipe", "pipe", "inherit"] })

/** The next line of `lines` that `accept` takes. */
const lineOf = (lines: Interface, accept: (line: string) => boolean) =>
  new Promise<string>((resolve, reject) => {
    const onLine = (line: string) => {
      if (!accept(line)) return
      lines.off("line", onLine)
      resolve(line)
    }
    lines.on("line", onLine)
    lines.once("close", () => reject(new Error("the process ended first")))
  })

const CLOCK_TICKS_PER_SECOND = 100
/** A live process's CPU time (user + system) and peak resident memory, from /proc. */
const processStats = (child: ChildProcess) => {
  const stat = readFileSync(`/proc/${child.pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  const cpuMs = ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND
  const peakKb = Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, "utf8"))?.[1])
  return { cpuMs, peakRssMb: peakKb / 1024 }
}

const percentile = (values: Array<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN
}

type Served = { readonly kind: "lite"; readonly backend: string; readonly store: string } | { readonly kind: "bare" }

const measure = async (load: Load, served: Served): Promise<Measured> => {
  const writer = served.kind === "lite" ? openStore(served.backend, served.store) : undefined
  // Every session exists (one event) before its clients arrive; they follow from its head.
  if (writer !== undefined) for (const session of load.sessions) await writer.append(session, [timedEvent()])
  const server = served.kind === "lite"
    ? node("server-process.ts", ["lite", JSON.stringify({ backend: served.backend, store: served.store })])
    : node("server-process.ts", ["bare", JSON.stringify({ sessions: load.sessions, events: EVENTS, perSecond: PER_SECOND })])
  const serverLines = createInterface({ input: server.stdout! })
  try {
    const url = (await lineOf(serverLines, (line) => line.startsWith("ready "))).slice("ready ".length)
    const expected = EVENTS / load.sessions.length
    const clients = node("sse-clients.ts", [JSON.stringify({ url, sessions: load.sessions, perSession: load.perSession, expected, lastEventId: "1" })])
    const clientLines = createInterface({ input: clients.stdout! })
    const result = lineOf(clientLines, (line) => line.startsWith("{"))
    await lineOf(clientLines, (line) => line === "ready")
    // Measured from a settled server: its followers have started (PostgreSQL: the pool's
    // connections opened) before the first append, for lite-agent and the baseline alike.
    await sleep(SETTLE_MS)
    const before = processStats(server)

    let writing = true
    const probes: Array<number> = []
    const probing = (async () => {
      while (writing) {
        const started = performance.now()
        const response = await fetch(`${url}/sessions`, { headers: { authorization: `Bearer ${BENCH_TOKEN}` } })
        await response.arrayBuffer()
        probes.push(performance.now() - started)
        await sleep(100)
      }
    })()
    /** When each append returned, by session and seq (the bare baseline has no commits). */
    const commits: Record<string, Record<string, number>> = {}
    if (writer === undefined) {
      server.stdin!.write("go\n")
      await lineOf(serverLines, (line) => line === "written")
    } else {
      const started = performance.now()
      for (let i = 0; i < EVENTS; i++) {
        const wait = started + (i * 1000) / PER_SECOND - performance.now()
        if (wait > 0) await sleep(wait)
        const session = load.sessions[i % load.sessions.length]!
        const seq = await writer.append(session, [timedEvent()])
        ;(commits[session] ??= {})[String(seq)] = wallNow()
      }
    }
    clients.stdin!.write(`commits ${JSON.stringify(commits)}\n`)
    // Every delivery, or two minutes after the last append.
    const late = setTimeout(() => clients.stdin!.write("stop\n"), 120_000)
    const measured = JSON.parse(await result) as {
      delivered: number
      expected: number
      disordered: number
      p50: number
      p99: number
      commitP50: number
      commitP99: number
    }
    clearTimeout(late)
    writing = false
    await probing
    const after = processStats(server)
    clients.kill()
    return {
      ...measured,
      cpuMs: after.cpuMs - before.cpuMs,
      peakRssMb: after.peakRssMb,
      probeP99: percentile(probes, 99),
      probes: probes.length
    }
  } finally {
    server.kill("SIGKILL")
    await writer?.close()
  }
}

const fixed = (value: number, digits = 0) => value.toFixed(digits)

export const runServerBench = async () => {
  const postgres = await startPostgres()
  const rows: Array<Array<string>> = []
  try {
    let run = 0
    for (const load of LOADS.filter((_, index) => ONLY_LOAD === undefined || ONLY_LOAD === index + 1)) {
      const bare = await measure(load, { kind: "bare" })
      const perDelivery = (m: Measured) => (m.cpuMs * 1000) / Math.max(1, m.delivered)
      rows.push([
        load.name,
        "bare node:http",
        `${fixed(bare.p50, 1)} / ${fixed(bare.p99, 1)} ms`,
        `${fixed(bare.commitP50, 1)} / ${fixed(bare.commitP99, 1)} ms`,
        "1.00×",
        `${fixed(perDelivery(bare), 1)} µs`,
        "1.00×",
        `${fixed(bare.peakRssMb)} MB`,
        `${fixed(bare.probeP99, 1)} ms`,
        `${fixed((100 * bare.delivered) / bare.expected, 1)}%`
      ])
      for (const backend of BACKENDS) {
        run++
        const dir = mkdtempSync(join(tmpdir(), "bench-server-"))
        const store = backend === "file" ? dir : backend === "sqlite" ? join(dir, "s.db") : `${postgres.url} bench_server_${process.pid}_${run}`
        const m = await measure(load, { kind: "lite", backend, store })
        rows.push([
          load.name,
          backend,
          `${fixed(m.p50, 1)} / ${fixed(m.p99, 1)} ms`,
          `${fixed(m.commitP50, 1)} / ${fixed(m.commitP99, 1)} ms`,
          `${fixed(m.commitP99 / bare.commitP99, 2)}×`,
          `${fixed(perDelivery(m), 1)} µs`,
          `${fixed(perDelivery(m) / perDelivery(bare), 2)}×`,
          `${fixed(m.peakRssMb)} MB (${fixed(m.peakRssMb - 2 * bare.peakRssMb)} over 2× bare)`,
          `${fixed(m.probeP99, 1)} ms`,
          `${fixed((100 * m.delivered) / m.expected, 1)}%${m.disordered > 0 ? `, ${m.disordered} out of order` : ""}`
        ])
      }
    }
  } finally {
    postgres.destroy()
  }
  return rows
}
