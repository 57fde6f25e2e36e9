/**
 * File backend benchmarks. Every figure is a ratio against a raw baseline measured in the
 * same run: plain `node:fs` doing the same work, for appends under a raw cross-process lock.
 */
import { createHash } from "node:crypto"
import { closeSync, fdatasyncSync, fstatSync, mkdtempSync, openSync, readFileSync, readSync, realpathSync, writeSync } from "node:fs"
import net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Stream } from "effect"
import { recordLine } from "../src/backends/file/format.js"
import { encodeStoredEvent, Session } from "../src/core.js"
import { eventFor, foldRate, median, ms, ratio } from "./shared.js"
import { fileCheckpointer } from "../src/index.js"

/**
 * The baseline's cross-process lock, kept as it was when the first figures were taken (so the
 * ratios stay comparable across versions): a Unix socket bound in Linux's abstract namespace to
 * take the lock and closed to release it, run as one Effect per append.
 */
const withRawSocketLock = (address: string, work: () => void) =>
  Effect.runPromise(Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const server = yield* Effect.async<net.Server, Error>((resume) => {
        const candidate = net.createServer()
        candidate.once("error", (error) => resume(Effect.fail(error)))
        candidate.listen({ path: address, exclusive: true }, () => resume(Effect.succeed(candidate)))
      })
      return yield* restore(Effect.sync(work)).pipe(
        Effect.ensuring(Effect.async<void>((resume) => void server.close(() => resume(Effect.void))))
      )
    })
  ))

/** The raw baseline: lock, read the tail to learn the head, append one line, optionally fdatasync. */
const rawAppends = async (dir: string, count: number, durable: boolean) => {
  const path = join(dir, "raw.log")
  closeSync(openSync(path, "a"))
  const address = `\0lite-agent-bench/${createHash("sha256").update(realpathSync(dir)).digest("hex").slice(0, 32)}`
  const tail = Buffer.alloc(4096)
  const start = process.hrtime.bigint()
  for (let i = 0; i < count; i++) {
    await withRawSocketLock(address, () => {
      const fd = openSync(path, "r+")
      const size = fstatSync(fd).size
      const read = readSync(fd, tail, 0, Math.min(size, tail.length), Math.max(0, size - tail.length))
      const head = read === 0 ? 0 : Number(tail.toString("utf8", 0, read).split("\n").at(-2)?.split("\t")[1] ?? 0)
      const line = recordLine(head + 1, head + 1, JSON.stringify(encodeStoredEvent({ seq: head + 1, ts: Date.now(), event: eventFor(i) })))
      writeSync(fd, line, size)
      if (durable) fdatasyncSync(fd)
      closeSync(fd)
    })
  }
  return count / (ms(start) / 1000)
}

const libraryAppends = async (dir: string, count: number, synchronous: "normal" | "full") => {
  const c = fileCheckpointer({ dir, synchronous })
  const start = process.hrtime.bigint()
  for (let i = 0; i < count; i++) await c.append("bench", [eventFor(i)])
  const rate = count / (ms(start) / 1000)
  await c.close()
  return rate
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
      `${median(raw).toFixed(0)}/s`,
      ratio(median(lib), median(raw))
    ])
  }

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
  return rows
}
