/**
 * The concurrency scenarios both persistent backends must pass with real processes, written
 * once: four writer processes (test/workers/writer.ts) on one store, driven over IPC and
 * shared by the tests of a file — retrying appends with expected heads, batches without, and
 * rounds racing on one expected head. Each backend's test file adds its own crash and damage
 * scenarios.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest"
import type { WriterCommand, WriterReply } from "../workers/writer.js"
import { contentOf } from "./contents.js"
import { openStore, type StoreBackend } from "./stores.js"
import { isRunning, live, removeTempDirs, startWorker, type Worker } from "./processes.js"

export type WriterBackend = StoreBackend

export const WRITERS = [0, 1, 2, 3] as const

export { openStore }

/**
 * Everything in the session, and the store's integrity report, read by a checkpointer opened just
 * for this. A writer killed while its COMMIT was on the way may still have it land on a database
 * server a moment later: the head and the events are read until they agree twice in a row (a
 * store that keeps disagreeing is returned as it is, for the test to fail on).
 */
export const readFresh = async (backend: WriterBackend, location: string, session: string) => {
  const checkpointer = await openStore(backend, location)
  try {
    let head = await checkpointer.head(session)
    let events = await checkpointer.read(session)
    for (let attempt = 0; attempt < 20; attempt++) {
      const settled = events.length === head && (await checkpointer.head(session)) === head
      if (settled) break
      await new Promise((resolve) => setTimeout(resolve, 50))
      head = await checkpointer.head(session)
      events = await checkpointer.read(session)
    }
    const integrity = await checkpointer.checkIntegrity()
    return { head, events, contents: events.map(contentOf), integrity }
  } finally {
    await checkpointer.close()
  }
}

export const expectContiguous = (seqs: ReadonlyArray<number>, head: number, what = "the log") => {
  expect(seqs.length, what).toBe(head)
  seqs.forEach((seq, index) => {
    if (seq !== index + 1) throw new Error(`${what}: position ${index} holds seq ${seq}, expected ${index + 1}`)
  })
}

export const command = (worker: Worker, message: WriterCommand) => worker.child.send(message)

/** The next reply of a writer, which must be of type `type`. */
export const nextReply = async <T extends WriterReply["type"]>(
  worker: Worker,
  type: T
): Promise<Extract<WriterReply, { type: T }>> => {
  const message = (await worker.nextMessage()) as WriterReply
  if (message.type !== type) throw new Error(`expected a ${type} reply, got ${JSON.stringify(message).slice(0, 1000)}`)
  return message as Extract<WriterReply, { type: T }>
}

export interface WriterPool {
  readonly backend: WriterBackend
  /** The four writers on one fresh store, ready for commands; restarted if any of them died. */
  readonly get: () => Promise<{ readonly location: string; readonly writers: ReadonlyArray<Worker> }>
}

/**
 * The writer pool of one test file, with that file's process clean-up: after each test every
 * process it started is killed (the shared writers too when the test failed); after all, the
 * writers exit and the temporary directories go.
 */
export const writerPool = (
  backend: WriterBackend,
  makeStore: () => Promise<string>,
  options: {
    /** How to start each writer (default: plain Node), e.g. in a namespace of its own. */
    readonly launcher?: (writer: number) => ReadonlyArray<string>
  } = {}
): WriterPool => {
  let pool: { readonly location: string; readonly writers: ReadonlyArray<Worker> } | undefined
  const get = async () => {
    if (pool !== undefined && pool.writers.every((worker) => isRunning(worker.child) && worker.child.connected)) return pool
    for (const worker of pool?.writers ?? []) worker.child.kill("SIGKILL")
    pool = undefined
    const location = await makeStore()
    const writers = WRITERS.map((writer) =>
      startWorker("writer.ts", [backend, location, String(writer)], {
        ipc: true,
        ...(options.launcher === undefined ? {} : { launcher: options.launcher(writer) })
      })
    )
    for (const worker of writers) expect(await worker.nextMessage()).toMatchObject({ type: "ready" })
    pool = { location, writers }
    return pool
  }

  afterEach(({ task }) => {
    const failed = task.result?.state === "fail"
    for (const child of live) {
      if (failed || !(pool?.writers.some((worker) => worker.child === child) ?? false)) child.kill("SIGKILL")
    }
    if (failed) pool = undefined
  })

  afterAll(async () => {
    if (pool !== undefined) {
      for (const worker of pool.writers) if (worker.child.connected) command(worker, { type: "exit" })
      await Promise.all(pool.writers.map((worker) => worker.closed))
    }
    for (const child of live) child.kill("SIGKILL")
    removeTempDirs()
  })

  return { backend, get }
}

