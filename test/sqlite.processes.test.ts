/**
 * The SQLite backend under real concurrency and real crashes: separate Node processes
 * (test/workers/writer.ts, sqlite-opener.ts, batch-crasher.ts) share one database file in a temp directory, append to and
 * truncate the same session, race on expected heads, get killed with SIGKILL mid-append;
 * then damaged and too-new database files are opened. Everything is checked from the
 * processes' own reports and from fresh `sqliteCheckpointer`s on the same file.
 *
 * Starting a Node process that loads Effect costs seconds on a small machine, so the writer
 * processes of the concurrency tests are shared (started once, driven over IPC) and the
 * crash test starts all of its processes up front, each waiting for its turn.
 */
import { createHash } from "node:crypto"
import { closeSync, existsSync, openSync, readFileSync, statSync, writeSync } from "node:fs"
import { join } from "node:path"
import { setTimeout as sleep } from "node:timers/promises"
import Database from "better-sqlite3"
import { describe, expect, it } from "vitest"
import { SqliteCheckpointer, sqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { CheckpointConflictError, CheckpointIntegrityError, SchemaVersionError, type StoredEvent, UserMessage } from "../src/index.js"
import { contentOf, isRunning, makeTempDir, startWorker } from "./support/processes.js"
import type { CrasherConfig } from "./workers/batch-crasher.js"
import type { AppendRecord, Interval, Snapshot, TruncateRecord } from "./workers/writer.js"
import {
  checkWholeBatches,
  command,
  expectContiguous,
  nextReply,
  readFresh as readStore,
  writerOf,
  writerPool,
  writerScenarios
} from "./support/writers.js"


// ---------------------------------------------------------------------------------------
// Temp files and child processes
// ---------------------------------------------------------------------------------------

/** A database file in a fresh temporary directory. */
const makeTempFile = (label: string) => join(makeTempDir(`sqlite-${label}`), "sessions.db")

const readFresh = (file: string, session: string) => readStore("sqlite", file, session)

/** The thrown value of a promise that must reject. */
const rejection = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    (value) => new Error(`expected a rejection, got ${JSON.stringify(value)}`),
    (error: unknown) => error
  )

// ---------------------------------------------------------------------------------------
// 1-2. Many writers, and racing on one expected head (shared with the file backend)
// ---------------------------------------------------------------------------------------

const pool = writerPool("sqlite", async () => {
  const file = makeTempFile("writers")
  // Create the database (schema, WAL mode) first: these tests are about processes sharing a
  // database, not about several processes creating one at the same moment.
  const creator = sqliteCheckpointer({ file })
  await creator.list()
  await creator.close()
  return file
})
writerScenarios(pool, { retryCount: 500, timeoutMs: 180_000 })

// ---------------------------------------------------------------------------------------
// 3. Truncating while others append and read
// ---------------------------------------------------------------------------------------

/**
 * Check the snapshots (whole-session reads) taken by several processes while others
 * appended and truncated, against what the writers reported. Every operation carries the
 * interval of the shared monotonic clock inside which it took effect, so each rule below
 * only claims what the intervals prove — it can fail only on a real inconsistency:
 *
 * 1. A snapshot is seqs 1..n, each event an acknowledged append, at the seq that append
 *    returned (an event never moves), no writer's events out of its own order.
 * 2. A snapshot is a state that existed: it never holds both an event that a truncate cut
 *    (appended before the truncate began, above its `toSeq`) and an event appended after
 *    that truncate ended above the same `toSeq`.
 * 3. Nothing is lost: an append acknowledged before a snapshot began is in it, at its seq,
 *    unless a truncate below that seq may have committed between the two.
 * 4. For two snapshots, one ending before the other began, a seq of the first whose content
 *    differs in (or is missing from) the second was cut by a truncate below that seq that
 *    may have committed between them.
 */
