/**
 * The session server's benchmarks: how long an appended event takes to reach SSE clients
 * (p50/p99, 1 and 100 clients) and how many events a second reach 100 clients, per backend.
 * The appends come from a second checkpointer on the same store, as another process's would
 * (memory: the server's own), so each backend's change signal is on the path. The memory
 * backend (in-process notification, no storage) is the baseline of the same run.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import { postgresCheckpointer } from "../src/checkpoint-postgres.js"
import { sqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { fileCheckpointer, memoryCheckpointer, type PromiseCheckpointer, UserMessage } from "../src/index.js"
import { serveSessions } from "../src/server.js"
import { startPostgres } from "../test/support/postgres.js"
import { connectSse } from "../test/support/sse.js"

const TOKEN = "bench-token-0123456789"
const now = () => Number(process.hrtime.bigint()) / 1e6
const percentile = (values: Array<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}

type Backend = "memory" | "file" | "sqlite" | "postgres"

interface Stores {
  readonly served: PromiseCheckpointer
  readonly writer: PromiseCheckpointer
  readonly close: () => Promise<void>
}

const storesFor = (backend: Backend, postgresUrl: string, run: number): Stores => {
  const dir = mkdtempSync(join(tmpdir(), "bench-server-"))
  const open = (): PromiseCheckpointer => {
    switch (backend) {
      case "memory":
        throw new Error("unreachable")
      case "file":
        return fileCheckpointer({ dir })
      case "sqlite":
        return sqliteCheckpointer({ file: join(dir, "s.db") })
      case "postgres":
        return postgresCheckpointer({ url: postgresUrl, schema: `bench_server_${run}` })
    }
  }
  if (backend === "memory") {
    const memory = memoryCheckpointer()
    return { served: memory, writer: memory, close: () => memory.close() }
  }
  const served = open()
  const writer = open()
  return { served, writer, close: async () => {
    await served.close()
    await writer.close()
  } }
}

/** Clients following one session, recording when each event arrives. */
const follow = async (url: string, session: string, clients: number, onEvent: (client: number, seq: number, data: string) => void) => {
  const connections = await Promise.all(
    Array.from({ length: clients }, () => connectSse(`${url}/sessions/${session}/events`, { token: TOKEN, lastEventId: "1" }))
  )
  const reading = connections.map(async (connection, client) => {
    for await (const message of connection.messages) if (message.event === "event") onEvent(client, Number(message.id), message.data)
  })
  return {
    stop: async () => {
      for (const connection of connections) connection.abort()
      await Promise.allSettled(reading)
    }
  }
}

const measure = async (backend: Backend, postgresUrl: string, run: number) => {
  const stores = storesFor(backend, postgresUrl, run)
  const server = await serveSessions({ checkpointer: stores.served, token: TOKEN, sseBufferEvents: 100_000 })
  const rows: Record<string, number> = {}
  try {
    for (const clients of [1, 100]) {
      const session = `latency-${clients}`
      await stores.writer.append(session, [new UserMessage({ content: "start" })])
      const latencies: Array<number> = []
      const follower = await follow(server.url, session, clients, (_client, _seq, data) => {
        const sent = Number(/"content":"t([0-9.]+)"/.exec(data)?.[1])
        if (!Number.isNaN(sent)) latencies.push(now() - sent)
      })
      await sleep(300)
      const events = 200
      for (let i = 0; i < events; i++) {
        await stores.writer.append(session, [new UserMessage({ content: `t${now()}` })])
        await sleep(10)
      }
      const deadline = Date.now() + 20_000
      while (latencies.length < events * clients && Date.now() < deadline) await sleep(20)
      await follower.stop()
      rows[`p50 ${clients}`] = percentile(latencies, 50)
      rows[`p99 ${clients}`] = percentile(latencies, 99)
      rows[`delivered ${clients}`] = latencies.length / (events * clients)
    }
    // Throughput to 100 clients: 1,000 events appended in batches as fast as the store takes them.
    const session = "throughput"
    await stores.writer.append(session, [new UserMessage({ content: "start" })])
    const total = 1_000
    let delivered = 0
    const follower = await follow(server.url, session, 100, () => delivered++)
    await sleep(300)
    const started = now()
    for (let i = 0; i < total; i += 500) {
      await stores.writer.append(session, Array.from({ length: 500 }, (_, k) => new UserMessage({ content: `e${i + k}` })))
    }
    const deadline = Date.now() + 120_000
    while (delivered < total * 100 && Date.now() < deadline) await sleep(20)
    rows["events/s to 100"] = delivered / ((now() - started) / 1000)
    await follower.stop()
  } finally {
    await server.close()
    await stores.close()
  }
  return rows
}

export const runServerBench = async () => {
  const postgres = await startPostgres()
  try {
    const results: Array<[Backend, Record<string, number>]> = []
    let run = 0
    for (const backend of ["memory", "file", "sqlite", "postgres"] as const) results.push([backend, await measure(backend, postgres.url, ++run)])
    const baseline = results[0]![1]
    return results.map(([backend, rows]) => [
      backend,
      `${rows["p50 1"]!.toFixed(1)} / ${rows["p99 1"]!.toFixed(1)} ms`,
      `${rows["p50 100"]!.toFixed(1)} / ${rows["p99 100"]!.toFixed(1)} ms`,
      `${rows["events/s to 100"]!.toFixed(0)}/s`,
      `${(rows["events/s to 100"]! / baseline["events/s to 100"]!).toFixed(2)}×`,
      `${(Math.min(rows["delivered 1"]!, rows["delivered 100"]!) * 100).toFixed(0)}%`
    ])
  } finally {
    postgres.destroy()
  }
}
