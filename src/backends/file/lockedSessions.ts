/**
 * A session as a mutation holding its lock sees it (`Checkpointer.LockedSession`): appends and
 * truncates, each written only once the lock is confirmed still ours.
 * A session without a log gets its first append written whole and renamed into place; one with
 * a log appends to it in place, after cutting any torn tail.
 */
import { Effect, type Stream } from "effect"
import * as Checkpointer from "../../core/Checkpointer.js"
import type { CheckpointerError } from "../../core/errors.js"
import type { LogFilesService } from "./LogFiles.js"
import type { LogRecords } from "./logRecords.js"
import type { LogRewrite } from "./logRewrite.js"
import type { OpenLog } from "./openLogs.js"
import type { HeldSessionLock } from "./SessionLock.js"

export interface LockedSessionsSettings {
  readonly files: LogFilesService
  readonly logRecords: LogRecords
  readonly rewrite: LogRewrite
  /** The sessions directory (its real path). */
  readonly directory: string
  readonly sessionDir: (sessionId: string) => string
  readonly logPath: (sessionId: string) => string
  /** Whether appends and new names are flushed to disk (`synchronous: "full"`). */
  readonly durable: boolean
  /** The session's committed records, as `Checkpointer.read` gives them. */
  readonly read: (sessionId: string, sinceSeq: number) => Stream.Stream<unknown, CheckpointerError>
  /** Another session's first committed record (a read needs no lock). */
  readonly firstRecordOf: (sessionId: string) => Effect.Effect<unknown, CheckpointerError>
  /** Take the whole session out of sight and remove it (its lock held), and forget what is known of it. */
  readonly remove: (held: HeldSessionLock, sessionId: string) => Effect.Effect<void, CheckpointerError>
}

export const makeLockedSessions = (
  { directory, durable, files, firstRecordOf, logPath, logRecords, read, remove, rewrite, sessionDir }: LockedSessionsSettings
) => {
  /** The first append of a session: its log is written whole beside its path and renamed into place. */
  const newSession = (held: HeldSessionLock, sessionId: string): Checkpointer.LockedSession => ({
    head: 0,
    generation: Checkpointer.NO_GENERATION,
    append: (records) =>
      Effect.gen(function*() {
        // Encode first: a failing codec leaves no trace.
        const lines = yield* logRecords.encode(sessionId, records)
        yield* held.ensureHeld
        yield* files.makeDirectory(sessionDir(sessionId))
        if (durable) yield* files.flushDirectory(directory)
        yield* rewrite.replaceAtomically(logPath(sessionId), [logRecords.newHeader(), lines], held.ensureHeld)
      }),
    truncate: () => Effect.void,
    records: () => read(sessionId, 0),
    firstRecordOf,
    remove: remove(held, sessionId)
  })

  /** A session whose log exists, open as `log`; `log` follows what is written. */
  const existingSession = (held: HeldSessionLock, sessionId: string, log: OpenLog): Checkpointer.LockedSession => {
    const { file } = log
    const repair = rewrite.cutTornTail(log, sessionDir(sessionId), held.ensureHeld)
    return {
      head: log.head,
      generation: log.generation,
      append: (records) => {
        const write = (lines: Buffer) =>
          Effect.suspend(() => {
            const at = log.committedEnd
            // Until the write is known to be whole, the log is not reused as described.
            log.reusable = false
            const written = durable ? Effect.zipRight(file.writeAt(at, lines), file.flush) : file.writeAt(at, lines)
            // A failed write (disk full, I/O error) must not leave part of a batch behind. Cut it
            // back only while the lock is ours; after a takeover the new holder cuts it as a torn tail.
            return Effect.matchEffect(written, {
              onFailure: (error) =>
                held.ensureHeld.pipe(Effect.zipRight(file.truncate(at)), Effect.ignore, Effect.zipRight(Effect.fail(error))),
              onSuccess: () => {
                log.head = records.at(-1)!.seq
                log.committedEnd = log.size = at + lines.length
                log.reusable = true
                return Effect.void
              }
            })
          })
        // Encode first: a failing codec leaves the file exactly as it was. Right before the
        // write: is the lock still ours?
        return Effect.flatMap(logRecords.encode(sessionId, records), (lines) =>
          log.committedEnd < log.size
            ? repair.pipe(Effect.zipRight(held.ensureHeld), Effect.zipRight(write(lines)))
            : Effect.zipRight(held.ensureHeld, write(lines)))
      },
      truncate: (toSeq) =>
        Effect.gen(function*() {
          const contents = yield* rewrite.truncatedContents(sessionId, log, toSeq)
          yield* repair
          // The log is replaced by a new file: this one is done with.
          log.reusable = false
          yield* rewrite.replaceAtomically(logPath(sessionId), contents, held.ensureHeld)
        }),
        records: () => read(sessionId, 0),
      firstRecordOf,
      remove: Effect.suspend(() => {
        // Gone with its directory: not to be kept open for the next holder.
        log.reusable = false
        return remove(held, sessionId)
      })
    }
  }

  return { newSession, existingSession }
}