/**
 * Check a crash-test log: only whole batches (`<id>:<part>/<size>`, parts 0..size-1 back
 * to back, each id once), and every acknowledged head ends a batch. Returns the batch ids in order.
 */
export const checkWholeBatches = (contents: ReadonlyArray<string>, acknowledged: ReadonlyArray<number>) => {
  const batchEnds = new Set<number>()
  const ids: Array<string> = []
  let index = 0
  while (index < contents.length) {
    const match = /^([a-z0-9]+):0\/(\d+)$/.exec(contents[index]!)
    if (match === null) throw new Error(`seq ${index + 1} does not start a batch: ${contents[index]}`)
    const id = match[1]!
    const size = Number(match[2])
    if (ids.includes(id)) throw new Error(`batch ${id} appears twice (again at seq ${index + 1})`)
    ids.push(id)
    for (let part = 0; part < size; part++) {
      const content = contents[index + part]
      if (content !== `${id}:${part}/${size}`) {
        throw new Error(`partial batch ${id}: seq ${index + part + 1} holds ${content}, expected ${id}:${part}/${size}`)
      }
    }
    index += size
    batchEnds.add(index)
  }
  for (const ack of acknowledged) {
    if (!batchEnds.has(ack)) throw new Error(`acknowledged head ${ack} is not the end of a stored batch`)
  }
  return ids
}

/** "w2" for "w2:17": which writer wrote an event. */
export const writerOf = (content: string) => content.slice(0, content.indexOf(":"))
export const writerSwitches = (contents: ReadonlyArray<string>) =>
  contents.filter((content, index) => index > 0 && writerOf(content) !== writerOf(contents[index - 1]!)).length

const total = (results: ReadonlyArray<{ readonly busy: number }>) => results.reduce((sum, result) => sum + result.busy, 0)

