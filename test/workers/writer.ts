/**
 * Worker for test/file.processes.test.ts and test/sqlite.processes.test.ts: a long-lived
 * process with one checkpointer on a shared store — a session directory (`file`) or a database
 * file (`sqlite`) — driven over IPC, so one set of processes can serve several tests (starting
 * Node with Effect loaded costs seconds on a small machine).
 *
 *   node --import tsx test/workers/writer.ts <file|sqlite> <directory or database file> <writer>
 *
 * Sends `{ type: "ready", writer }` once its checkpointer is open, then answers the
 * commands of `WriterCommand` (one at a time), each with one reply:
 *
 * - `retry`: `count` single-event appends, each `head()` then `append(id, [event], head)`;
 *   re-reads the head and retries on `CheckpointConflictError` (checking the error's fields
 *   against the head it read) and on `CheckpointBusyError`. Contents "w<writer>:<index>". The
 *   second append waits until the `together` writers have all made their first, and is tried
 *   first at that head: all but one conflict.
 * - `batch`: `count` appends of `size`-event batches without an expected head
 *   ("w<writer>:b<index>:<part>/<size>"), retrying on `CheckpointBusyError`.
 * - `round`: one append of "r<round>:w<writer>" with the given expected head; replies with
 *   the head or the error's tag and fields.
 * - `churn`: like `retry` with contents "<prefix><writer>:<index>", recording for every
 *   append the seq it returned and the (monotonic clock) interval of the attempt that
 *   succeeded, and taking a snapshot of the whole session every `snapshotEvery` appends —
 *   alternately a plain `read` and a slow `readIterable` that pauses every 128 events, so
 *   the log changes while it pages through.
 * - `truncator`: `count` truncates, each `head()` then `truncate(id, toSeq, head)` to a random
 *   smaller seq — a few events back, anywhere, or just below a read page boundary, never
 *   below the number of truncates still to come, so it never runs out of events to cut
 *   (the session must hold `count` events to start with) — retrying with a fresh head on
 *   `CheckpointConflictError`. Records each successful truncate's `toSeq` and interval and
 *   takes a snapshot after each; pauses up to `pauseMs` between them.
 * - `slow-append` (file only): one append of `content` with the expected head it reads first,
 *   through a second checkpointer whose codec, while the session lock is held, replies
 *   `{ type: "holding" }` and then pauses `pauseMs` before encoding — so the parent can stop
 *   the process while it holds the lock. Replies with the head, or the error's tag.
 * - `exit`: closes the checkpointer and exits.
 *
 * `LITE_AGENT_TEST_LOCK_LEASE_MS` in the environment sets the file backend's `lockLeaseMs`.
 *
 * Times are microseconds of `process.hrtime` (CLOCK_MONOTONIC: one clock for every process
 * of the machine), so the parent can order operations of different processes: an operation
 * took effect somewhere inside its `[start, end]`.
 *
 * A snapshot is retried when its read fails with `CheckpointConflictError` (the log was
 * truncated while the read paged through it); each such failure is reported with its
 * interval. Any other error ends the process with the error on stderr.
 */
import { setTimeout as sleep } from "node:timers/promises"
import { Effect } from "effect"
import {
  CheckpointBusyError,
  CheckpointConflictError,
  fileCheckpointer,
  jsonCodec,
  type LogCodecService,
  type StoredEvent,
  UserMessage
} from "../../src/index.js"
import { contentOf } from "../support/contents.js"
import { isStoreBackend, openStore } from "../support/stores.js"

const [backend, location, writerArg] = process.argv.slice(2)
if (!isStoreBackend(backend) || location === undefined || writerArg === undefined) {
  throw new Error("usage: writer.ts <file|sqlite|postgres> <directory, database file or url#schema> <writer>")
}
const writer = Number(writerArg)

