/**
 * The lost-object race, with real processes: writers reference old objects no log references
 * (by their bytes, or by hash alone) while collectors delete such objects in a loop, and both
 * sides are SIGKILLed at random moments. Afterwards every acknowledged event's object reads back
 * byte-exact; a reference that came after its object was collected was refused, never logged.
 */
import { join } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { sha256Hex } from "../src/core/internal/sha256.js"
import { FileSnapshot } from "../src/index.js"
import { live, makeTempDir, removeTempDirs, startWorker, type Worker } from "./support/processes.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"
import { openStore, postgresLocation, type StoreBackend } from "./support/stores.js"

let server: PostgresServer
beforeAll(async () => {
  server = await startPostgres()
}, 120_000)
afterAll(() => {
  for (const child of live) child.kill("SIGKILL")
  removeTempDirs()
  server?.destroy()
})

const locationFor = (backend: StoreBackend) =>
  backend === "sqlite"
    ? join(makeTempDir("gc-race-db"), "sessions.db")
    : backend === "postgres"
    ? postgresLocation(server.url, "gc_race")
    : makeTempDir("gc-race")

const ROUNDS = 6
const WRITERS = 2
/** Acknowledged appends each writer makes, and collections the collector completes, before a round's kills. */
const ACKS_PER_ROUND = 6
const GCS_PER_ROUND = 3

interface Acked {
  readonly session: string
  readonly seq: number
  readonly sha256: string
  readonly text: string
}

const parsed = (line: string): Record<string, unknown> => {
  try {
    return JSON.parse(line) as Record<string, unknown>
  } catch {
    return {}
  }
}
const count = (worker: Worker, key: string) => worker.lines.filter((line) => key in parsed(line)).length
/** Resolves once `worker` has printed `n` lines with `key`. */
const printed = (worker: Worker, key: string, n: number) => {
  let seen = 0
  return worker.waitForLine((line) => key in parsed(line) && ++seen >= n)
}

describe.each(["file", "sqlite", "postgres"] as const)("gc while writers reuse objects, across processes: %s", (backend: StoreBackend) => {
  it(`${ROUNDS} rounds of SIGKILLs on both sides: every acknowledged event's object reads back`, async () => {
    const location = locationFor(backend)
    const start = (role: "writer" | "collector", name = "") => startWorker("object-reuser.ts", [backend, location, role, ...(name ? [name] : [])])
    let writers = Array.from({ length: WRITERS }, (_, i) => start("writer", `w${i}`))
    let collector = start("collector")
    const ended: Array<Worker> = []
    for (let round = 0; round < ROUNDS; round++) {
      await Promise.all([...writers.map((writer) => printed(writer, "acked", count(writer, "acked") + ACKS_PER_ROUND)), printed(collector, "gc", count(collector, "gc") + GCS_PER_ROUND)])
      // Kill one writer and, every other round, the collector, each at some point of what it is doing.
      const victims = [writers[round % WRITERS]!, ...(round % 2 === 0 ? [collector] : [])]
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20))
      for (const victim of victims) victim.child.kill("SIGKILL")
      for (const victim of victims) await victim.closed
      ended.push(...victims)
      writers = writers.map((writer, i) => (victims.includes(writer) ? start("writer", `w${i}`) : writer))
      if (victims.includes(collector)) collector = start("collector")
    }
    for (const worker of [...writers, collector]) worker.child.kill("SIGKILL")
    for (const worker of [...writers, collector]) await worker.closed
    const everyone = [...ended, ...writers, collector]
    for (const worker of everyone) expect(worker.stderr(), "no worker failed on its own").not.toMatch(/Error/)

    const acked = everyone.flatMap((worker) => worker.lines.map((line) => parsed(line).acked as Acked | undefined).filter((a) => a !== undefined))
    const collected = everyone.flatMap((worker) => worker.lines.map((line) => (parsed(line).gc as { deleted: number } | undefined)?.deleted ?? 0))
    expect(acked.length).toBeGreaterThanOrEqual(ROUNDS * ACKS_PER_ROUND)
    const store = await openStore(backend, location)
    try {
      for (const { session, seq, sha256, text } of acked) {
        const [stored] = await store.read(session, { sinceSeq: seq - 1 })
        expect((stored!.event as FileSnapshot).state, `${session}@${seq}`).toMatchObject({ sha256 })
        const bytes = await store.readSnapshot(session, sha256)
        expect(sha256Hex(bytes), `${session}@${seq}`).toBe(sha256)
        expect(new TextDecoder().decode(bytes)).toBe(text)
      }
      // The collectors did delete: old objects whose writer was killed before referencing them, or that lost the race.
      expect(collected.reduce((a, b) => a + b, 0)).toBeGreaterThan(0)
    } finally {
      await store.close()
    }
  }, 300_000)
})