const checkSnapshots = (
  snapshots: ReadonlyArray<Snapshot>,
  appends: ReadonlyMap<string, AppendRecord>,
  truncates: ReadonlyArray<TruncateRecord>
) => {
  const describeSnapshot = (s: Snapshot) => `snapshot by ${s.reader} [${s.start}, ${s.end}] of ${s.contents.length} events`

  // 1. Shape.
  for (const snapshot of snapshots) {
    expectContiguous(snapshot.seqs, snapshot.contents.length, describeSnapshot(snapshot))
    const lastIndexOfWriter = new Map<string, number>()
    snapshot.contents.forEach((content, index) => {
      const append = appends.get(content)
      if (append === undefined) throw new Error(`${describeSnapshot(snapshot)}: ${content} was never acknowledged`)
      if (append.seq !== index + 1) {
        throw new Error(`${describeSnapshot(snapshot)}: ${content} at seq ${index + 1}, but its append returned ${append.seq}`)
      }
      const writer = writerOf(content)
      const writerIndex = Number(content.slice(content.indexOf(":") + 1))
      if ((lastIndexOfWriter.get(writer) ?? -1) >= writerIndex) {
        throw new Error(`${describeSnapshot(snapshot)}: ${content} at seq ${index + 1} is out of its writer's order`)
      }
      lastIndexOfWriter.set(writer, writerIndex)
    })
  }

  // 2. Never a mix of the log before and after a truncate.
  for (const snapshot of snapshots) {
    for (const truncate of truncates) {
      const above = snapshot.contents.slice(truncate.toSeq).map((content) => appends.get(content)!)
      const cut = above.find((append) => append.end < truncate.start)
      const later = above.find((append) => append.start > truncate.end)
      if (cut !== undefined && later !== undefined) {
        throw new Error(
          `${describeSnapshot(snapshot)} mixes ${cut.content} (seq ${cut.seq}, cut by the truncate to ${truncate.toSeq} ` +
            `at [${truncate.start}, ${truncate.end}]) with ${later.content} (seq ${later.seq}, appended after it)`
        )
      }
    }
  }

  // 3. Nothing acknowledged is lost. The earliest start of a truncate that may have cut each append.
  const firstPossibleCut = new Map<string, number>()
  for (const append of appends.values()) {
    let first = Number.POSITIVE_INFINITY
    for (const truncate of truncates) {
      if (truncate.toSeq < append.seq && truncate.end >= append.start) first = Math.min(first, truncate.start)
    }
    firstPossibleCut.set(append.content, first)
  }
  let provenPresent = 0
  for (const snapshot of snapshots) {
    for (const append of appends.values()) {
      if (append.end >= snapshot.start || firstPossibleCut.get(append.content)! <= snapshot.end) continue
      provenPresent++
      if (snapshot.contents[append.seq - 1] !== append.content) {
        throw new Error(
          `${describeSnapshot(snapshot)} lost ${append.content}: acknowledged at seq ${append.seq} ` +
            `([${append.start}, ${append.end}]) and no truncate below it since, but the snapshot holds ` +
            `${snapshot.contents[append.seq - 1] ?? "nothing"} there`
        )
      }
    }
  }

  // 4. Content changes only across a truncate.
  const byStart = [...snapshots].sort((a, b) => a.start - b.start)
  let orderedPairs = 0
  let changedPairs = 0
  for (let i = 0; i < byStart.length; i++) {
    const first = byStart[i]!
    for (let j = i + 1; j < byStart.length; j++) {
      const second = byStart[j]!
      if (!(first.end < second.start)) continue
      orderedPairs++
      // The lowest seq of `first` that `second` does not hold with the same content.
      let differing = 0
      while (differing < first.contents.length && first.contents[differing] === second.contents[differing]) differing++
      if (differing === first.contents.length) continue
      changedPairs++
      const seq = differing + 1
      const cutBetween = truncates.some((t) => t.toSeq < seq && t.end >= first.start && t.start <= second.end)
      if (!cutBetween) {
        throw new Error(
          `seq ${seq} holds ${first.contents[differing]} in the ${describeSnapshot(first)} but ` +
            `${second.contents[differing] ?? "nothing"} in the later ${describeSnapshot(second)}, ` +
            `with no truncate below seq ${seq} in between`
        )
      }
    }
  }
  return { orderedPairs, changedPairs, provenPresent }
}

