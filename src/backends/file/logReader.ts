/**
 * Reading a session log, without its lock and without changing it: the header and committed
 * tail (what `openLogs.ts` keeps of an open log), its version, and its records as a stream.
 */
import { Chunk, Effect, Option, Stream } from "effect"
import * as Checkpointer from "../../core/Checkpointer.js"
import type { RecordPage } from "../../core/CheckpointerDriver.js"
import { CheckpointIntegrityError, type CheckpointerError, SchemaVersionError } from "../../core/errors.js"
import { findCommittedEnd, ForwardScanner, parseHeader, seekLine } from "./format.js"
import type { LogFilesService, LogHandle } from "./LogFiles.js"
import type { LogRecords } from "./logRecords.js"
import { makeReadHandles } from "./readHandles.js"
import type { LogTail } from "./openLogs.js"

/** How much of a log a scan reads at a time. */
export const READ_CHUNK_BYTES = 1024 * 1024
/** How much of a log a page read reads at a time: a follower's page is usually its last few records. */
const PAGE_READ_BYTES = 64 * 1024
/** Logs whose read handle is kept open between looks (readHandles.ts): the sessions being followed, usually. */
const KEPT_READ_HANDLES = 256
/** The header is one short JSON line at the start of the log. */
const HEADER_READ_BYTES = 4096
/** The generation of a log written before headers carried one; its first truncate gives it a real one. */
const LEGACY_GENERATION = "legacy"

export interface LogReaderSettings {
  readonly files: LogFilesService
  readonly logRecords: LogRecords
  readonly logPath: (sessionId: string) => string
}

