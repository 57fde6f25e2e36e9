/**
 * The file-system primitives the file backend stands on, as a service so tests can inject
 * failures (a full disk, a permission error) at any step.
 *
 * The node implementation uses synchronous calls for the small operations done under the
 * session lock — opening, `fstat`, reading a tail, writing a few lines — because they are
 * served from the page cache in microseconds and every asynchronous hop would add a
 * thread-pool round trip to each append. Flushing to disk (`fdatasync`/`fsync`) and large
 * reads take milliseconds, so they are asynchronous and never stall the event loop.
 */
import * as fs from "node:fs"
import { dirname, resolve } from "node:path"
import { Context, Deferred, Effect, Exit, Layer, type Scope } from "effect"
import { errnoOf as codeOf, messageOf as describe } from "../internal/causes.js"
import { StorageError } from "../../core/errors.js"

export interface LogHandle {
  readonly size: Effect.Effect<number, StorageError>
  /** Which file this is (device and inode): compared with `identify` to tell whether a path still names it. */
  readonly identity: Effect.Effect<string, StorageError>
  /** Up to `length` bytes at `position` (fewer at end of file). */
  readonly readAt: (position: number, length: number) => Effect.Effect<Uint8Array, StorageError>
  /** All of `bytes` at `position`. */
  readonly writeAt: (position: number, bytes: Uint8Array) => Effect.Effect<void, StorageError>
  readonly truncate: (length: number) => Effect.Effect<void, StorageError>
  /** Flush the file's data (and the metadata needed to read it) to disk. */
  readonly flush: Effect.Effect<void, StorageError>
}

export interface LogFilesService {
  /** Open an existing file; `undefined` when it does not exist. Closed with the scope. */
  readonly open: (
    path: string,
    mode: "read" | "update"
  ) => Effect.Effect<LogHandle | undefined, StorageError, Scope.Scope>
  /** Create a new file (failing if it exists). Closed with the scope. */
  readonly create: (path: string) => Effect.Effect<LogHandle, StorageError, Scope.Scope>
  readonly writeFile: (path: string, bytes: Uint8Array) => Effect.Effect<void, StorageError>
  readonly rename: (from: string, to: string) => Effect.Effect<void, StorageError>
  /** Rename `from` to `to` (replacing it); false when `from` does not exist. */
  readonly renameIfPresent: (from: string, to: string) => Effect.Effect<boolean, StorageError>
  /** Remove the file `path`; false when it does not exist. */
  readonly unlinkIfPresent: (path: string) => Effect.Effect<boolean, StorageError>
  /** Set a file's access and modification times to `timeMs`; false when it does not exist. */
  readonly touch: (path: string, timeMs: number) => Effect.Effect<boolean, StorageError>
  /** Remove a file or a directory tree; a missing path is fine. */
  readonly remove: (path: string) => Effect.Effect<void, StorageError>
  readonly makeDirectory: (path: string) => Effect.Effect<void, StorageError>
  /** Flush a directory's entries (after a create, rename or remove) to disk. */
  readonly flushDirectory: (path: string) => Effect.Effect<void, StorageError>
  readonly list: (path: string) => Effect.Effect<ReadonlyArray<string>, StorageError>
  /** The regular files directly in `path` whose names pass `wanted`, with their sizes and modification times, in one pass (empty when there is no such directory). */
  readonly sizes: (
    path: string,
    wanted: (name: string) => boolean
  ) => Effect.Effect<ReadonlyArray<{ readonly name: string; readonly size: number; readonly modifiedMs: number }>, StorageError>
  /** Modification time of a file, or `undefined` when it does not exist. */
  readonly modifiedAt: (path: string) => Effect.Effect<Date | undefined, StorageError>
  /**
   * A fingerprint of `path`'s metadata that changes whenever its content does (its identity,
   * size and times), or `undefined` when nothing is there.
   */
  readonly status: (path: string) => Effect.Effect<string | undefined, StorageError>
  /** Which file `path` names now (as `LogHandle.identity` says it), or `undefined` when none. */
  readonly identify: (path: string) => Effect.Effect<string | undefined, StorageError>
  /** Create `path` if needed and check it is a readable, writable directory; its real path. */
  readonly prepareDirectory: (path: string) => Effect.Effect<string, StorageError>
  /** The real path of `path` when it is an existing directory this process can read (written or not), else `undefined`. */
  readonly readableDirectory: (path: string) => Effect.Effect<string | undefined, StorageError>
  /**
   * Calls `onName` with the name of each entry of directory `path` that changes (a name may be
   * missing) for as long as the scope lasts; gives an Effect that completes when watching stops
   * working. A callback, not a stream: a change is on a follower's hot path. Without it,
   * followers of a session poll.
   */
  readonly watch?: (
    path: string,
    onName: (name: string | undefined) => void
  ) => Effect.Effect<Effect.Effect<void>, never, Scope.Scope>
}