export type WriterCommand =
  | { readonly type: "retry"; readonly session: string; readonly count: number; readonly together?: number }
  | { readonly type: "batch"; readonly session: string; readonly count: number; readonly size: number }
  | { readonly type: "round"; readonly session: string; readonly round: number; readonly expectedHead: number }
  | {
    readonly type: "churn"
    readonly session: string
    readonly prefix: string
    readonly count: number
    readonly snapshotEvery: number
  }
  | {
    readonly type: "truncator"
    readonly session: string
    readonly count: number
    /** Chance that a truncate cuts to a uniformly random seq below the head. */
    readonly deepChance: number
    /**
     * Chance that a truncate, when the head is past `boundary`, cuts to 1-10 events below
     * `boundary` (a read page boundary: where a paging reader could mix old and new logs).
     */
    readonly boundaryChance: number
    readonly boundary: number
    /** Otherwise it cuts 1 to `shallowMax` events. */
    readonly shallowMax: number
    readonly pauseMs: number
  }
  | { readonly type: "slow-append"; readonly session: string; readonly content: string; readonly pauseMs: number }
  | { readonly type: "exit" }

/** A closed interval of `process.hrtime` microseconds. */
export interface Interval {
  readonly start: number
  readonly end: number
}

export interface Snapshot extends Interval {
  readonly reader: string
  readonly seqs: ReadonlyArray<number>
  readonly contents: ReadonlyArray<string>
}

export interface AppendRecord extends Interval {
  readonly content: string
  readonly seq: number
}

export interface TruncateRecord extends Interval {
  readonly toSeq: number
  readonly expectedHead: number
}

export type WriterReply =
  | { readonly type: "ready"; readonly writer: number }
  | { readonly type: "holding" }
  | { readonly type: "slow-result"; readonly ok: true; readonly head: number; readonly expected: number }
  | { readonly type: "slow-result"; readonly ok: false; readonly tag: string; readonly detail: string }
  | {
    readonly type: "retry-result"
    readonly heads: ReadonlyArray<number>
    readonly expected: ReadonlyArray<number>
    readonly conflicts: number
    readonly busy: number
  }
  | { readonly type: "batch-result"; readonly heads: ReadonlyArray<number>; readonly busy: number }
  | { readonly type: "round-result"; readonly round: number; readonly writer: number; readonly ok: true; readonly head: number }
  | {
    readonly type: "round-result"
    readonly round: number
    readonly writer: number
    readonly ok: false
    readonly tag: string
    readonly sessionId?: string
    readonly expected?: number
    readonly actual?: number
    readonly detail?: string
  }
  | {
    readonly type: "churn-result"
    readonly writer: number
    readonly appends: ReadonlyArray<AppendRecord>
    readonly snapshots: ReadonlyArray<Snapshot>
    readonly readConflicts: ReadonlyArray<Interval>
    readonly conflicts: number
    readonly busy: number
  }
  | {
    readonly type: "truncator-result"
    readonly truncates: ReadonlyArray<TruncateRecord>
    readonly snapshots: ReadonlyArray<Snapshot>
    readonly readConflicts: ReadonlyArray<Interval>
    readonly conflicts: number
    readonly busy: number
  }

const micros = () => Number(process.hrtime.bigint() / 1000n)

const send = (message: WriterReply) =>
  new Promise<void>((resolve, reject) => {
    if (process.send === undefined) return reject(new Error("writer.ts needs an IPC channel"))
    process.send(message, undefined, {}, (error) => (error ? reject(error) : resolve()))
  })

const tagOf = (error: unknown) =>
  typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "unknown"

const leaseMs = process.env["LITE_AGENT_TEST_LOCK_LEASE_MS"]
const fileOptions = { dir: location, ...(leaseMs === undefined ? {} : { lockLeaseMs: Number(leaseMs) }) }

const checkpointer = await openStore(backend, location, { lockLeaseMs: leaseMs === undefined ? undefined : Number(leaseMs) })

const checkConflict = (error: CheckpointConflictError, session: string, head: number) => {
  if (error.sessionId !== session || error.expected !== head || error.actual === head) {
    throw new Error(`inconsistent conflict ${JSON.stringify(error)} after reading head ${head}`)
  }
}

const SLOW_READ_EVERY = 128
const SLOW_READ_PAUSE_MS = 8

/** The whole session, read at once or slowly (pausing every 128 events). */
const readAll = async (session: string, slow: boolean): Promise<Array<StoredEvent>> => {
  if (!slow) return checkpointer.read(session)
  const events: Array<StoredEvent> = []
  for await (const stored of checkpointer.readIterable(session)) {
    events.push(stored)
    if (events.length % SLOW_READ_EVERY === 0) await sleep(SLOW_READ_PAUSE_MS)
  }
  return events
}