export const makeLogReader = ({ files, logPath, logRecords }: LogReaderSettings) => {
  const readHandles = makeReadHandles(files, KEPT_READ_HANDLES)
  /** Header, committed head and end of an open log (no locking, no changes). */
  const inspect = (
    sessionId: string,
    file: LogHandle
  ): Effect.Effect<LogTail & { readonly generation: string }, CheckpointerError> =>
    Effect.gen(function*() {
      const size = yield* file.size
      const start = yield* file.readAt(0, Math.min(size, HEADER_READ_BYTES))
      const parsed = parseHeader(sessionId, start)
      if (parsed instanceof CheckpointIntegrityError || parsed instanceof SchemaVersionError) return yield* parsed
      yield* logRecords.checkCodec(sessionId, parsed.header)
      const committed = yield* findCommittedEnd(file.readAt, parsed.end, size)
      return {
        size,
        headerEnd: parsed.end,
        head: committed.head,
        committedEnd: committed.end,
        generation: parsed.header.generation ?? LEGACY_GENERATION
      }
    })

  /** A scanner of an open log placed near the first record after `sinceSeq` (`tail`: the log's committed tail), and its offset. */
  const scannerAfter = (sessionId: string, file: LogHandle, tail: LogTail, sinceSeq: number) =>
    Effect.map(seekLine(file.readAt, tail.headerEnd, tail.committedEnd, sinceSeq), (start) => ({
      offset: start.offset,
      scanner: new ForwardScanner(sessionId, start.offset, sinceSeq, start.seq)
    }))

  /** The records in the bytes at `position` (up to `length`): the scanner checks them, the codec decodes them. */
  const scanAt = (sessionId: string, file: LogHandle, scanner: ForwardScanner, position: number, length: number) =>
    Effect.flatMap(file.readAt(position, length), (bytes) => {
      const scanned = scanner.push(bytes)
      if (scanned instanceof CheckpointIntegrityError) return Effect.fail(scanned)
      return Effect.map(logRecords.decode(sessionId, scanned), (records) => ({ records, read: bytes.length }))
    })

  /** The session's committed records after `sinceSeq`. */
  const read = (sessionId: string, sinceSeq: number): Stream.Stream<unknown, CheckpointerError> =>
    Stream.unwrapScoped(Effect.gen(function*() {
      const file = yield* files.open(logPath(sessionId), "read")
      if (file === undefined) return Stream.empty
      // Read the log as it is now; later appends belong to a later read.
      const tail = yield* inspect(sessionId, file)
      const { committedEnd } = tail
      // A tail read starts near its first record, not at the top of the log.
      const { offset, scanner } = yield* scannerAfter(sessionId, file, tail, sinceSeq)
      return Stream.paginateChunkEffect(offset, (position) =>
        position >= committedEnd
          ? Effect.succeed([Chunk.empty(), Option.none()] as const)
          : Effect.map(scanAt(sessionId, file, scanner, position, Math.min(READ_CHUNK_BYTES, committedEnd - position)), ({ read, records }) => {
            const next = position + read
            return [records, next < committedEnd && read > 0 ? Option.some(next) : Option.none()] as const
          }))
    }))

  /**
   * The committed tail of each session's log as last read, with the log's status then: a
   * follower's look at a log that has not changed costs a `stat` instead of a read of its tail.
   * A log only grows in place (a rewrite is a new file), so an unchanged status is an unchanged log.
   */
  const lastRead = new Map<string, { readonly status: string; readonly tail: LogTail & { readonly generation: string } }>()
  /** The tail last read of a log whose status is still `status`, if any. */
  const unchangedTail = (sessionId: string, status: string | undefined) => {
    const last = status === undefined ? undefined : lastRead.get(sessionId)
    return last !== undefined && last.status === status ? last.tail : undefined
  }
  const tailAt = (sessionId: string, status: string, file: LogHandle) => {
    const unchanged = unchangedTail(sessionId, status)
    if (unchanged !== undefined) return Effect.succeed(unchanged)
    // Read after the status was taken: a change in between is a new status at the next look.
    return Effect.tap(inspect(sessionId, file), (tail) => Effect.sync(() => lastRead.set(sessionId, { status, tail })))
  }

  /** Run `use` with a read handle kept open (readHandles.ts) on the log whose status is `status`; none when there is no log. */
  const withLog = <A>(
    sessionId: string,
    status: string | undefined,
    use: (log: { readonly status: string; readonly file: LogHandle } | undefined) => Effect.Effect<A, CheckpointerError>
  ) => {
    if (status === undefined) lastRead.delete(sessionId)
    return readHandles.withHandle(logPath(sessionId), status, (file) =>
      use(status === undefined || file === undefined ? undefined : { status, file }))
  }

  const version = (sessionId: string) =>
    Effect.flatMap(files.status(logPath(sessionId)), (status) => {
      // An unchanged log: its version without touching a handle.
      const unchanged = unchangedTail(sessionId, status)
      if (unchanged !== undefined) return Effect.succeed({ head: unchanged.head, generation: unchanged.generation })
      return withLog(sessionId, status, (log) =>
        log === undefined
          ? Effect.succeed({ head: 0, generation: Checkpointer.NO_GENERATION })
          : Effect.map(tailAt(sessionId, log.status, log.file), ({ generation, head }) => ({ head, generation })))
    })

  /** The first committed records after `sinceSeq` (at most `maxRecords`) and the version of the log they were read from. */
  const readPage = (sessionId: string, sinceSeq: number, maxRecords: number): Effect.Effect<RecordPage, CheckpointerError> =>
    Effect.flatMap(files.status(logPath(sessionId)), (status) => {
      // Nothing new in a log that has not changed: its version without touching a handle.
      const unchanged = unchangedTail(sessionId, status)
      if (unchanged !== undefined && sinceSeq >= unchanged.head) {
        return Effect.succeed({ records: [], head: unchanged.head, generation: unchanged.generation })
      }
      return withLog(sessionId, status, (log): Effect.Effect<RecordPage, CheckpointerError> =>
      log === undefined ? Effect.succeed({ records: [], head: 0, generation: Checkpointer.NO_GENERATION }) : Effect.gen(function*() {
        const { file } = log
        const tail = yield* tailAt(sessionId, log.status, file)
        if (sinceSeq >= tail.head) return { records: [], head: tail.head, generation: tail.generation }
        const { offset, scanner } = yield* scannerAfter(sessionId, file, tail, sinceSeq)
        const records: Array<unknown> = []
        let position = offset
        while (position < tail.committedEnd && records.length < maxRecords) {
          const scanned = yield* scanAt(sessionId, file, scanner, position, Math.min(PAGE_READ_BYTES, tail.committedEnd - position))
          if (scanned.read === 0) break
          for (const record of scanned.records) records.push(record)
          position += scanned.read
        }
        return { records: records.length > maxRecords ? records.slice(0, maxRecords) : records, head: tail.head, generation: tail.generation }
      }))
    })

  return { inspect, read, readPage, version, forget: (sessionId: string) => readHandles.forget(logPath(sessionId)), closeAll: readHandles.closeAll }
}
