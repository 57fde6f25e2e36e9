/**
 * The store's objects in the file backend: one file per object under `<dir>/.objects/`, named by
 * its plain SHA-256 split after two digits (`.objects/ab/cdef…`, as git does: no directory holds
 * more than a 256th of them), stored through the log's codec. The file's modification time is
 * the object's touched time (objectCollection.ts).
 *
 * - A put writes to `.objects/tmp/<random>`, sets its time, flushes it when durable and renames
 *   it into place: a name only ever names a whole object, and two writers of one object both
 *   succeed (the second rename replaces an equal object).
 * - A delete (the collector's) renames the object to `.objects/trash/<sha256>.<run>` first, then
 *   looks at its time there: touched since the cutoff, it is renamed back; else it is unlinked. A
 *   touch that finds no object looks in the trash and renames what it finds back (the unlink and
 *   that rename cannot both succeed), so a touch that succeeds always leaves a stored object. A
 *   reader that finds no object looks in the trash too.
 * - A collector cut short by a crash leaves objects in the trash: the next one puts them back
 *   before it starts, and readers and writers find them there meanwhile. A put cut short leaves a
 *   temporary file, removed by a collection once it is older than its cutoff.
 *
 * Sessions of releases that kept blobs per session (`<dir>/<session>/blobs/<sha256>`) are moved
 * in when the store is opened for writing (`moveSessionBlobs`): each blob is stored as an object
 * and then unlinked, so a crash loses nothing and the next open goes on where it stopped. Until
 * then (a store open for reading only) an object not found is looked for there.
 */
import { join } from "node:path"
import { Effect } from "effect"
import type * as Checkpointer from "../../core/Checkpointer.js"
import type { CheckpointerError, CodecError, StorageError } from "../../core/errors.js"
import { sessionIdProblem } from "../../core/sessionId.js"
import { blobCodec, type LogCodecService } from "./codec.js"
import type { LogFilesService } from "./LogFiles.js"

export const OBJECTS_DIR = ".objects"
const TEMP_DIR = "tmp"
const TRASH_DIR = "trash"
/** Where releases before the shared store kept a session's blobs. */
const SESSION_BLOBS_DIR = "blobs"
const SHA256_NAME = /^[0-9a-f]{64}$/
const FAN_OUT_NAME = /^[0-9a-f]{2}$/
const REST_NAME = /^[0-9a-f]{62}$/

export interface ObjectStoreSettings {
  readonly files: LogFilesService
  readonly codec: LogCodecService
  /** The sessions directory (its real path). */
  readonly directory: string
  /** Whether written objects and their names are flushed to disk (`synchronous: "full"`). */
  readonly durable: boolean
  /** A fresh suffix for a temporary file's name. */
  readonly tempSuffix: Effect.Effect<string>
}