describe("sqlite backend: a process truncating while others append and read", () => {
  it("3 appenders, 1 truncator, readers in 5 processes: every snapshot a real contiguous state, content changes only across a truncate", async () => {
    const { location: file, writers } = await pool.get()
    const session = "churn"
    const appenders = writers.slice(0, 3)
    const truncatorWorker = writers[3]!
    const count = 400
    const truncateCount = 30
    const seed = 700

    const parent = sqliteCheckpointer({ file })
    const parentSnapshots: Array<Snapshot> = []
    const parentReadConflicts: Array<Interval> = []
    try {
      // The log starts past the read page size, so the truncates keep it around that boundary.
      const seedStart = Number(process.hrtime.bigint() / 1000n)
      expect(await parent.append(session, Array.from({ length: seed }, (_, i) => new UserMessage({ content: `seed:${i}` })), 0))
        .toBe(seed)
      const seedEnd = Number(process.hrtime.bigint() / 1000n)
      for (const worker of appenders) command(worker, { type: "churn", session, prefix: "a", count, snapshotEvery: 8 })
      command(truncatorWorker, {
        type: "truncator",
        session,
        count: truncateCount,
        deepChance: 0.05,
        // The SQLite backend reads in pages of 512 rows: a reader paging through a log that is
        // cut below 512 and grows past it again must not return a mix of the two.
        boundaryChance: 0.5,
        boundary: 512,
        shallowMax: 30,
        pauseMs: 100
      })
      let done = false
      const replies = Promise.all([
        Promise.all(appenders.map((worker) => nextReply(worker, "churn-result"))),
        nextReply(truncatorWorker, "truncator-result")
      ]).finally(() => {
        done = true
      })
      replies.catch(() => {}) // awaited below
      // The parent is a reader too, as long as the workers run: alternately a plain read and
      // a slow one that pauses every 128 events, so the log changes while it pages through.
      const slowRead = async () => {
        const events: Array<StoredEvent> = []
        for await (const stored of parent.readIterable(session)) {
          events.push(stored)
          if (events.length % 128 === 0) await sleep(8)
        }
        return events
      }
      while (!done) {
        const start = Number(process.hrtime.bigint() / 1000n)
        try {
          const events = parentSnapshots.length % 2 === 0 ? await parent.read(session) : await slowRead()
          const end = Number(process.hrtime.bigint() / 1000n)
          parentSnapshots.push({ reader: "parent", start, end, seqs: events.map((e) => e.seq), contents: events.map(contentOf) })
        } catch (error) {
          if (!(error instanceof CheckpointConflictError)) throw error
          parentReadConflicts.push({ start, end: Number(process.hrtime.bigint() / 1000n) })
        }
        await sleep(10)
      }
      const [churned, truncated] = await replies

      // Every append and truncate was acknowledged, each content once.
      const appends = new Map<string, AppendRecord>()
      for (let i = 0; i < seed; i++) appends.set(`seed:${i}`, { content: `seed:${i}`, seq: i + 1, start: seedStart, end: seedEnd })
      for (const result of churned) {
        expect(result.appends.map((a) => a.content)).toEqual(
          Array.from({ length: count }, (_, index) => `a${result.writer}:${index}`)
        )
        for (const append of result.appends) appends.set(append.content, append)
      }
      expect(appends.size).toBe(seed + 3 * count)
      const { truncates } = truncated
      expect(truncates.length).toBe(truncateCount)
      for (const truncate of truncates) expect(truncate.toSeq).toBeLessThan(truncate.expectedHead)

      // The final log, read afresh after everything, is a snapshot like the others.
      const finalStart = Number(process.hrtime.bigint() / 1000n)
      const final = await readFresh(file, session)
      const finalSnapshot: Snapshot = {
        reader: "final",
        start: finalStart,
        end: Number(process.hrtime.bigint() / 1000n),
        seqs: final.events.map((e) => e.seq),
        contents: final.contents
      }
      expect(final.head).toBe(final.events.length)
      // Every truncate cut at least one acknowledged event, and a cut event never comes back.
      expect(final.head).toBeLessThanOrEqual(seed + 3 * count - truncateCount)

      const snapshots = [
        ...churned.flatMap((result) => result.snapshots),
        ...truncated.snapshots,
        ...parentSnapshots,
        finalSnapshot
      ]
      const { changedPairs, orderedPairs, provenPresent } = checkSnapshots(snapshots, appends, truncates)

      // A read that failed with a conflict overlapped a truncate (only truncates change the log's generation).
      const readConflicts = [
        ...churned.flatMap((result) => result.readConflicts),
        ...truncated.readConflicts,
        ...parentReadConflicts
      ]
      for (const conflict of readConflicts) {
        expect(
          truncates.some((t) => t.end >= conflict.start && t.start <= conflict.end),
          `read conflict at [${conflict.start}, ${conflict.end}] with no truncate at that time`
        ).toBe(true)
      }

      // The run really interleaved: truncates fell between appends, and snapshots saw history change.
      const firstAppend = Math.min(...[...appends.values()].map((a) => a.start))
      const lastAppend = Math.max(...[...appends.values()].map((a) => a.end))
      const during = truncates.filter((t) => t.start > firstAppend && t.end < lastAppend).length
      const longest = Math.max(...snapshots.map((s) => s.contents.length))
      const conflicts = churned.reduce((sum, r) => sum + r.conflicts, 0)
      const busy = churned.reduce((sum, r) => sum + r.busy, 0) + truncated.busy
      console.log(
        `sqlite truncate churn: ${snapshots.length} snapshots (${parentSnapshots.length} by the parent, longest ` +
          `${longest} events, ${snapshots.filter((s) => s.contents.length > 512).length} longer than one read page), ` +
          `${orderedPairs} ordered pairs of which ${changedPairs} changed, ${provenPresent} appends proven present, ` +
          `${readConflicts.length} reads retried after a concurrent truncate; ${during}/${truncates.length} truncates ` +
          `while appending (${truncated.conflicts} conflicts), append conflicts ${conflicts}, busy ${busy}; ` +
          `final head ${final.head}`
      )
      expect(during).toBeGreaterThan(0)
      expect(changedPairs).toBeGreaterThan(0)
      expect(provenPresent).toBeGreaterThan(0)
    } finally {
      await parent.close()
    }
  }, 180_000)
})

