/**
 * A session's snapshot store in the file backend: one file per blob under
 * `<dir>/<sessionId>/blobs/`, named by its plain SHA-256, stored through the log's codec. A blob
 * is written to `.tmp-<random>` beside its name and renamed into place, so a name only ever
 * names a whole blob; a `.tmp-` file is a write a crash cut short, removed by the next delete.
 */
import { join } from "node:path"
import { Effect } from "effect"
import type * as Checkpointer from "../../core/Checkpointer.js"
import type { CheckpointLockLostError, StorageError } from "../../core/errors.js"
import { blobCodec, type LogCodecService } from "./codec.js"
import type { LogFilesService } from "./LogFiles.js"

const BLOBS_DIR = "blobs"
const SHA256_NAME = /^[0-9a-f]{64}$/
const TEMP_PREFIX = ".tmp-"

export interface BlobStoreSettings {
  readonly files: LogFilesService
  readonly codec: LogCodecService
  /** The sessions directory (its real path). */
  readonly directory: string
  /** Whether written blobs and their names are flushed to disk (`synchronous: "full"`). */
  readonly durable: boolean
  /** A fresh suffix for a temporary file's name. */
  readonly tempSuffix: Effect.Effect<string>
}

/** `ensureHeld` of the session lock: run right before each change on disk. */
type EnsureHeld = Effect.Effect<void, CheckpointLockLostError | StorageError>

export const makeBlobStore = ({ codec, directory, durable, files, tempSuffix }: BlobStoreSettings) => {
  const blobs = blobCodec(codec)
  const blobsDir = (sessionId: string) => join(directory, sessionId, BLOBS_DIR)
  const blobPath = (sessionId: string, sha256: string) => join(directory, sessionId, BLOBS_DIR, sha256)

  /** Write each blob not yet stored: to a temporary file, flushed when durable, renamed into place. */
  const put = (sessionId: string, added: ReadonlyArray<Checkpointer.SnapshotBlob>, ensureHeld: EnsureHeld) =>
    Effect.gen(function*() {
      const blobDir = blobsDir(sessionId)
      if ((yield* files.modifiedAt(blobDir)) === undefined) {
        yield* files.makeDirectory(blobDir)
        if (durable) {
          yield* files.flushDirectory(directory)
          yield* files.flushDirectory(join(directory, sessionId))
        }
      }
      let wrote = false
      for (const blob of added) {
        const target = blobPath(sessionId, blob.sha256)
        if ((yield* files.modifiedAt(target)) !== undefined) continue
        const stored = yield* blobs.encode({ sessionId, sha256: blob.sha256, data: blob.data })
        const temp = join(blobDir, `${TEMP_PREFIX}${yield* tempSuffix}`)
        const written = Effect.scoped(Effect.gen(function*() {
          const handle = yield* files.create(temp)
          yield* handle.writeAt(0, stored)
          if (durable) yield* handle.flush
        }))
        yield* written.pipe(
          Effect.zipRight(ensureHeld),
          Effect.zipRight(files.rename(temp, target)),
          Effect.onError(() => files.remove(temp).pipe(Effect.ignore))
        )
        wrote = true
      }
      // The blobs' names are on disk before the log names them.
      if (wrote && durable) yield* files.flushDirectory(blobDir)
    })

  const remove = (sessionId: string, hashes: ReadonlyArray<string>, ensureHeld: EnsureHeld) =>
    Effect.gen(function*() {
      const blobDir = blobsDir(sessionId)
      if ((yield* files.modifiedAt(blobDir)) === undefined) return
      // Temporary files are only written under this lock: any found now were left by a crash.
      const leftovers = (yield* files.list(blobDir)).filter((name) => name.startsWith(TEMP_PREFIX))
      if (hashes.length === 0 && leftovers.length === 0) return
      yield* ensureHeld
      for (const sha256 of hashes) yield* files.remove(blobPath(sessionId, sha256))
      for (const name of leftovers) yield* files.remove(join(blobDir, name))
      if (durable) yield* files.flushDirectory(blobDir)
    })

  const missing = (sessionId: string, hashes: ReadonlyArray<string>) =>
    Effect.filter(hashes, (sha256) => Effect.map(files.modifiedAt(blobPath(sessionId, sha256)), (mtime) => mtime === undefined))

  const read = (sessionId: string, sha256: string) =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* files.open(blobPath(sessionId, sha256), "read")
      if (file === undefined) return undefined
      const stored = yield* file.readAt(0, yield* file.size)
      return yield* blobs.decode({ sessionId, sha256, data: stored })
    }))

  // One pass over the directory: a blob store holds a file per content, tens of thousands after a whole-workspace capture.
  const list = (sessionId: string) =>
    Effect.map(
      files.sizes(blobsDir(sessionId), (name) => SHA256_NAME.test(name)),
      (found): Array<Checkpointer.SnapshotInfo> => found.map(({ name, size }) => ({ sha256: name, storedBytes: size }))
    )

  return { put, remove, missing, read, list }
}

export type BlobStore = ReturnType<typeof makeBlobStore>
