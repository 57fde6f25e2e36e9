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
import type { LogTail } from "./openLogs.js"

/** How much of a log a scan reads at a time. */
export const READ_CHUNK_BYTES = 1024 * 1024
/** How much of a log a page read reads at a time: a follower's page is usually its last few records. */
const PAGE_READ_BYTES = 64 * 1024
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

  /** Where a read of an open log after `sinceSeq` starts: its committed tail and a scanner placed near the first record. */
  const startAfter = (sessionId: string, file: LogHandle, sinceSeq: number) =>
    Effect.gen(function*() {
      // Read the log as it is now; later appends belong to a later read.
      const tail = yield* inspect(sessionId, file)
      // A tail read starts near its first record, not at the top of the log.
      const start = yield* seekLine(file.readAt, tail.headerEnd, tail.committedEnd, sinceSeq)
      return { tail, offset: start.offset, scanner: new ForwardScanner(sessionId, start.offset, sinceSeq, start.seq) }
    })

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
      const { offset, scanner, tail: { committedEnd } } = yield* startAfter(sessionId, file, sinceSeq)
      return Stream.paginateChunkEffect(offset, (position) =>
        position >= committedEnd
          ? Effect.succeed([Chunk.empty(), Option.none()] as const)
          : Effect.map(scanAt(sessionId, file, scanner, position, Math.min(READ_CHUNK_BYTES, committedEnd - position)), ({ read, records }) => {
            const next = position + read
            return [records, next < committedEnd && read > 0 ? Option.some(next) : Option.none()] as const
          }))
    }))

  /** The first committed records after `sinceSeq` (at most `maxRecords`) and the version of the log they were read from. */
  const readPage = (sessionId: string, sinceSeq: number, maxRecords: number): Effect.Effect<RecordPage, CheckpointerError> =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* files.open(logPath(sessionId), "read")
      if (file === undefined) return { records: [], head: 0, generation: undefined }
      const { offset, scanner, tail } = yield* startAfter(sessionId, file, sinceSeq)
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

  const readVersion = (sessionId: string) =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* files.open(logPath(sessionId), "read")
      if (file === undefined) return { head: 0, generation: Checkpointer.NO_GENERATION }
      const { generation, head } = yield* inspect(sessionId, file)
      return { head, generation }
    }))

  /**
   * The last version read of each session, with the log's status then: a follower's look at a
   * log that has not changed costs a `stat` instead of an open and a read of its tail. A log
   * only grows in place (a rewrite is a new file), so an unchanged status is an unchanged log.
   */
  const lastRead = new Map<string, { readonly status: string; readonly version: { readonly head: number; readonly generation: string } }>()
  const version = (sessionId: string) =>
    Effect.flatMap(files.status(logPath(sessionId)), (status) => {
      if (status === undefined) {
        lastRead.delete(sessionId)
        return Effect.succeed({ head: 0, generation: Checkpointer.NO_GENERATION })
      }
      const last = lastRead.get(sessionId)
      if (last?.status === status) return Effect.succeed(last.version)
      // Read after the status was taken: a change in between is a new status at the next look.
      return Effect.tap(readVersion(sessionId), (version) => Effect.sync(() => lastRead.set(sessionId, { status, version })))
    })

  return { inspect, read, readPage, version }
}
