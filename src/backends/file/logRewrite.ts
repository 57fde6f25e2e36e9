/**
 * Changing a session log other than by appending: a truncate's kept contents, a whole log put
 * in place by an atomic replace (a flushed temporary file renamed over it, then the directory
 * flushed), and a torn tail cut back to the last committed batch, its bytes kept beside the log.
 */
import { basename, dirname, join } from "node:path"
import { Effect } from "effect"
import { CheckpointIntegrityError } from "../../core/errors.js"
import { ForwardScanner, recordLine } from "./format.js"
import type { LogFilesService, LogHandle } from "./LogFiles.js"
import { READ_CHUNK_BYTES } from "./logReader.js"
import type { LogRecords } from "./logRecords.js"
import type { OpenLog } from "./openLogs.js"
import type { HeldSessionLock } from "./SessionLock.js"

/** `ensureHeld` of the session lock: run right before each change on disk. */
type EnsureHeld = HeldSessionLock["ensureHeld"]

export interface LogRewriteSettings {
  readonly files: LogFilesService
  readonly logRecords: LogRecords
  /** Whether the kept bytes of a torn tail are flushed to disk (`synchronous: "full"`). */
  readonly durable: boolean
  /** A fresh suffix for a temporary file's name. */
  readonly tempSuffix: Effect.Effect<string>
}

export const makeLogRewrite = ({ durable, files, logRecords, tempSuffix }: LogRewriteSettings) => {
  /**
   * Write `contents` to a new file beside `target`, flush it, rename it into place (once
   * `ensureHeld` confirms the lock is still ours), flush the directory.
   */
  const replaceAtomically = (target: string, contents: ReadonlyArray<Uint8Array>, ensureHeld: EnsureHeld) =>
    Effect.gen(function*() {
      const directory = dirname(target)
      const temp = join(directory, `${basename(target)}.tmp-${yield* tempSuffix}`)
      const written = Effect.scoped(Effect.gen(function*() {
        const handle = yield* files.create(temp)
        let position = 0
        for (const part of contents) {
          yield* handle.writeAt(position, part)
          position += part.length
        }
        // Always flushed: the rename must never expose a file whose data is not on disk.
        yield* handle.flush
      }))
      // onError also runs on interruption: no temporary file is left behind either way.
      yield* written.pipe(
        Effect.zipRight(ensureHeld),
        Effect.zipRight(files.rename(temp, target)),
        Effect.onError(() => files.remove(temp).pipe(Effect.ignore))
      )
      yield* files.flushDirectory(directory)
    })

  /**
   * What to keep when truncating to `toSeq`: a new header (the rewritten log is a new
   * generation), the bytes before its batch, plus the batch's records up to `toSeq` re-lined
   * with `toSeq` as their batch end (so they stay committed).
   */
  const truncatedContents = (
    sessionId: string,
    { committedEnd, file, headerEnd }: Pick<OpenLog, "file" | "headerEnd" | "committedEnd">,
    toSeq: number
  ) =>
    Effect.gen(function*() {
      const header = logRecords.newHeader()
      if (toSeq === 0) return [header]
      const scanner = new ForwardScanner(sessionId, headerEnd, 0)
      let position = headerEnd
      while (position < committedEnd) {
        const bytes = yield* file.readAt(position, Math.min(READ_CHUNK_BYTES, committedEnd - position))
        if (bytes.length === 0) break
        position += bytes.length
        const scanned = scanner.push(bytes)
        if (scanned instanceof CheckpointIntegrityError) return yield* scanned
        const target = scanned.find((record) => record.seq === toSeq)
        if (target === undefined) continue
        if (target.batchEnd === toSeq) return [header, yield* file.readAt(headerEnd, target.end - headerEnd)]
        const batch = scanned.filter((record) => record.batchEnd === target.batchEnd && record.seq <= toSeq)
        const kept = yield* file.readAt(headerEnd, batch[0]!.start - headerEnd)
        const relined = batch.map((record) => recordLine(record.seq, toSeq, record.payload)).join("")
        return [header, kept, Buffer.from(relined, "utf8")]
      }
      return yield* new CheckpointIntegrityError({ sessionId, seq: toSeq, detail: "record not found while truncating" })
    })

  /** Keep bytes cut off a torn tail beside the log rather than throwing them away. */
  const keepTornBytes = (file: LogHandle, directory: string, from: number, to: number) =>
    Effect.gen(function*() {
      const bytes = yield* file.readAt(from, to - from)
      yield* files.writeFile(join(directory, `torn-${Date.now()}-${from}`), bytes)
      if (durable) yield* files.flushDirectory(directory)
    })

  /** Cut a torn tail of `log` (in `directory`) back to the last committed batch, keeping the cut bytes. */
  const cutTornTail = (log: OpenLog, directory: string, ensureHeld: EnsureHeld) =>
    Effect.suspend(() =>
      log.committedEnd < log.size
        ? ensureHeld.pipe(
          Effect.zipRight(keepTornBytes(log.file, directory, log.committedEnd, log.size)),
          Effect.zipRight(ensureHeld),
          Effect.zipRight(log.file.truncate(log.committedEnd)),
          Effect.zipRight(Effect.sync(() => {
            log.size = log.committedEnd
          }))
        )
        : Effect.void
    )

  return { replaceAtomically, truncatedContents, cutTornTail }
}

export type LogRewrite = ReturnType<typeof makeLogRewrite>
