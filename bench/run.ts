/**
 * Benchmarks, run by hand: `npm run bench`. Figures are ratios against a baseline measured
 * in the same run, because the machines are noisy. `npm run bench -- file sqlite` runs only
 * those sections (core, file, sqlite, postgres, server, agent, long, workspace, storage, tree, cli, viewer).
 */
import { Effect, Stream } from "effect"
import { Checkpointer, encodeStoredEvent, MemoryCheckpointer, Session, UserMessage, AssistantMessage } from "../src/core.js"
import { runAgentBench } from "./agent.js"
import { runCliBench } from "./cli.js"
import { runViewerBench } from "./viewer.js"
import { runFileBench } from "./file.js"
import { runLongSessionBench } from "./longSession.js"
import { runPostgresBench } from "./postgres.js"
import { runServerBench } from "./server.js"
import { runSqliteBench } from "./sqlite.js"
import { runTreeBench } from "./tree.js"
import { runStorageBench } from "./storage.js"
import { runStoreGcBench } from "./store-gc.js"
import { runWorkspaceBench } from "./workspace.js"

const SECTIONS = ["core", "file", "sqlite", "postgres", "server", "agent", "long", "workspace", "storage", "tree", "cli", "viewer"]
const wanted = process.argv.slice(2)
const unknown = wanted.filter((name) => !SECTIONS.includes(name))
if (unknown.length > 0) throw new Error(`unknown bench section(s): ${unknown.join(", ")}; the sections are ${SECTIONS.join(", ")}`)
const runs = (section: string) => wanted.length === 0 || wanted.includes(section)

const EVENTS = 100_000

const time = async (run: () => Promise<unknown> | unknown): Promise<number> => {
  const start = process.hrtime.bigint()
  await run()
  return Number(process.hrtime.bigint() - start) / 1e6
}

if (runs("core")) {
  const events = Array.from({ length: EVENTS }, (_, i) =>
    i % 2 === 0
      ? new UserMessage({ content: `prompt ${i} with some words in it`, origin: "user" })
      : new AssistantMessage({ content: [{ type: "text", text: `answer ${i} with a little more text in it` }] }))

  const rows: Array<[string, number, string]> = []

  // Baseline: JSON.parse of the same records as JSON lines.
  const lines = events.map((event, i) => JSON.stringify(encodeStoredEvent({ seq: i + 1, ts: 0, event }))).join("\n")
  const rawMs = await time(() => {
    for (const line of lines.split("\n")) JSON.parse(line)
  })
  rows.push(["JSON.parse of the JSON lines (baseline)", rawMs, "1.00×"])

  const replayMs = await Effect.runPromise(Effect.gen(function*() {
    const c = yield* Checkpointer
    for (let i = 0; i < EVENTS; i += 10_000) yield* c.append("bench", events.slice(i, i + 10_000))
    const start = process.hrtime.bigint()
    const state = yield* Stream.runFold(c.read("bench"), Session.emptySessionState, Session.step)
    if (state.head !== EVENTS) throw new Error("bad fold")
    return Number(process.hrtime.bigint() - start) / 1e6
  }).pipe(Effect.provide(MemoryCheckpointer.layer)))
  rows.push(["memory backend: read + decode + fold", replayMs, `${(rawMs / replayMs).toFixed(2)}× baseline`])

  const stored = events.map((event, i) => ({ seq: i + 1, ts: 0, event }))
  const foldMs = await time(() => Session.fold(stored))
  rows.push(["Session.fold of decoded events", foldMs, `${(rawMs / foldMs).toFixed(2)}× baseline`])

  console.log(`\n## Core (${EVENTS.toLocaleString()} events)\n`)
  console.log("| measurement | ms | throughput vs baseline |\n|---|---:|---:|")
  for (const [name, ms, ratio] of rows) console.log(`| ${name} | ${ms.toFixed(0)} | ${ratio} |`)
}

/** A section of markdown: its title, and a table of `columns` (the first left-aligned) with `rows`. */
const printTable = (title: string, columns: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>) => {
  console.log(`\n## ${title}\n`)
  console.log(`| ${columns.join(" | ")} |\n|---|${columns.slice(1).map(() => "---:|").join("")}`)
  for (const row of rows) console.log(`| ${row.join(" | ")} |`)
}

if (runs("file")) printTable("File backend", ["measurement", "lite-agent", "raw baseline", "ratio"], await runFileBench())
if (runs("sqlite")) printTable("SQLite backend", ["measurement", "lite-agent", "raw better-sqlite3", "ratio"], await runSqliteBench())
if (runs("postgres")) {
  printTable("PostgreSQL backend", ["measurement", "lite-agent", "raw pg, same statements", "ratio"], await runPostgresBench())
}
if (runs("server")) {
  printTable(
    "Session server under many SSE followers (2,000 appends at 80/s from another process; server, clients and writer in separate processes)",
    ["load", "server", "append→receipt p50 / p99", "commit→receipt p50 / p99", "its p99 vs bare", "server CPU per delivery", "vs bare", "peak RSS", "GET /sessions p99", "delivered"],
    await runServerBench()
  )
}

if (runs("agent")) {
  console.log(`\n## Agent turn (scripted model, one write_file per turn)\n`)
  console.log("| backend | 6 appends (baseline) | turns 6-25 | turns 981-1000 | late / early |\n|---|---:|---:|---:|---:|")
  const agentBench = await runAgentBench()
  for (const row of agentBench.turns) console.log(`| ${row.join(" | ")} |`)
  console.log("\n| scripted model call | no tools (baseline) | with the agent toolkit | ratio |\n|---|---:|---:|---:|")
  console.log(`| generateText | ${agentBench.model.join(" | ")} |`)
}

if (runs("workspace")) {
  printTable(
    "Whole-workspace checkpoints (file backend; medians of 5 rounds; git baselines in the same run)",
    ["tree", "measurement", "lite-agent", "baseline", "ratio"],
    await runWorkspaceBench()
  )
}

if (runs("storage")) {
  printTable(
    "A store across sessions (file backend; each session a new process editing one file; baselines in the same run)",
    ["tree", "measurement", "lite-agent", "baseline", "ratio"],
    await runStorageBench()
  )
  printTable(
    "gc on a store of many sessions over one workspace (file backend; medians of 3 runs)",
    ["store", "gc", "baseline", "ratio", "seen"],
    await runStoreGcBench()
  )
}

if (runs("tree")) {
  printTable(
    "The session tree (file backend, the whole workspace captured; medians of 7 rounds)",
    ["sessions", "measurement", "large", "small (baseline)", "ratio"],
    await runTreeBench()
  )
}

if (runs("cli")) {
  printTable(
    "Start-up of the command (the built package; medians of 15 runs, alternating with the baseline)",
    ["command", "time", "node -e \"\" (baseline)", "ratio"],
    await runCliBench()
  )
}

if (runs("viewer")) {
  printTable(
    "The viewer: bytes shipped, and the first render of a session in headless Chromium (medians of 9, alternating with the baseline)",
    ["measurement", "value", "empty session (baseline)", "ratio"],
    await runViewerBench()
  )
}

if (runs("long")) {
  printTable(
    "A long session rewriting a 512 KB file every prompt (file backend, JSON codec)",
    ["measurement", "512 KB file", "1-byte file (baseline)", "ratio"],
    await runLongSessionBench()
  )
}