/** Read the whole session; a read that meets a concurrent truncate is recorded and retried. */
const snapshot = async (session: string, readConflicts: Array<Interval>, slow = false): Promise<Snapshot> => {
  for (;;) {
    const start = micros()
    try {
      const events = await readAll(session, slow)
      const end = micros()
      return { reader: `w${writer}`, start, end, seqs: events.map((e) => e.seq), contents: events.map(contentOf) }
    } catch (error) {
      if (!(error instanceof CheckpointConflictError)) throw error
      readConflicts.push({ start, end: micros() })
    }
  }
}

interface RetryCounts {
  conflicts: number
  busy: number
}

/**
 * Append one event at the head just read, re-reading and retrying on a conflict (checking the
 * error against that head) or a busy store. Returns the head it expected, the seq it got and
 * the interval of the attempt that succeeded.
 */
const appendAtHead = async (session: string, event: UserMessage, counts: RetryCounts, firstExpected?: number) => {
  // A first try at a given head keeps it through busy retries: only a conflict moves on from it.
  let given = firstExpected
  for (;;) {
    const head = given ?? await checkpointer.head(session)
    const start = micros()
    try {
      const seq = await checkpointer.append(session, [event], head)
      return { head, seq, start, end: micros() }
    } catch (error) {
      if (error instanceof CheckpointBusyError) {
        counts.busy++
        continue
      }
      if (!(error instanceof CheckpointConflictError)) throw error
      checkConflict(error, session, head)
      counts.conflicts++
      given = undefined
    }
  }
}

const retry = async (session: string, count: number, together: number | undefined) => {
  const heads: Array<number> = []
  const expected: Array<number> = []
  const counts = { conflicts: 0, busy: 0 }
  for (let index = 0; index < count; index++) {
    // The writers race for certain, however the machine schedules them: each appends its first
    // event, waits until all `together` have, then tries its second at that same head — one wins,
    // the others conflict — so the log interleaves them and the conflict path runs.
    const race = index === 1 && together !== undefined
    if (race) while ((await checkpointer.head(session)) < together) await new Promise((resolve) => setTimeout(resolve, 2))
    const { head, seq } = await appendAtHead(
      session,
      new UserMessage({ content: `w${writer}:${index}` }),
      counts,
      race ? together : undefined
    )
    heads.push(seq)
    expected.push(head)
  }
  await send({ type: "retry-result", heads, expected, ...counts })
}

const batch = async (session: string, count: number, size: number) => {
  const heads: Array<number> = []
  let busy = 0
  for (let index = 0; index < count; index++) {
    const events = Array.from(
      { length: size },
      (_, part) => new UserMessage({ content: `w${writer}:b${index}:${part}/${size}` })
    )
    for (;;) {
      try {
        heads.push(await checkpointer.append(session, events))
        break
      } catch (error) {
        if (!(error instanceof CheckpointBusyError)) throw error
        busy++
      }
    }
  }
  await send({ type: "batch-result", heads, busy })
}

const round = async (session: string, round: number, expectedHead: number) => {
  try {
    const head = await checkpointer.append(session, [new UserMessage({ content: `r${round}:w${writer}` })], expectedHead)
    await send({ type: "round-result", round, writer, ok: true, head })
  } catch (error) {
    if (error instanceof CheckpointConflictError) {
      const { _tag: tag, actual, expected, sessionId } = error
      await send({ type: "round-result", round, writer, ok: false, tag, sessionId, expected, actual })
    } else {
      await send({ type: "round-result", round, writer, ok: false, tag: tagOf(error), detail: String(error) })
    }
  }
}

const churn = async (session: string, prefix: string, count: number, snapshotEvery: number) => {
  const appends: Array<AppendRecord> = []
  const snapshots: Array<Snapshot> = []
  const readConflicts: Array<Interval> = []
  const counts = { conflicts: 0, busy: 0 }
  for (let index = 0; index < count; index++) {
    const content = `${prefix}${writer}:${index}`
    const { end, head, seq, start } = await appendAtHead(session, new UserMessage({ content }), counts)
    if (seq !== head + 1) throw new Error(`append of ${content} at expected head ${head} returned ${seq}`)
    appends.push({ content, seq, start, end })
    if ((index + 1) % snapshotEvery === 0) {
      snapshots.push(await snapshot(session, readConflicts, snapshots.length % 2 === 1))
    }
  }
  await send({ type: "churn-result", writer, appends, snapshots, readConflicts, ...counts })
}

