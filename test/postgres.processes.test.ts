/**
 * The Postgres backend under real concurrency and real crashes, against one real server started
 * for this file: four writer processes on one schema (test/workers/writer.ts) — and again with
 * two of them in network namespaces of their own, talking TCP over a veth link as other
 * machines would; processes opening an empty schema at the same instant; writers SIGKILLed
 * mid-batch; and the server itself stopped like a crash (`pg_ctl stop -m immediate`) while
 * a writer appends, then started again.
 */
import { execFile } from "node:child_process"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { postgresCheckpointer } from "../src/checkpoint-postgres.js"
import { UserMessage } from "../src/index.js"
import { isRunning, live, nodeArgs, startWorker, type Worker } from "./support/processes.js"
import { createNetworkNamespace, type NetworkNamespace } from "./support/netns.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"
import { postgresLocation } from "./support/stores.js"
import { checkWholeBatches, command, expectContiguous, nextReply, readFresh, writerPool, writerScenarios } from "./support/writers.js"
import type { CrasherConfig } from "./workers/batch-crasher.js"

const run = promisify(execFile)

const asRoot = process.platform === "linux" && process.getuid?.() === 0
if (!asRoot) console.log("postgres.processes.test.ts: the network-namespace writers need root; they are skipped")

let server: PostgresServer
const namespaces: Array<NetworkNamespace> = []
beforeAll(async () => {
  if (asRoot) namespaces.push(createNetworkNamespace(1), createNetworkNamespace(2))
  server = await startPostgres({ listenAddresses: namespaces.slice(0, 1).map((namespace) => namespace.hostAddress) })
})
afterAll(() => {
  for (const child of live) child.kill("SIGKILL")
  server?.destroy()
  for (const namespace of namespaces) namespace.destroy()
})

let schemas = 0
/** A new schema on the server, created (and migrated) before any worker opens it. */
const freshStore = async (label: string, url = server.url) => {
  const schema = `p_${label}_${++schemas}`
  const creator = postgresCheckpointer({ url, schema })
  await creator.list()
  await creator.close()
  return postgresLocation(url, schema)
}

// ---------------------------------------------------------------------------------------
// 1-2. Many writers, racing on one expected head (shared with the file and SQLite backends)
// ---------------------------------------------------------------------------------------

describe("writers on the host", () => {
  writerScenarios(writerPool("postgres", () => freshStore("writers")), { retryCount: 500, timeoutMs: 180_000 })
})

describe.skipIf(!asRoot)("writers 2 and 3 each in a network namespace of their own, over TCP", () => {
  const pool = writerPool(
    "postgres",
    // Every writer connects to the host's end of the first link: namespace 2 reaches it through its default route.
    () => freshStore("netns", server.url.replace("127.0.0.1", namespaces[0]!.hostAddress)),
    { launcher: (writer) => (writer >= 2 ? namespaces[writer - 2]!.launcher : []) }
  )
  writerScenarios(pool, { retryCount: 200, timeoutMs: 180_000, setting: " (2 of 4 in network namespaces of their own, over TCP)" })

  it("the server sees the namespaced writers connect from their own addresses", async () => {
    const { writers } = await pool.get()
    for (const worker of writers) command(worker, { type: "retry", session: "where-from", count: 5 })
    await Promise.all(writers.map((worker) => nextReply(worker, "retry-result")))
    // Their pools keep the connections open for a while after use.
    const addresses = server.psql("SELECT DISTINCT host(client_addr) FROM pg_stat_activity WHERE application_name = 'lite-agent'")
    expect(addresses.split("\n").sort()).toEqual(["10.213.1.1", "10.213.1.2", "10.213.2.2"])
  })
})

// ---------------------------------------------------------------------------------------
// 3. Processes opening an empty schema together
// ---------------------------------------------------------------------------------------

describe("several processes opening an empty schema at the same instant", () => {
  it("all of them create or find the schema and append", async () => {
    const location = postgresLocation(server.url, `p_together_${++schemas}`)
    // Far enough ahead for every process to have loaded its modules.
    const at = Date.now() + 6000
    const outputs = await Promise.all(
      [1, 2, 3, 4].map((n) =>
        run(process.execPath, [...nodeArgs(join(import.meta.dirname, "workers", "opener.ts")), "postgres", location, String(at), `p${n}`], {
          cwd: join(import.meta.dirname, "..")
        }))
    )
    const results = outputs.map(({ stdout }) => JSON.parse(stdout.trim().split("\n").at(-1)!) as { ok: boolean; head?: number })
    expect(results.filter((result) => !result.ok), JSON.stringify(results)).toEqual([])
    expect(results.map((result) => result.head).sort()).toEqual([1, 2, 3, 4])
  })
})

// ---------------------------------------------------------------------------------------
// 4. Writers SIGKILLed, and the server crashing, during batch appends
// ---------------------------------------------------------------------------------------

const crasher = (config: CrasherConfig) => startWorker("batch-crasher.ts", [JSON.stringify(config)])

/** Start `worker` (already "ready") and wait for its first acknowledged append; resolves to its start head. */
const go = async (worker: Worker) => {
  await worker.waitForLine((line) => line === "ready")
  worker.child.stdin!.end("go\n")
  const startHead = Number((await worker.waitForLine((line) => line.startsWith("start "))).slice("start ".length))
  await worker.waitForLine((line) => line.startsWith("ack "))
  return startHead
}

