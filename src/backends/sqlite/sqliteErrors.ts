/**
 * What SQLite throws, as the library's errors:
 *
 * - another connection's lock: `Busy` (waited out by the caller);
 * - damage (`SQLITE_CORRUPT*`, `SQLITE_NOTADB`): `CheckpointIntegrityError`, but only once the
 *   files read back at the OS level and `PRAGMA quick_check` confirms it. A file system that
 *   fails under SQLite (shut down, its device gone) makes it report "database disk image is
 *   malformed" for every statement, `quick_check` included, while the reads it made failed
 *   with `EIO`; telling a user that intact data is damaged sends them restoring backups for
 *   nothing. Both checks read the whole database, so they run only after such a report;
 * - everything else (`SQLITE_IOERR*`, `SQLITE_FULL`, `SQLITE_CANTOPEN`, `SQLITE_READONLY*`,
 *   `SQLITE_PERM`, …): `StorageError` carrying SQLite's code and what to do about it.
 */
import { closeSync, openSync, readSync } from "node:fs"
import type Database from "better-sqlite3"
import { type CheckpointerError, CheckpointIntegrityError, StorageError } from "../../core/errors.js"
import { errnoOf, messageOf } from "../internal/causes.js"
import { Busy } from "../internal/busy.js"

const BUSY_CODES: ReadonlySet<string> = new Set(["SQLITE_BUSY", "SQLITE_BUSY_SNAPSHOT", "SQLITE_BUSY_RECOVERY", "SQLITE_LOCKED"])
export const isBusy = (error: unknown) => BUSY_CODES.has(errnoOf(error) ?? "")
const isCorrupt = (code: string | undefined) => code !== undefined && (code.startsWith("SQLITE_CORRUPT") || code === "SQLITE_NOTADB")

/** What a failure with this code asks of the user. */
const adviceFor = (code: string | undefined, file: string): string => {
  if (code === undefined) return ""
  if (code === "SQLITE_FULL") return `; the disk (or quota) holding ${file} is full: free space and retry (nothing committed was lost)`
  if (code.startsWith("SQLITE_IOERR")) {
    return `; the file system reported an I/O error on ${file} (its device failed, or it was unmounted or shut down): ` +
      `check the device, then retry (nothing committed was changed)`
  }
  if (code.startsWith("SQLITE_READONLY") || code === "SQLITE_PERM" || code === "SQLITE_CANTOPEN") {
    return `; ${file}, its -wal and -shm files and its directory must be readable and writable by this process`
  }
  return ""
}

/**
 * What `PRAGMA quick_check` finds: `undefined` when the database is intact, the findings when
 * it is not; the error it threw when it could not run for another reason than damage.
 */
const quickCheckFindings = (db: Database.Database): string | undefined | { readonly failed: unknown } => {
  try {
    const rows: unknown = db.pragma("quick_check")
    const findings = Array.isArray(rows) ? rows.map((row: unknown) => String(Object.values(row ?? {})[0])) : [String(rows)]
    return findings.length === 1 && findings[0] === "ok" ? undefined : findings.join("\n")
  } catch (error) {
    return isCorrupt(errnoOf(error)) ? messageOf(error) : { failed: error }
  }
}

/** Read every byte of the database and its WAL as the OS gives them: the first failure, if any. */
const osReadFailure = (file: string): unknown => {
  if (file === ":memory:") return undefined
  const buffer = Buffer.allocUnsafe(1024 * 1024)
  for (const path of [file, `${file}-wal`]) {
    let fd: number
    try {
      fd = openSync(path, "r")
    } catch (error) {
      if (errnoOf(error) === "ENOENT") continue
      return error
    }
    try {
      for (let position = 0, n = 1; n > 0; position += n) n = readSync(fd, buffer, 0, buffer.length, position)
    } catch (error) {
      return error
    } finally {
      closeSync(fd)
    }
  }
  return undefined
}

export interface SqliteErrors {
  /** Map what SQLite threw to the library's errors. */
  readonly toCheckpointerError: (operation: string) => (error: unknown) => CheckpointerError
  /** What a statement threw, as the library's error: `Busy` while another connection holds a lock. */
  readonly failure: (operation: string, error: unknown) => CheckpointerError | Busy
}

export const makeSqliteErrors = (db: Database.Database, file: string): SqliteErrors => {
  const storage = (operation: string, code: string | undefined, detail: string, cause: unknown) =>
    new StorageError({ operation, detail, cause, ...(code === undefined ? {} : { code }) })

  const toCheckpointerError = (operation: string) => (error: unknown): CheckpointerError => {
    const code = errnoOf(error)
    const message = messageOf(error)
    if (!isCorrupt(code)) return storage(operation, code, message + adviceFor(code, file), error)
    // Run only after a corruption report, which is rare: a full check would cost too much on every error.
    const unreadable = osReadFailure(file)
    if (unreadable !== undefined) {
      return storage(
        operation,
        errnoOf(unreadable) ?? code,
        `${message} (${code}), but ${file} cannot be read at all (${messageOf(unreadable)}): its file system or device ` +
          `failed, which is not damage to what is stored; check the device (remount it), then open the database again`,
        error
      )
    }
    const findings = quickCheckFindings(db)
    if (typeof findings === "string") {
      return new CheckpointIntegrityError({ detail: `${operation}: ${message}; PRAGMA quick_check: ${findings}` })
    }
    if (findings === undefined) {
      return storage(
        operation,
        code,
        `${message}, but PRAGMA quick_check finds ${file} intact: the file system or device returned bad data ` +
          `(an I/O fault, not damage to what is stored); check the device, then retry`,
        error
      )
    }
    const checkCode = errnoOf(findings.failed)
    return storage(
      operation,
      checkCode ?? code,
      `${message}; PRAGMA quick_check could not read ${file} either (${messageOf(findings.failed)}), so this is taken for a ` +
        `storage failure, not damage${adviceFor(checkCode, file)}`,
      error
    )
  }

  const failure = (operation: string, error: unknown): CheckpointerError | Busy =>
    isBusy(error) ? new Busy({ detail: `${operation}: another connection held the database lock` }) : toCheckpointerError(operation)(error)

  return { toCheckpointerError, failure }
}