// ---------------------------------------------------------------------------------------
// 4. SIGKILL during appends
// ---------------------------------------------------------------------------------------

describe("sqlite backend: writer processes killed with SIGKILL", () => {
  it("5 SIGKILLs at random moments of batch appends: opens cleanly, intact, every acknowledged append there, no partial batch, appending continues", async () => {
    const file = makeTempFile("crash")
    const session = "crashy"
    const cycles = 5
    // One cycle commits with synchronous = FULL (an fsync per commit, a longer commit window).
    const synchronousOf = (cycle: number) => (cycle === 2 ? "full" : "normal")
    const creator = sqliteCheckpointer({ file }) // the database exists before the crashers open it
    await creator.list()
    await creator.close()
    // Start every process up front; each waits for its turn.
    const crashers = Array.from({ length: cycles }, (_, cycle) => {
      const config: CrasherConfig = {
        backend: "sqlite",
        location: file,
        session,
        cycle,
        synchronous: synchronousOf(cycle),
        maxBatches: 100_000
      }
      return startWorker("batch-crasher.ts", [JSON.stringify(config)])
    })
    const acknowledged: Array<number> = []
    const expectedIds: Array<string> = []
    let inFlightCommitted = 0
    let appendsInFlight = 0

    for (let cycle = 0; cycle < cycles; cycle++) {
      const worker = crashers[cycle]!
      await worker.waitForLine((line) => line === "ready")
      worker.child.stdin!.end("go\n")
      const startHead = Number((await worker.waitForLine((line) => line.startsWith("start "))).slice("start ".length))
      // Let it append for a while, then kill it wherever it is.
      await worker.waitForLine((line) => line.startsWith("ack "))
      const delayMs = 20 + Math.floor(Math.random() * 400)
      await Promise.race([sleep(delayMs), worker.closed])
      expect(isRunning(worker.child), `crasher ${cycle} ended by itself; stderr:\n${worker.stderr()}`).toBe(true)
      worker.child.kill("SIGKILL")
      const { signal } = await worker.closed
      expect(signal).toBe("SIGKILL")
      expect(worker.stderr()).toBe("")
      const acks = worker.lines.filter((line) => line.startsWith("ack ")).map((line) => Number(line.slice(4)))
      expect(acks.length).toBeGreaterThan(0)
      acknowledged.push(...acks)
      const lastAck = acks.at(-1)!
      // Was an append in flight (started, not acknowledged) when the kill came? Then its batch
      // is either wholly stored or not at all; otherwise the head is exactly the last ack.
      const lastLine = worker.lines.at(-1) ?? ""
      const inFlight = /^append (\d+) (\d+)$/.exec(lastLine)
      if (inFlight === null) expect(lastLine).toBe(`ack ${lastAck}`)
      else expect(Number(inFlight[1])).toBe(lastAck)
      const possibleHeads = inFlight === null ? [lastAck] : [lastAck, lastAck + Number(inFlight[2])]
      if (inFlight !== null) appendsInFlight++

      // A raw connection finds the database sound…
      const raw = new Database(file)
      try {
        expect(raw.pragma("integrity_check")).toEqual([{ integrity_check: "ok" }])
      } finally {
        raw.close()
      }
      // …and so does a fresh checkpointer, which sees every acknowledged append and only whole batches.
      const checkpointer = sqliteCheckpointer({ file })
      try {
        expect(await checkpointer.checkIntegrity()).toEqual({ ok: true, detail: "quick_check: ok" })
        const head = await checkpointer.head(session)
        const events = await checkpointer.read(session)
        expect(possibleHeads).toContain(head)
        if (head > lastAck) inFlightCommitted++
        expectContiguous(events.map((e) => e.seq), head)
        const ids = checkWholeBatches(events.map(contentOf), acknowledged)
        // The batches are exactly the earlier ones, then this cycle's from b0 on, none skipped.
        const mine = ids.slice(expectedIds.length)
        expect(ids.slice(0, expectedIds.length)).toEqual(expectedIds)
        expect(mine).toEqual(Array.from({ length: mine.length }, (_, batch) => `c${cycle}b${batch}`))
        expect(mine.length - acks.length).toBeGreaterThanOrEqual(0)
        expect(mine.length - acks.length).toBeLessThanOrEqual(1)
        console.log(
          `sqlite crash cycle ${cycle} (${synchronousOf(cycle)}, SIGKILL ~${delayMs} ms after its first ack): ` +
            `started at ${startHead}, ${acks.length} appends acknowledged, last ack ${lastAck}, head ${head}` +
            (inFlight === null
              ? ", no append in flight"
              : `, killed during an append of ${inFlight[2]} that ${head > lastAck ? "had" : "had not"} committed`)
        )

        // Appending continues normally on top of whatever the crash left.
        const probe = Array.from({ length: 3 }, (_, part) => new UserMessage({ content: `p${cycle}:${part}/3` }))
        const next = await checkpointer.append(session, probe, head)
        expect(next).toBe(head + 3)
        acknowledged.push(next)
        expectedIds.push(...mine, `p${cycle}`)
        const after = await checkpointer.read(session, { sinceSeq: head })
        expect(after.map((s) => [s.seq, contentOf(s)])).toEqual(probe.map((_, part) => [head + 1 + part, `p${cycle}:${part}/3`]))
      } finally {
        await checkpointer.close()
      }
    }

    const { contents, events, head } = await readFresh(file, session)
    expectContiguous(events.map((e) => e.seq), head)
    expect(checkWholeBatches(contents, acknowledged)).toEqual(expectedIds)
    console.log(
      `sqlite crash test: ${cycles} SIGKILLs, ${expectedIds.length} batches in ${head} events; ` +
        `${appendsInFlight} kills hit an append in flight, ${inFlightCommitted} of them after its commit`
    )
  }, 180_000)
})