const truncator = async (
  session: string,
  count: number,
  deepChance: number,
  boundaryChance: number,
  boundary: number,
  shallowMax: number,
  pauseMs: number
) => {
  const truncates: Array<TruncateRecord> = []
  const snapshots: Array<Snapshot> = []
  const readConflicts: Array<Interval> = []
  let conflicts = 0
  let busy = 0
  while (truncates.length < count) {
    await sleep(Math.floor(Math.random() * pauseMs))
    for (;;) {
      const head = await checkpointer.head(session)
      // Never cut below the number of truncates still to come, so there is always something
      // left to cut even once the appenders are done (the session must start with >= count events).
      const floor = count - truncates.length - 1
      if (head <= floor) throw new Error(`head ${head} leaves nothing to cut for the ${floor + 1} truncates to come`)
      const dice = Math.random()
      const candidate = dice < deepChance
        ? Math.floor(Math.random() * head)
        : dice < deepChance + boundaryChance && head > boundary
        ? boundary - 1 - Math.floor(Math.random() * 10)
        : head - 1 - Math.floor(Math.random() * Math.min(head, shallowMax))
      const toSeq = Math.max(floor, candidate)
      const start = micros()
      try {
        const result = await checkpointer.truncate(session, toSeq, head)
        if (result !== toSeq) throw new Error(`truncate to ${toSeq} returned ${result}`)
        truncates.push({ toSeq, expectedHead: head, start, end: micros() })
        snapshots.push(await snapshot(session, readConflicts))
        break
      } catch (error) {
        if (error instanceof CheckpointBusyError) {
          busy++
          continue
        }
        if (!(error instanceof CheckpointConflictError)) throw error
        checkConflict(error, session, head)
        conflicts++
      }
    }
  }
  await send({ type: "truncator-result", truncates, snapshots, readConflicts, conflicts, busy })
}

/** JSON lines, like the default codec, but pausing inside the lock first (see `slow-append`). */
const pausingCodec = (pauseMs: number): LogCodecService => ({
  ...jsonCodec,
  encode: (records) =>
    Effect.promise(() => send({ type: "holding" })).pipe(
      Effect.zipRight(Effect.promise(() => sleep(pauseMs))),
      Effect.zipRight(jsonCodec.encode(records))
    )
})

const slowAppend = async (session: string, content: string, pauseMs: number) => {
  const slow = fileCheckpointer({ ...fileOptions, codec: pausingCodec(pauseMs) })
  try {
    const expected = await slow.head(session)
    const head = await slow.append(session, [new UserMessage({ content })], expected)
    await send({ type: "slow-result", ok: true, head, expected })
  } catch (error) {
    await send({ type: "slow-result", ok: false, tag: tagOf(error), detail: String(error) })
  } finally {
    await slow.close()
  }
}

const fail = (error: unknown) => {
  process.stderr.write(
    `${backend} writer ${writer} failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`
  )
  process.exit(1)
}

process.on("message", (command: WriterCommand) => {
  switch (command.type) {
    case "retry":
      return void retry(command.session, command.count, command.together).catch(fail)
    case "batch":
      return void batch(command.session, command.count, command.size).catch(fail)
    case "round":
      return void round(command.session, command.round, command.expectedHead).catch(fail)
    case "churn":
      return void churn(command.session, command.prefix, command.count, command.snapshotEvery).catch(fail)
    case "truncator":
      return void truncator(
        command.session,
        command.count,
        command.deepChance,
        command.boundaryChance,
        command.boundary,
        command.shallowMax,
        command.pauseMs
      ).catch(fail)
    case "slow-append":
      return void slowAppend(command.session, command.content, command.pauseMs).catch(fail)
    case "exit":
      return void checkpointer.close().then(() => process.exit(0), fail)
  }
})

// Open the checkpointer (directory or schema checks, runtime) before reporting ready.
checkpointer.list().then(() => send({ type: "ready", writer }), fail)
