/**
 * Reading a session's log page by page from a SQL table, written once for the SQL backends:
 * each page is the rows after the last seq read, each row carrying the session's head and
 * generation. A page whose generation differs from the first page's means the log was
 * truncated (or deleted and re-created) while the reader paged through it: that is a
 * `CheckpointConflictError`, never a mix of the old log and its successor.
 */
import { Chunk, Effect, Option, Stream } from "effect"
import { CheckpointConflictError, type CheckpointerError, CheckpointIntegrityError } from "../core/errors.js"

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

export interface PagedEventRow extends EventRow {
  readonly head: number | string
  readonly generation: number | string
}

/** A row as the core decodes it, or the damage found in its event text. */
export const recordOf = (sessionId: string, row: EventRow): StoredRecord | CheckpointIntegrityError => {
  const seq = Number(row.seq)
  try {
    return { seq, ts: Number(row.ts), event: JSON.parse(row.event) as unknown }
  } catch (cause) {
    return new CheckpointIntegrityError({ sessionId, seq, detail: `the stored event is not JSON: ${String(cause)}` })
  }
}

export const pagedRead = (options: {
  readonly sessionId: string
  readonly sinceSeq: number
  /** Rows per page: a shorter page is the last. */
  readonly pageRows: number
  /** The rows after `after`, in seq order, at most `pageRows`. */
  readonly page: (after: number) => Effect.Effect<ReadonlyArray<PagedEventRow>, CheckpointerError>
  readonly head: Effect.Effect<number, CheckpointerError>
}): Stream.Stream<StoredRecord, CheckpointerError> =>
  Stream.paginateChunkEffect(
    { after: options.sinceSeq, generation: undefined as string | undefined, startHead: undefined as number | undefined },
    (cursor) =>
      Effect.gen(function*() {
        const rows = yield* options.page(cursor.after)
        const first = rows[0]
        if (first !== undefined && cursor.generation !== undefined && String(first.generation) !== cursor.generation) {
          const actual = yield* options.head
          return yield* new CheckpointConflictError({ sessionId: options.sessionId, expected: cursor.startHead ?? cursor.after, actual })
        }
        const records: Array<StoredRecord> = []
        for (const row of rows) {
          const record = recordOf(options.sessionId, row)
          if (record instanceof CheckpointIntegrityError) return yield* record
          records.push(record)
        }
        const last = records.at(-1)
        return [
          Chunk.unsafeFromArray(records),
          rows.length === options.pageRows && last !== undefined
            ? Option.some({
              after: last.seq,
              generation: cursor.generation ?? (first === undefined ? undefined : String(first.generation)),
              startHead: cursor.startHead ?? (first === undefined ? undefined : Number(first.head))
            })
            : Option.none()
        ] as const
      })
  )