// ---------------------------------------------------------------------------------------
// 5. Damaged and too-new database files
// ---------------------------------------------------------------------------------------

const PAGE_SIZE = 4096
const EVENTS_PER_SESSION = 150

const sessionEvents = (session: string) =>
  Array.from(
    { length: EVENTS_PER_SESSION },
    (_, index) => new UserMessage({ content: `${session} event ${index} ${"x".repeat(100)}` })
  )

/** A database with six sessions, closed: its WAL checkpointed into the main file. */
const buildDatabase = async (label: string) => {
  const file = makeTempFile(label)
  const checkpointer = sqliteCheckpointer({ file })
  const sessions = ["s0", "s1", "s2", "s3", "s4", "s5"]
  for (const session of sessions) await checkpointer.append(session, sessionEvents(session))
  await checkpointer.close()
  // Closing the last connection checkpoints the WAL and removes it: the main file holds everything.
  const wal = `${file}-wal`
  expect(existsSync(wal) ? statSync(wal).size : 0).toBe(0)
  const header = readFileSync(file).subarray(0, 100)
  expect(header.subarray(0, 16).toString("latin1")).toBe("SQLite format 3\0")
  expect(header.readUInt16BE(16)).toBe(PAGE_SIZE)
  expect(statSync(file).size % PAGE_SIZE).toBe(0)
  return { file, sessions }
}

