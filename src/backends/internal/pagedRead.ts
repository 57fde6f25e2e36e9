/**
 * Reading a session's log page by page from a SQL table, written once for the SQL backends:
 * each page is the rows after the last seq read, each row carrying the session's head and
 * generation. A page whose generation differs from the first page's means the log was
 * truncated (or deleted and re-created) while the reader paged through it: that is a
 * `CheckpointConflictError`, never a mix of the old log and its successor.
 */
import { Chunk, Effect, Option, Stream } from "effect"
import { NO_GENERATION, type RecordPage } from "../../core/CheckpointerDriver.js"
import { CheckpointConflictError, type CheckpointerError, CheckpointIntegrityError } from "../../core/errors.js"

/** A stored row as the core decodes it. */
export interface StoredRecord {
  readonly seq: number
  readonly ts: number
  readonly event: unknown
}

/** An event row as a SQL backend reads it (drivers give integers as numbers or strings). */
export interface EventRow {
  readonly seq: number | string
  readonly ts: number | string
  readonly event: string
}

/** A stored event's text as the core decodes it, or the damage found in it. */
export const parseRecord = (
  sessionId: string,
  seq: number,
  ts: number,
  text: string
): StoredRecord | CheckpointIntegrityError => {
  try {
    return { seq, ts, event: JSON.parse(text) as unknown }
  } catch (cause) {
    return new CheckpointIntegrityError({ sessionId, seq, detail: `the stored event is not JSON: ${String(cause)}` })
  }
}

/** A row as the core decodes it, or the damage found in its event text. */
export const recordOf = (sessionId: string, row: EventRow): StoredRecord | CheckpointIntegrityError =>
  parseRecord(sessionId, Number(row.seq), Number(row.ts), row.event)

/** One page of a session's log, read in one snapshot of the database (a driver's `RecordPage`, its records parsed). */
export interface EventPage extends RecordPage {
  /** The records after the page's start, in seq order, at most `pageRows`. */
  readonly records: ReadonlyArray<StoredRecord>
}

/**
 * The page of rows that carry the session's head and generation (the session's row joined with
 * its events: one row without an event when none follows), as an `EventPage`.
 */
export const pageOfJoinedRows = (
  sessionId: string,
  rows: ReadonlyArray<
    { readonly [K in keyof EventRow]: EventRow[K] | null } & { readonly head: number | string; readonly generation: number | string }
  >
): EventPage | CheckpointIntegrityError => {
  const records: Array<StoredRecord> = []
  for (const row of rows) {
    if (row.seq === null || row.ts === null || row.event === null) continue
    const record = parseRecord(sessionId, Number(row.seq), Number(row.ts), row.event)
    if (record instanceof CheckpointIntegrityError) return record
    records.push(record)
  }
  const first = rows[0]
  return first === undefined
    ? { records, generation: NO_GENERATION, head: 0 }
    : { records, generation: String(first.generation), head: Number(first.head) }
}

export const pagedRead = (options: {
  readonly sessionId: string
  readonly sinceSeq: number
  /** Rows per page: a shorter page is the last. */
  readonly pageRows: number
  /** The records after `after`, in seq order, at most `pageRows`, with the session's version. */
  readonly page: (after: number) => Effect.Effect<EventPage, CheckpointerError>
  readonly head: Effect.Effect<number, CheckpointerError>
}): Stream.Stream<StoredRecord, CheckpointerError> =>
  Stream.paginateChunkEffect(
    { after: options.sinceSeq, generation: undefined as string | undefined, startHead: undefined as number | undefined },
    (cursor) =>
      Effect.gen(function*() {
        const page = yield* options.page(cursor.after)
        const { generation, records } = page
        if (records.length > 0 && cursor.generation !== undefined && generation !== cursor.generation) {
          const actual = yield* options.head
          return yield* new CheckpointConflictError({ sessionId: options.sessionId, expected: cursor.startHead ?? cursor.after, actual })
        }
        const last = records.at(-1)
        return [
          Chunk.unsafeFromArray(records),
          records.length === options.pageRows && last !== undefined
            ? Option.some({
              after: last.seq,
              generation: cursor.generation ?? generation,
              startHead: cursor.startHead ?? page.head
            })
            : Option.none()
        ] as const
      })
  )