/** The shared concurrency scenarios, registered for `pool`'s backend. */
export const writerScenarios = (
  pool: WriterPool,
  options: {
    readonly retryCount: number
    readonly timeoutMs: number
    /** Says how the writers were started, in the test names (e.g. ", 2 in network namespaces of their own"). */
    readonly setting?: string
  }
) => {
  const { backend } = pool
  const { retryCount: count, timeoutMs } = options
  const events = count * WRITERS.length
  const setting = options.setting ?? ""

  describe(`${backend} backend: concurrent writer processes${setting}`, () => {
    it(`4 processes × ${count} appends with expected head, retrying conflicts: ${events.toLocaleString("en")} events, each writer's exactly once, in order`, async () => {
      const { location, writers } = await pool.get()
      const session = "contended"
      // All four start together.
      for (const worker of writers) command(worker, { type: "retry", session, count, together: writers.length })
      const results = await Promise.all(writers.map((worker) => nextReply(worker, "retry-result")))

      const { contents, events: stored, head, integrity } = await readFresh(backend, location, session)
      expect(integrity.ok, integrity.detail).toBe(true)
      expect(head).toBe(events)
      expectContiguous(stored.map((e) => e.seq), events)
      expect(new Set(contents).size).toBe(events)

      for (const writer of WRITERS) {
        // The writer's events, in log order, are exactly w<writer>:0, w<writer>:1, …
        const mine = contents.filter((content) => content.startsWith(`w${writer}:`))
        expect(mine).toEqual(Array.from({ length: count }, (_, index) => `w${writer}:${index}`))
        // Every acknowledged append landed at the seq it returned, right after the head it expected.
        const result = results[writer]!
        expect(result.heads.length).toBe(count)
        result.heads.forEach((returned, index) => {
          expect(returned).toBe(result.expected[index]! + 1)
          expect(contents[returned - 1]).toBe(`w${writer}:${index}`)
        })
      }
      // No two acknowledged appends returned the same head.
      expect(new Set(results.flatMap((result) => result.heads)).size).toBe(events)

      // The writers really ran at the same time: their events interleave and they conflicted (the
      // worker makes sure of both: each one's first event comes before anyone's second, and all
      // but one of the second appends at the same head conflict).
      const switches = writerSwitches(contents)
      const conflicts = results.reduce((sum, result) => sum + result.conflicts, 0)
      console.log(`${backend}${setting} retry test: ${conflicts} conflicts and ${total(results)} busy errors retried, ${switches} writer switches`)
      expect(new Set(contents.slice(0, writers.length).map((content) => content.split(":")[0])).size).toBe(writers.length)
      expect(switches).toBeGreaterThanOrEqual(2 * writers.length - 2)
      expect(conflicts).toBeGreaterThanOrEqual(writers.length - 1)
    }, timeoutMs)

    it("4 processes × 50 appends of 3-event batches without expected head: 600 events, every batch contiguous", async () => {
      const { location, writers } = await pool.get()
      const session = "batches"
      const count = 50
      const size = 3
      for (const worker of writers) command(worker, { type: "batch", session, count, size })
      const results = await Promise.all(writers.map((worker) => nextReply(worker, "batch-result")))

      const { contents, events: stored, head, integrity } = await readFresh(backend, location, session)
      expect(integrity.ok, integrity.detail).toBe(true)
      expect(head).toBe(600)
      expectContiguous(stored.map((e) => e.seq), 600)
      expect(new Set(contents).size).toBe(600)

      // The log is a sequence of whole batches: the three parts of one batch back to back.
      for (let start = 0; start < contents.length; start += size) {
        const match = /^(w\d+:b\d+):0\/3$/.exec(contents[start]!)
        if (match === null) throw new Error(`seq ${start + 1} does not start a batch: ${contents[start]}`)
        expect(contents.slice(start, start + size)).toEqual([0, 1, 2].map((part) => `${match[1]}:${part}/3`))
      }
      for (const writer of WRITERS) {
        const firsts = contents.filter((content) => content.startsWith(`w${writer}:`) && content.endsWith(":0/3"))
        expect(firsts).toEqual(Array.from({ length: count }, (_, index) => `w${writer}:b${index}:0/3`))
        // Each append returned the seq of its batch's last event.
        const result = results[writer]!
        expect(result.heads.length).toBe(count)
        result.heads.forEach((returned, index) => expect(contents[returned - 1]).toBe(`w${writer}:b${index}:2/3`))
      }
      console.log(`${backend}${setting} batch test: ${writerSwitches(contents)} writer switches, ${total(results)} busy errors retried`)
    }, timeoutMs)
  })

  describe(`${backend} backend: processes racing on one expected head${setting}`, () => {
    it("20 rounds of 4 processes appending with the same expected head: exactly one winner each round", async () => {
      const { location, writers } = await pool.get()
      const session = "race"
      const rounds = 20
      const parent = await openStore(backend, location)
      try {
        for (let round = 0; round < rounds; round++) {
          const expectedHead = await parent.head(session)
          expect(expectedHead).toBe(round)
          // Send in a random order, so no writer is always first off the mark.
          const order = [...writers].sort(() => Math.random() - 0.5)
          for (const worker of order) command(worker, { type: "round", session, round, expectedHead })
          const results = await Promise.all(writers.map((worker) => nextReply(worker, "round-result")))

          const successes = results.filter((result) => result.ok)
          expect(successes.length, `round ${round}: ${JSON.stringify(results)}`).toBe(1)
          const winner = successes[0]!
          expect(winner).toEqual({ type: "round-result", round, writer: winner.writer, ok: true, head: expectedHead + 1 })
          for (const result of results.filter((r) => !r.ok)) {
            expect(result).toEqual({
              type: "round-result",
              round,
              writer: result.writer,
              ok: false,
              tag: "CheckpointConflictError",
              sessionId: session,
              expected: expectedHead,
              actual: expectedHead + 1
            })
          }
          // The stored event is the winner's, and nothing else was written.
          const stored = await parent.read(session, { sinceSeq: expectedHead })
          expect(stored.map((s) => [s.seq, contentOf(s)])).toEqual([[expectedHead + 1, `r${round}:w${winner.writer}`]])
        }
      } finally {
        await parent.close()
      }

      const { contents, events: stored, head } = await readFresh(backend, location, session)
      expect(head).toBe(rounds)
      expectContiguous(stored.map((e) => e.seq), rounds)
      contents.forEach((content, round) => expect(content).toMatch(new RegExp(`^r${round}:w[0-3]$`)))
      const wins = WRITERS.map((writer) => contents.filter((content) => content.endsWith(`:w${writer}`)).length)
      console.log(`${backend}${setting} expected-head rounds: wins per writer ${JSON.stringify(wins)}`)
    }, timeoutMs)
  })
}
