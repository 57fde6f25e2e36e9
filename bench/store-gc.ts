/**
 * What `gc` costs on a store of many sessions over one workspace: each session's log holds one
 * whole-workspace capture (every path a reference to a shared object) and one file of its own;
 * a third of the sessions are then deleted, leaving their own objects for the collection. The
 * collection reads every log and lists every object, so its time is measured as the sessions
 * double and as the objects grow tenfold; the ratio against the smallest store shows which it
 * follows. The stores are written through the file checkpointer in this process.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { Checkpointer } from "../src/core/Checkpointer.js"
import { DEFAULT_GRACE_MS } from "../src/core/internal/objectCollection.js"
import { sha256Hex } from "../src/core/internal/sha256.js"
import { fileCheckpointer, type GcReport } from "../src/index.js"
import { shiftedBy } from "../src/testing/helpers.js"
import { captureEvents } from "../src/tools/WorkspaceCapture.js"
import { median } from "./shared.js"

const ROUNDS = 3

const contentOf = (name: string) => new TextEncoder().encode(`${name}\n`.repeat(64))

const buildStore = async (dir: string, sessions: number, files: number) => {
  const store = fileCheckpointer({ dir })
  const workspace = Array.from({ length: files }, (_, i) => ({ path: `src/f${i}.ts`, data: contentOf(`file ${i}`) }))
  for (let s = 0; s < sessions; s++) {
    const own = contentOf(`session ${s}`)
    const changes = [...workspace, { path: "own.txt", data: own }].map(({ data, path }) => ({
      path,
      state: { _tag: "content" as const, data, sha256: sha256Hex(data), size: data.length, mode: 0o644 },
      firstSeen: true as const
    }))
    await store.append(`s${s}`, captureEvents({ _tag: "checkpoint" }, "bench", changes))
  }
  for (let s = 0; s < sessions; s += 3) await store.delete(`s${s}`)
  return store
}

interface GcFigures {
  readonly sessions: number
  readonly objects: number
  readonly gcMs: number
  readonly report: GcReport
}

const measure = async (sessions: number, files: number): Promise<GcFigures> => {
  const dir = mkdtempSync(join(tmpdir(), "lite-agent-bench-gc-"))
  try {
    const store = await buildStore(dir, sessions, files)
    const times: Array<number> = []
    const reports: Array<GcReport> = []
    for (let round = 0; round < ROUNDS; round++) {
      const start = process.hrtime.bigint()
      // Past the grace period: the first round deletes the deleted sessions' objects, the others find nothing more.
      reports.push(await Effect.runPromise(
        shiftedBy(2 * DEFAULT_GRACE_MS)(Effect.flatMap(Checkpointer, (c) => c.gc())).pipe(Effect.provide(store.layer))
      ))
      times.push(Number(process.hrtime.bigint() - start) / 1e6)
    }
    await store.close()
    return { sessions, objects: files, gcMs: median(times), report: reports[0]! }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

export const runStoreGcBench = async (): Promise<Array<Array<string>>> => {
  const x = (value: number) => `${value.toFixed(2)}×`
  const rows: Array<Array<string>> = []
  const baseline = await measure(25, 2_000)
  for (const [sessions, files] of [[25, 2_000], [50, 2_000], [100, 2_000], [25, 20_000]] as const) {
    const figures = sessions === 25 && files === 2_000 ? baseline : await measure(sessions, files)
    rows.push([
      `${sessions} sessions × ${files.toLocaleString()} paths`,
      `${figures.gcMs.toFixed(0)} ms`,
      `${baseline.gcMs.toFixed(0)} ms (25 × 2,000)`,
      x(figures.gcMs / baseline.gcMs),
      `${figures.report.sessions} logs, ${figures.report.objects} objects, ${figures.report.deleted} deleted`
    ])
  }
  return rows
}