/** Deterministic garbage (so a run is reproducible): SHA-256 in counter mode. */
const garbage = (seed: string, length: number) => {
  const blocks: Array<Buffer> = []
  for (let counter = 0; blocks.length * 32 < length; counter++) {
    blocks.push(createHash("sha256").update(`${seed}:${counter}`).digest())
  }
  return Buffer.concat(blocks).subarray(0, length)
}

/** Overwrite pages `first..last` (1-based, as SQLite numbers them) with garbage. */
const overwritePages = (file: string, first: number, last: number) => {
  const fd = openSync(file, "r+")
  try {
    for (let page = first; page <= last; page++) {
      writeSync(fd, garbage(`lite-agent page ${page}`, PAGE_SIZE), 0, PAGE_SIZE, (page - 1) * PAGE_SIZE)
    }
  } finally {
    closeSync(fd)
  }
}

describe("sqlite backend: damaged database files", () => {
  it("pages 2..4 (the schema's tables) overwritten: checkIntegrity reports ok: false, every other call is CheckpointIntegrityError; the file is not touched", async () => {
    const { file, sessions } = await buildDatabase("corrupt-schema")
    const raw = new Database(file, { readonly: true })
    const roots = raw.prepare("SELECT name, rootpage FROM sqlite_master ORDER BY rootpage").all()
    raw.close()
    // What the damaged pages hold: the roots of the migrations and sessions tables and the sessions index.
    expect(roots).toEqual([
      { name: "lite_agent_migrations", rootpage: 2 },
      { name: "lite_agent_sessions", rootpage: 3 },
      { name: "sqlite_autoindex_lite_agent_sessions_1", rootpage: 4 },
      { name: "lite_agent_events", rootpage: 5 },
      // Page 6 held version 2's blobs table, which version 3's migration drops (a free page now).
      { name: "lite_agent_objects", rootpage: 7 },
      { name: "sqlite_autoindex_lite_agent_objects_1", rootpage: 8 }
    ])
    overwritePages(file, 2, 4)
    const damaged = readFileSync(file)

    // Opening reads only the header's schema version (the database is current, so nothing is
    // migrated): the checkpointer is built, its integrity check reports the damage, and every
    // call that reads the damaged tables is refused.
    const checkpointer = sqliteCheckpointer({ file })
    try {
      const report = await checkpointer.checkIntegrity()
      expect(report.ok).toBe(false)
      expect(report.detail).toMatch(/malformed/)
      const calls: Array<[string, () => Promise<unknown>]> = [
        ["head", () => checkpointer.head(sessions[0]!)],
        ["read", () => checkpointer.read(sessions[1]!)],
        ["list", () => checkpointer.list()],
        ["append", () => checkpointer.append(sessions[2]!, [new UserMessage({ content: "after the damage" })])],
        ["truncate", () => checkpointer.truncate(sessions[3]!, 0)]
      ]
      for (const [name, call] of calls) {
        const error = await rejection(call())
        expect(error, name).toBeInstanceOf(CheckpointIntegrityError)
        expect((error as CheckpointIntegrityError).detail, name).toMatch(/malformed/)
      }
    } finally {
      await checkpointer.close()
    }

    // Checking on open refuses it at once, naming the check.
    const checked = sqliteCheckpointer({ file, integrityCheckOnOpen: true })
    try {
      const error = await rejection(checked.head(sessions[0]!))
      expect(error).toBeInstanceOf(CheckpointIntegrityError)
      expect((error as CheckpointIntegrityError).detail).toContain("failed PRAGMA quick_check")
    } finally {
      await checked.close()
    }
    expect(readFileSync(file).equals(damaged)).toBe(true)
  }, 180_000)

  it("three leaf pages of the events table overwritten: checkIntegrity reports ok: false, reads of the damaged session fail with CheckpointIntegrityError, the rest read back exactly", async () => {
    const { file, sessions } = await buildDatabase("corrupt-events")
    const raw = new Database(file, { readonly: true })
    const leaves = raw
      .prepare("SELECT pageno FROM dbstat WHERE name = 'lite_agent_events' AND pagetype = 'leaf' ORDER BY pageno")
      .pluck()
      .all() as Array<number>
    const pageCount = Number(raw.pragma("page_count", { simple: true }))
    raw.close()
    expect(leaves.length).toBeGreaterThan(10)
    // Three leaf pages in the middle of the file, neither its first pages nor its last.
    const middle = Math.floor(leaves.length / 2)
    const first = leaves[middle - 1]!
    expect(leaves.slice(middle - 1, middle + 2)).toEqual([first, first + 1, first + 2])
    expect(first).toBeGreaterThan(5)
    expect(first + 2).toBeLessThan(pageCount)
    overwritePages(file, first, first + 2)
    const damaged = readFileSync(file)

    const checkpointer = sqliteCheckpointer({ file })
    try {
      const report = await checkpointer.checkIntegrity()
      expect(report.ok).toBe(false)
      expect(report.detail).not.toBe("quick_check: ok")
      expect(report.detail.length).toBeGreaterThan(0)
      // The sessions table is intact.
      expect((await checkpointer.list()).map((s) => s.id).sort()).toEqual(sessions)
      for (const session of sessions) expect(await checkpointer.head(session)).toBe(EVENTS_PER_SESSION)
      // A read either fails with CheckpointIntegrityError or returns the session exactly; never anything else.
      const failed: Array<string> = []
      for (const session of sessions) {
        const outcome = await checkpointer.read(session).then(
          (events) => ({ events }),
          (error: unknown) => ({ error })
        )
        if ("error" in outcome) {
          expect(outcome.error, session).toBeInstanceOf(CheckpointIntegrityError)
          expect((outcome.error as CheckpointIntegrityError).detail, session).toMatch(/malformed/)
          failed.push(session)
        } else {
          expectContiguous(outcome.events.map((e) => e.seq), EVENTS_PER_SESSION, session)
          expect(outcome.events.map(contentOf), session).toEqual(sessionEvents(session).map((e) => e.content))
        }
      }
      console.log(`sqlite corruption: pages ${first}..${first + 2} of ${pageCount} overwritten; reads failed for ${failed}`)
      expect(failed.length).toBeGreaterThanOrEqual(1)
      expect(failed.length).toBeLessThan(sessions.length)
    } finally {
      await checkpointer.close()
    }

    const checked = sqliteCheckpointer({ file, integrityCheckOnOpen: true })
    try {
      const error = await rejection(checked.list())
      expect(error).toBeInstanceOf(CheckpointIntegrityError)
      expect((error as CheckpointIntegrityError).detail).toContain("failed PRAGMA quick_check")
    } finally {
      await checked.close()
    }
    expect(readFileSync(file).equals(damaged)).toBe(true)
  }, 180_000)
})

