/**
 * Opening the database file: for reading and writing when this process can write it, for
 * reading only when it cannot.
 *
 * - A database that cannot be written — a read-only mount, a file or directory without write
 *   permission — is opened read-only (`readonly: true`). SQLite reads a WAL database only
 *   through its `-shm` file; when that does not exist and cannot be created here (no process
 *   has the database open), the file alone holds every commit provided its `-wal` is absent or
 *   empty, so it is read from a copy in memory, as it was when opened.
 * - A `-shm` or `-wal` that this process cannot write while it can write the database was
 *   left so by a process that opened the database while the database was read-only (SQLite
 *   gives them the database file's mode when it creates them). SQLite then refuses the
 *   database even for reads. This process puts such a file back to the database's mode when
 *   it owns it (the mode SQLite would have given it; open handles are unaffected), and
 *   otherwise reports which file and the command that fixes it.
 */
import { accessSync, chmodSync, constants, existsSync, readFileSync, statSync } from "node:fs"
import { dirname } from "node:path"
import Database from "better-sqlite3"
import { ConfigurationError, StorageError } from "../../core/errors.js"
import { errnoOf, messageOf } from "../internal/causes.js"

export interface OpenedDatabase {
  readonly db: Database.Database
  /** Why the database is open for reading only; `undefined` when it can be written. */
  readonly readOnly: string | undefined
}

/** Why `path` cannot be written by this process (`EACCES`, `EROFS`, …), or `undefined` when it can. */
const unwritable = (path: string): string | undefined => {
  try {
    accessSync(path, constants.W_OK)
    return undefined
  } catch (error) {
    return errnoOf(error) ?? messageOf(error)
  }
}

/** Why an existing database cannot be written here, or `undefined` when it can. */
const readOnlyReason = (file: string): string | undefined => {
  const fileProblem = unwritable(file)
  if (fileProblem !== undefined) return `${file} cannot be written (${fileProblem})`
  const directory = dirname(file)
  const directoryProblem = unwritable(directory)
  // SQLite creates the -wal and -shm files beside the database; ones already there will do.
  const companionsWritable = [`${file}-wal`, `${file}-shm`].every((path) => existsSync(path) && unwritable(path) === undefined)
  if (directoryProblem !== undefined && !companionsWritable) return `its directory ${directory} cannot be written (${directoryProblem})`
  return undefined
}

/** Give a `-shm`/`-wal` this process cannot write the database's mode again, or say how to. */
const repairLeftovers = (file: string): StorageError | undefined => {
  for (const suffix of ["-shm", "-wal"]) {
    const path = file + suffix
    const problem = unwritable(path)
    // Missing (or removed meanwhile by the last connection closing) is fine too.
    if (problem === undefined || problem === "ENOENT") continue
    const mode = statSync(file).mode & 0o777
    if (statSync(path, { throwIfNoEntry: false })?.uid === process.getuid?.()) {
      try {
        chmodSync(path, mode)
        if (unwritable(path) === undefined) continue
      } catch {
        // Reported below, with the command.
      }
    }
    return new StorageError({
      operation: "open",
      code: "SQLITE_READONLY",
      detail: `${path} cannot be written by this process while ${file} can (it was left read-only, e.g. by a process ` +
        `that opened the database while the database was read-only), and SQLite cannot use the database until it can: ` +
        `run \`chmod --reference=${file} ${path}\` as its owner or root`
    })
  }
  return undefined
}

const failedOpen = (file: string, error: unknown) =>
  new ConfigurationError({ option: "file", detail: `cannot open ${file}: ${messageOf(error)}` })

/** Codes of a read-only open that found no `-shm` it could use. */
const NO_SHARED_MEMORY: ReadonlySet<string> = new Set(["SQLITE_CANTOPEN", "SQLITE_READONLY_DIRECTORY", "SQLITE_READONLY_CANTINIT"])

/** WAL (2) to rollback-journal (1) in the header's write and read versions: a copy in memory has no WAL. */
const withoutWal = (image: Buffer) => {
  if (image.length >= 20 && image[18] === 2 && image[19] === 2) {
    image[18] = 1
    image[19] = 1
  }
  return image
}

const openReadOnly = (file: string, reason: string): OpenedDatabase | StorageError | ConfigurationError => {
  let db: Database.Database
  try {
    db = new Database(file, { readonly: true })
  } catch (error) {
    return failedOpen(file, error)
  }
  try {
    // The first read of the file: it needs the -shm of a WAL database.
    db.pragma("user_version", { simple: true })
    return { db, readOnly: reason }
  } catch (error) {
    db.close()
    if (!NO_SHARED_MEMORY.has(errnoOf(error) ?? "")) {
      return new StorageError({ operation: "open", detail: `${file} (${reason}): ${messageOf(error)}`, cause: error })
    }
  }
  const wal = `${file}-wal`
  if ((statSync(wal, { throwIfNoEntry: false })?.size ?? 0) > 0) {
    return new StorageError({
      operation: "open",
      code: "SQLITE_READONLY",
      detail: `${file} is read-only here (${reason}) and its ${wal} holds commits not yet in the database file, which only a ` +
        `process that can write them can take in: open it once where it can be written`
    })
  }
  try {
    const copy = new Database(withoutWal(readFileSync(file)), { readonly: true })
    return { db: copy, readOnly: `${reason}; read from a copy of the file made when it was opened` }
  } catch (error) {
    return failedOpen(file, error)
  }
}

/** Open `file`: read-write when this process can write it, read-only otherwise (see above). */
export const openDatabase = (file: string): OpenedDatabase | StorageError | ConfigurationError => {
  try {
    if (file !== ":memory:" && existsSync(file)) {
      const reason = readOnlyReason(file)
      if (reason !== undefined) return openReadOnly(file, reason)
      const leftover = repairLeftovers(file)
      if (leftover !== undefined) return leftover
    }
    return { db: new Database(file), readOnly: undefined }
  } catch (error) {
    return failedOpen(file, error)
  }
}