export class LogFiles extends Context.Tag("@lite-agent/backends/file/LogFiles")<LogFiles, LogFilesService>() {}

/**
 * `mkdir -p`, one directory at a time from the nearest one that exists. Not Node's recursive
 * mkdir: under /proc (and some FUSE file systems) it never returns, at full CPU; here the first
 * directory that cannot be made fails with its own error.
 */
export const makeDirectories = (path: string, mode?: number): void => {
  const missing: Array<string> = []
  for (let at = resolve(path); ; at = dirname(at)) {
    try {
      if (!fs.statSync(at).isDirectory()) throw Object.assign(new Error(`${at} is not a directory`), { code: "ENOTDIR" })
      break
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT" || dirname(at) === at) throw error
      missing.push(at)
    }
  }
  for (const directory of missing.reverse()) {
    try {
      fs.mkdirSync(directory, mode === undefined ? undefined : { mode })
    } catch (error) {
      // Made meanwhile by another process: as good.
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error
    }
  }
}


const attempt = <A>(operation: string, run: () => A) =>
  Effect.try({ try: run, catch: (cause) => new StorageError({ operation, detail: describe(cause), cause }) })

/** Reads larger than this go through the thread pool. */
const ASYNC_READ_BYTES = 256 * 1024

const identityOf = (stat: fs.BigIntStats) => `${stat.dev}:${stat.ino}`

/** `path`'s status, or `undefined` when nothing is there (nor can be: a file on the way). */
const statIfPresent = (path: string): fs.BigIntStats | undefined => {
  try {
    return fs.statSync(path, { bigint: true })
  } catch (error) {
    if (codeOf(error) === "ENOENT" || codeOf(error) === "ENOTDIR") return undefined
    throw error
  }
}

/** Runs `operation`; false when what it names does not exist. */
const unlessMissing = (operation: () => void): boolean => {
  try {
    operation()
    return true
  } catch (error) {
    if (codeOf(error) === "ENOENT") return false
    throw error
  }
}

/** The identity part of a status (`statusOf`): which file it is, as `LogHandle.identity` says it. */
export const identityOfStatus = (status: string) => status.split(":", 2).join(":")

/** `path`'s identity, size and times as one string: it changes whenever the content does; `undefined` when nothing is there. */
export const statusOf = (path: string): string | undefined => {
  const stat = statIfPresent(path)
  return stat === undefined ? undefined : `${identityOf(stat)}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`
}

const handleFor = (fd: number): LogHandle => ({
  size: attempt("stat", () => fs.fstatSync(fd).size),
  identity: attempt("stat", () => identityOf(fs.fstatSync(fd, { bigint: true }))),
  readAt: (position, length) => {
    const read = (buffer: Buffer, filled: number): number => {
      while (filled < length) {
        const n = fs.readSync(fd, buffer, filled, length - filled, position + filled)
        if (n === 0) break
        filled += n
      }
      return filled
    }
    if (length <= ASYNC_READ_BYTES) {
      return attempt("read", () => {
        const buffer = Buffer.allocUnsafe(length)
        return buffer.subarray(0, read(buffer, 0))
      })
    }
    return Effect.async<Uint8Array, StorageError>((resume) => {
      const buffer = Buffer.allocUnsafe(length)
      fs.read(fd, buffer, 0, length, position, (error, n) => {
        if (error) resume(Effect.fail(new StorageError({ operation: "read", detail: describe(error), cause: error })))
        else resume(attempt("read", () => buffer.subarray(0, read(buffer, n))))
      })
    })
  },
  writeAt: (position, bytes) =>
    attempt("write", () => {
      let written = 0
      while (written < bytes.length) {
        written += fs.writeSync(fd, bytes, written, bytes.length - written, position + written)
      }
    }),
  truncate: (length) => attempt("truncate", () => fs.ftruncateSync(fd, length)),
  flush: Effect.async<void, StorageError>((resume) => {
    fs.fdatasync(fd, (error) =>
      resume(error ? Effect.fail(new StorageError({ operation: "fsync", detail: describe(error), cause: error })) : Effect.void))
  })
})