export const makeObjectStore = ({ codec, directory, durable, files, tempSuffix }: ObjectStoreSettings) => {
  const blobs = blobCodec(codec)
  const root = join(directory, OBJECTS_DIR)
  const tempDir = join(root, TEMP_DIR)
  const trashDir = join(root, TRASH_DIR)
  const fanOutDir = (sha256: string) => join(root, sha256.slice(0, 2))
  const objectPath = (sha256: string) => join(root, sha256.slice(0, 2), sha256.slice(2))
  /** Sessions that still hold blobs of their own (read through until they are moved in). */
  let sessionsWithBlobs: ReadonlyArray<string> = []

  const ensureDirectory = (path: string, parent: string) =>
    Effect.gen(function*() {
      if ((yield* files.modifiedAt(path)) !== undefined) return
      yield* files.makeDirectory(path)
      if (durable) yield* files.flushDirectory(parent)
    })

  /** The trash entries of `sha256` (any collector's). */
  const trashed = (sha256: string) => Effect.map(files.list(trashDir).pipe(Effect.orElseSucceed(() => [])), (names) =>
    names.filter((name) => name.startsWith(`${sha256}.`)))

  /** Put a trashed copy of `sha256` back in place; false when there is none (or a collector unlinked it first). */
  const rescue = (sha256: string) =>
    Effect.gen(function*() {
      for (const name of yield* trashed(sha256)) {
        if (yield* files.renameIfPresent(join(trashDir, name), objectPath(sha256))) return true
      }
      return false
    })

  /** Touch one object (rescued from the trash when a collector is deleting it); false when it is not stored. */
  const touchOne = (sha256: string, nowMs: number) =>
    Effect.flatMap(files.touch(objectPath(sha256), nowMs), (touched) =>
      touched ? Effect.succeed(true) : Effect.flatMap(rescue(sha256), (rescued) =>
        rescued ? files.touch(objectPath(sha256), nowMs) : Effect.succeed(false)))

  const writeObject = (blob: Checkpointer.SnapshotBlob, nowMs: number) =>
    Effect.gen(function*() {
      const stored = yield* blobs.encode({ sha256: blob.sha256, data: blob.data })
      yield* ensureDirectory(tempDir, root)
      yield* ensureDirectory(fanOutDir(blob.sha256), root)
      const target = objectPath(blob.sha256)
      // A temporary file is as old as the write (a collection removes those past its cutoff: left
      // by a crash); one removed under a write that took that long is written again.
      for (let attempt = 1; ; attempt++) {
        const temp = join(tempDir, yield* tempSuffix)
        const written = Effect.scoped(Effect.gen(function*() {
          const handle = yield* files.create(temp)
          yield* handle.writeAt(0, stored)
          if (durable) yield* handle.flush
        }))
        const placed = yield* written.pipe(
          Effect.zipRight(attempt < 3 ? files.renameIfPresent(temp, target) : Effect.as(files.rename(temp, target), true)),
          Effect.onError(() => files.remove(temp).pipe(Effect.ignore))
        )
        if (!placed) continue
        // Its time as the store's clock says (a collection may have moved it meanwhile: then it was as new as its write).
        yield* files.touch(target, nowMs)
        return
      }
    })

  const put = (added: ReadonlyArray<Checkpointer.SnapshotBlob>, nowMs: number) =>
    Effect.gen(function*() {
      if (added.length === 0) return
      yield* ensureDirectory(root, directory)
      const wroteIn = new Set<string>()
      for (const blob of added) {
        if (yield* touchOne(blob.sha256, nowMs)) continue
        yield* writeObject(blob, nowMs)
        wroteIn.add(fanOutDir(blob.sha256))
      }
      // The objects' names are on disk before a log names them.
      if (durable) for (const dir of wroteIn) yield* files.flushDirectory(dir)
    })

  const touch = (hashes: ReadonlyArray<string>, nowMs: number) =>
    Effect.filter(hashes, (sha256) => Effect.map(touchOne(sha256, nowMs), (touched) => !touched))

  const readFile = (path: string) =>
    Effect.scoped(Effect.gen(function*() {
      const file = yield* files.open(path, "read")
      return file === undefined ? undefined : yield* file.readAt(0, yield* file.size)
    }))

  const readStored = (sha256: string): Effect.Effect<Uint8Array | undefined, StorageError | CodecError> =>
    Effect.gen(function*() {
      // In place; else in the trash (a collector looking at it); else in place again (it was put back).
      const here = yield* readFile(objectPath(sha256))
      if (here !== undefined) return here
      for (const name of yield* trashed(sha256)) {
        const there = yield* readFile(join(trashDir, name))
        if (there !== undefined) return there
      }
      return yield* readFile(objectPath(sha256))
    })

  const read = (sha256: string) =>
    Effect.gen(function*() {
      const stored = yield* readStored(sha256)
      if (stored !== undefined) return yield* blobs.decode({ sha256, data: stored })
      for (const sessionId of sessionsWithBlobs) {
        const old = yield* readFile(join(directory, sessionId, SESSION_BLOBS_DIR, sha256))
        if (old !== undefined) return yield* blobs.decode({ sessionId, sha256, data: old })
      }
      return undefined
    })

  const sizes = (hashes: ReadonlyArray<string>) =>
    Effect.gen(function*() {
      const found: Array<Checkpointer.SnapshotInfo> = []
      for (const sha256 of new Set(hashes)) {
        const size = yield* Effect.scoped(Effect.flatMap(files.open(objectPath(sha256), "read"), (file) =>
          file === undefined ? Effect.succeed(undefined) : file.size))
        if (size !== undefined) found.push({ sha256, storedBytes: size })
      }
      return found
    })

  // One pass per fan-out directory: a store holds a file per content, tens of thousands of them.
  const list = Effect.gen(function*() {
    const objects: Array<Checkpointer.StoredObject> = []
    const fanOuts = (yield* files.list(root).pipe(Effect.orElseSucceed(() => []))).filter((name) => FAN_OUT_NAME.test(name))
    for (const fanOut of fanOuts) {
      for (const { modifiedMs, name, size } of yield* files.sizes(join(root, fanOut), (name) => REST_NAME.test(name))) {
        objects.push({ sha256: fanOut + name, storedBytes: size, touchedMs: modifiedMs })
      }
    }
    return objects
  })

  /** Put back what collectors cut short left in the trash (safe while another collector runs: it then finds its entry gone and deletes nothing). */
  const restoreTrash = (ownSuffix: string) =>
    Effect.gen(function*() {
      for (const name of yield* files.list(trashDir).pipe(Effect.orElseSucceed(() => []))) {
        const [sha256, suffix] = name.split(".", 2)
        if (suffix === ownSuffix || sha256 === undefined || !SHA256_NAME.test(sha256)) continue
        if ((yield* files.modifiedAt(objectPath(sha256))) === undefined) {
          yield* ensureDirectory(fanOutDir(sha256), root)
          yield* files.renameIfPresent(join(trashDir, name), objectPath(sha256))
        } else {
          yield* files.unlinkIfPresent(join(trashDir, name))
        }
      }
    })

  const deleteUntouched = (hashes: ReadonlyArray<string>, cutoffMs: number) =>
    Effect.gen(function*() {
      const run = yield* tempSuffix
      yield* restoreTrash(run)
      // Temporary files older than the cutoff are writes a crash cut short.
      for (const { modifiedMs, name } of yield* files.sizes(tempDir, () => true)) {
        if (modifiedMs < cutoffMs) yield* files.unlinkIfPresent(join(tempDir, name))
      }
      const deleted: Array<Checkpointer.SnapshotInfo> = []
      if (hashes.length === 0) return deleted
      yield* ensureDirectory(trashDir, root)
      for (const sha256 of hashes) {
        const doomed = join(trashDir, `${sha256}.${run}`)
        if (!(yield* files.renameIfPresent(objectPath(sha256), doomed))) continue
        // Its time as it is now that no touch can reach it in place: a touch before the rename shows here.
        const [seen] = yield* files.sizes(trashDir, (name) => name === `${sha256}.${run}`)
        if (seen === undefined) continue
        if (seen.modifiedMs >= cutoffMs) {
          yield* files.renameIfPresent(doomed, objectPath(sha256))
          continue
        }
        // A touch that found it missing renamed it back first: then it stays.
        if (yield* files.unlinkIfPresent(doomed)) deleted.push({ sha256, storedBytes: seen.size })
      }
      if (durable) yield* files.flushDirectory(trashDir)
      return deleted
    })

  /**
   * Move the blobs sessions kept of their own (releases before the shared store) into the
   * objects, then mark each session's log as needing this release (`markLog`). Run at open, with
   * the directory writable; idempotent, so a crash midway is finished by the next open.
   */
  const moveSessionBlobs = (
    markLog: (sessionId: string) => Effect.Effect<void, CheckpointerError>,
    nowMs: number
  ) =>
    Effect.gen(function*() {
      const sessions = (yield* files.list(directory)).filter((name) => sessionIdProblem(name) === undefined)
      for (const sessionId of sessions) {
        const blobDir = join(directory, sessionId, SESSION_BLOBS_DIR)
        if ((yield* files.modifiedAt(blobDir)) === undefined) continue
        yield* ensureDirectory(root, directory)
        for (const name of yield* files.list(blobDir)) {
          const path = join(blobDir, name)
          if (SHA256_NAME.test(name)) {
            const stored = yield* readFile(path)
            if (stored !== undefined && (yield* files.modifiedAt(objectPath(name))) === undefined) {
              const data = yield* blobs.decode({ sessionId, sha256: name, data: stored })
              yield* writeObject({ sha256: name, data }, nowMs)
              if (durable) yield* files.flushDirectory(fanOutDir(name))
            }
          }
          // The object is in place (or the name was a write a crash cut short): the old file goes.
          yield* files.unlinkIfPresent(path)
        }
        yield* markLog(sessionId)
        yield* files.remove(blobDir)
      }
    })

  /** Which sessions still hold blobs of their own (a store open for reading only reads them there). */
  const findSessionBlobs = Effect.gen(function*() {
    const sessions = (yield* files.list(directory)).filter((name) => sessionIdProblem(name) === undefined)
    sessionsWithBlobs = yield* Effect.filter(sessions, (sessionId) =>
      Effect.map(files.modifiedAt(join(directory, sessionId, SESSION_BLOBS_DIR)), (mtime) => mtime !== undefined))
  })

  const objectStore: Checkpointer.ObjectStore = { put, touch, read, sizes, list, deleteUntouched }
  return { objectStore, moveSessionBlobs, findSessionBlobs }
}