const acksOf = (worker: Worker) => worker.lines.filter((line) => line.startsWith("ack ")).map((line) => Number(line.slice(4)))

describe("writer processes killed with SIGKILL", () => {
  it("3 SIGKILLs at random moments of batch appends: every acknowledged append there, no partial batch, appending continues", async () => {
    const location = await freshStore("sigkill")
    const session = "crashy"
    const cycles = 3
    const workers = Array.from({ length: cycles }, (_, cycle) =>
      crasher({ backend: "postgres", location, session, cycle, synchronous: "normal", maxBatches: 100_000 }))
    const acknowledged: Array<number> = []
    const expectedIds: Array<string> = []
    for (let cycle = 0; cycle < cycles; cycle++) {
      const worker = workers[cycle]!
      await go(worker)
      await Promise.race([sleep(20 + Math.floor(Math.random() * 300)), worker.closed])
      expect(isRunning(worker.child), `crasher ${cycle} ended by itself; stderr:\n${worker.stderr()}`).toBe(true)
      worker.child.kill("SIGKILL")
      expect((await worker.closed).signal).toBe("SIGKILL")
      const acks = acksOf(worker)
      acknowledged.push(...acks)
      const lastAck = acks.at(-1)!
      const inFlight = /^append (\d+) (\d+)$/.exec(worker.lines.at(-1) ?? "")
      const possibleHeads = inFlight === null ? [lastAck] : [lastAck, lastAck + Number(inFlight[2])]

      const { contents, events, head, integrity } = await readFresh("postgres", location, session)
      expect(integrity.ok, integrity.detail).toBe(true)
      expect(possibleHeads).toContain(head)
      expectContiguous(events.map((e) => e.seq), head)
      const ids = checkWholeBatches(contents, acknowledged)
      const mine = ids.slice(expectedIds.length)
      expect(ids.slice(0, expectedIds.length)).toEqual(expectedIds)
      expect(mine).toEqual(Array.from({ length: mine.length }, (_, batch) => `c${cycle}b${batch}`))
      expectedIds.push(...mine)
      console.log(
        `postgres SIGKILL cycle ${cycle}: ${acks.length} appends acknowledged, head ${head}` +
          (inFlight === null ? ", no append in flight" : `, killed during an append that ${head > lastAck ? "had" : "had not"} committed`)
      )
    }
    // Appending continues on top of whatever the kills left.
    const c = postgresCheckpointer({ url: location.slice(0, location.lastIndexOf("#")), schema: location.slice(location.lastIndexOf("#") + 1) })
    try {
      const head = await c.head(session)
      expect(await c.append(session, [new UserMessage({ content: "after:0/1" })], head)).toBe(head + 1)
    } finally {
      await c.close()
    }
  }, 180_000)
})

describe("the server stopped like a crash (pg_ctl stop -m immediate) during appends, then started again", () => {
  it("every acknowledged batch is there, none partial or twice; the writer's failed append is a typed error; it resumes after the restart", async () => {
    const location = await freshStore("server_crash")
    const session = "through-a-crash"
    const worker = crasher({ backend: "postgres", location, session, cycle: 0, synchronous: "normal", maxBatches: 100_000, resilient: true })
    await go(worker)
    await sleep(100 + Math.floor(Math.random() * 200))
    const acksBefore = acksOf(worker).length
    server.crash()
    const failure = await worker.waitForLine((line) => line.startsWith("fail "))
    expect(["fail StorageError", "fail CheckpointBusyError"]).toContain(failure)
    await sleep(300)
    server.start()
    const resumed = Number((await worker.waitForLine((line) => line.startsWith("resume "))).slice("resume ".length))
    // It goes on appending after the restart.
    const resumeIndex = worker.lines.findIndex((line) => line.startsWith("resume "))
    while (!worker.lines.slice(resumeIndex).some((line) => line.startsWith("ack "))) await sleep(20)
    await sleep(100)
    worker.child.kill("SIGKILL")
    await worker.closed

    const acks = acksOf(worker)
    const { contents, events, head, integrity } = await readFresh("postgres", location, session)
    expect(integrity.ok, integrity.detail).toBe(true)
    expectContiguous(events.map((e) => e.seq), head)
    // Whole batches, each once, in the order they were sent (the unknown one present or not).
    const ids = checkWholeBatches(contents, acks)
    const numbers = ids.map((id) => Number(/^c0b(\d+)$/.exec(id)![1]))
    expect([...numbers].sort((a, b) => a - b)).toEqual(numbers)
    expect(head).toBeGreaterThanOrEqual(acks.at(-1)!)
    // The head it resumed from is a batch boundary: the failed append either committed whole or not at all.
    expect(resumed === 0 || checkWholeBatches(contents.slice(0, resumed), []).length > 0).toBe(true)
    console.log(
      `postgres server crash: ${acksBefore} appends acknowledged before the crash, "${failure}", resumed at head ${resumed}, ` +
        `${acks.length} acknowledged in all, head ${head}`
    )
  })
})