describe("sqlite backend: a database from a newer schema version", () => {
  it("a user_version past the supported one is refused with SchemaVersionError by every call, and the file's bytes are unchanged", async () => {
    const { file, sessions } = await buildDatabase("newer")
    const raw = new Database(file)
    expect(raw.pragma("user_version", { simple: true })).toBe(SqliteCheckpointer.SCHEMA_VERSION)
    raw.pragma(`user_version = ${SqliteCheckpointer.SCHEMA_VERSION + 1}`)
    raw.close()
    expect(existsSync(`${file}-wal`) ? statSync(`${file}-wal`).size : 0).toBe(0)
    const before = readFileSync(file)

    for (const integrityCheckOnOpen of [false, true]) {
      const checkpointer = sqliteCheckpointer({ file, integrityCheckOnOpen })
      try {
        const calls: Array<[string, () => Promise<unknown>]> = [
          ["append", () => checkpointer.append(sessions[0]!, [new UserMessage({ content: "from an older version" })])],
          ["truncate", () => checkpointer.truncate(sessions[1]!, 0)],
          ["delete", () => checkpointer.delete(sessions[2]!)],
          ["head", () => checkpointer.head(sessions[0]!)],
          ["read", () => checkpointer.read(sessions[0]!)],
          ["list", () => checkpointer.list()],
          ["checkIntegrity", () => checkpointer.checkIntegrity()]
        ]
        for (const [name, call] of calls) {
          const error = await rejection(call())
          expect(error, name).toBeInstanceOf(SchemaVersionError)
          expect(error, name).toMatchObject({ _tag: "SchemaVersionError", found: SqliteCheckpointer.SCHEMA_VERSION + 1, supported: SqliteCheckpointer.SCHEMA_VERSION })
        }
      } finally {
        await checkpointer.close()
      }
      expect(readFileSync(file).equals(before), `integrityCheckOnOpen: ${integrityCheckOnOpen}`).toBe(true)
    }
    // Still the same data, readable by a tool that knows the newer version.
    const after = new Database(file, { readonly: true })
    try {
      expect(after.pragma("user_version", { simple: true })).toBe(SqliteCheckpointer.SCHEMA_VERSION + 1)
      expect(after.prepare("SELECT count(*) FROM lite_agent_events").pluck().get()).toBe(sessions.length * EVENTS_PER_SESSION)
    } finally {
      after.close()
    }
  }, 180_000)
})