const closeQuietly = (fd: number) => Effect.sync(() => fs.closeSync(fd)).pipe(Effect.ignore)

export const node: LogFilesService = {
  open: (path, mode) =>
    Effect.acquireRelease(
      Effect.try({
        try: () => {
          try {
            return fs.openSync(path, mode === "read" ? "r" : "r+")
          } catch (error) {
            if (codeOf(error) === "ENOENT") return undefined
            throw error
          }
        },
        catch: (cause) => new StorageError({ operation: "open", detail: describe(cause), cause })
      }),
      (fd) => (fd === undefined ? Effect.void : closeQuietly(fd))
    ).pipe(Effect.map((fd) => (fd === undefined ? undefined : handleFor(fd)))),
  create: (path) =>
    Effect.acquireRelease(attempt("create", () => fs.openSync(path, "wx", 0o600)), closeQuietly).pipe(
      Effect.map(handleFor)
    ),
  writeFile: (path, bytes) => attempt("write", () => fs.writeFileSync(path, bytes, { mode: 0o600 })),
  rename: (from, to) => attempt("rename", () => fs.renameSync(from, to)),
  renameIfPresent: (from, to) => attempt("rename", () => unlessMissing(() => fs.renameSync(from, to))),
  unlinkIfPresent: (path) => attempt("remove", () => unlessMissing(() => fs.unlinkSync(path))),
  touch: (path, timeMs) => attempt("touch", () => unlessMissing(() => fs.utimesSync(path, timeMs / 1000, timeMs / 1000))),
  remove: (path) => attempt("remove", () => fs.rmSync(path, { recursive: true, force: true })),
  makeDirectory: (path) => attempt("mkdir", () => makeDirectories(path, 0o700)),
  flushDirectory: (path) =>
    Effect.async<void, StorageError>((resume) => {
      fs.open(path, "r", (openError, fd) => {
        if (openError) return resume(Effect.fail(new StorageError({ operation: "fsync directory", detail: describe(openError) })))
        fs.fsync(fd, (syncError) => {
          fs.close(fd, () => undefined)
          resume(syncError ? Effect.fail(new StorageError({ operation: "fsync directory", detail: describe(syncError) })) : Effect.void)
        })
      })
    }),
  list: (path) => attempt("list", () => fs.readdirSync(path)),
  sizes: (path, wanted) =>
    attempt("list", () => {
      let names: Array<string>
      try {
        names = fs.readdirSync(path)
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return []
        throw error
      }
      const found: Array<{ readonly name: string; readonly size: number; readonly modifiedMs: number }> = []
      for (const name of names) {
        if (!wanted(name)) continue
        // Removed since the listing (a sweep elsewhere): not there.
        const stat = fs.statSync(`${path}/${name}`, { throwIfNoEntry: false })
        if (stat?.isFile() === true) found.push({ name, size: stat.size, modifiedMs: stat.mtimeMs })
      }
      return found
    }),
  modifiedAt: (path) => attempt("stat", () => statIfPresent(path)?.mtime),
  status: (path) => attempt("stat", () => statusOf(path)),
  identify: (path) => attempt("stat", () => {
    const stat = statIfPresent(path)
    return stat === undefined ? undefined : identityOf(stat)
  }),
  watch: (path, onName) =>
    Effect.gen(function*() {
      const ended = yield* Deferred.make<void>()
      const end = () => Deferred.unsafeDone(ended, Exit.void)
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          try {
            // Not persistent: a follower must not keep the process alive.
            const watcher = fs.watch(path, { persistent: false }, (_event, name) => onName(name ?? undefined))
            watcher.on("error", end)
            return watcher
          } catch {
            end()
            return undefined
          }
        }),
        (watcher) => Effect.sync(() => watcher?.close())
      )
      return Deferred.await(ended)
    }),
  prepareDirectory: (path) =>
    attempt("open directory", () => {
      makeDirectories(path)
      if (!fs.statSync(path).isDirectory()) throw new Error("is not a directory")
      fs.accessSync(path, fs.constants.R_OK | fs.constants.W_OK | fs.constants.X_OK)
      return fs.realpathSync(path)
    }),
  readableDirectory: (path) =>
    attempt("open directory", () => {
      try {
        if (!fs.statSync(path).isDirectory()) return undefined
        fs.accessSync(path, fs.constants.R_OK | fs.constants.X_OK)
        return fs.realpathSync(path)
      } catch {
        return undefined
      }
    })
}

export const layerNode: Layer.Layer<LogFiles> = Layer.succeed(LogFiles, node)
