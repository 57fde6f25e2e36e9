/**
 * The SQLite backend (WAL): one machine, many processes, optimistic concurrency.
 *
 * - It drives better-sqlite3 directly, every statement prepared once: appends are the hot path,
 *   and a statement compiler, a statement cache or a transaction scope per call would cost more
 *   than SQLite's own work.
 * - Every mutation runs in a `BEGIN IMMEDIATE` transaction that reads the session's head and
 *   writes `head+1…n`, so SQLite serialises writers and seqs never interleave; an expected head
 *   is checked inside it. Mutations that arrive while a transaction waits for the lock or runs
 *   share the next one (group commit, ./groupCommit.ts): one lock round and one commit for many
 *   appends; a failing one undoes only itself.
 * - better-sqlite3 is synchronous, so its own busy timeout would freeze the event loop while
 *   another process holds the write lock. The native timeout is kept at 1 ms and the wait is
 *   an asynchronous retry with jittered back-off, up to `busyTimeoutMs`; still busy after that
 *   is `CheckpointBusyError`. `SQLITE_BUSY_SNAPSHOT` cannot happen: no transaction here ever
 *   upgrades from a read to a write.
 * - One connection per checkpointer, used by one fiber at a time: a reader never runs a
 *   statement inside a transaction still open (it would see writes that may yet roll back).
 * - Reads are forward scans in pages, outside any write transaction.
 * - The object store (`lite_agent_objects`, one row per hash for every session) is written in
 *   the transaction of the append whose objects it stores or touches, so they commit together;
 *   the collector's deletes take a transaction of their own, each deciding on the row's touched
 *   time as committed.
 * - Opening (./openDatabase.ts) falls back to read-only for a database this process cannot
 *   write, whose mutations are then refused; the write lock is taken at open only to migrate
 *   (./schema.ts). What SQLite throws becomes the library's errors in ./sqliteErrors.ts.
 */
import { Context, Effect, FiberRef, Layer, Schema, Stream } from "effect"
import * as Checkpointer from "../../core/Checkpointer.js"
import {
  type CheckpointerError,
  CheckpointIntegrityError,
  ConfigurationError,
  SchemaVersionError,
  StorageError
} from "../../core/errors.js"
import { CheckpointerIntegrity, type IntegrityReport } from "../../core/integrity.js"
import { decodeOptions, expecting, Flag, numberAtLeast, oneOf } from "../../core/internal/options.js"
import { storeQuotaFields } from "../../core/internal/storeQuota.js"
import { retryWhileBusy } from "../internal/busy.js"
import { type EventPage, type EventRow, pagedRead, parseRecord, recordOf, type StoredRecord } from "../internal/pagedRead.js"
import { fileWrites, makeCommitWatch } from "./commitWatch.js"
import { makeGroupCommit } from "./groupCommit.js"
import { openDatabase } from "./openDatabase.js"
import { migrate, SCHEMA_VERSION, schemaVersionOf } from "./schema.js"
import { makeSqliteErrors } from "./sqliteErrors.js"

export { SCHEMA_VERSION } from "./schema.js"

export const SqliteCheckpointerOptions = Schema.Struct({
  /** Path of the database file; `":memory:"` for a temporary database private to this process. */
  file: expecting(Schema.String.pipe(Schema.minLength(1)), 'a path or ":memory:"'),
  /** `"normal"` (default) is safe under WAL; `"full"` also survives an OS crash, at some write latency. */
  synchronous: Schema.optional(oneOf("normal", "full")),
  /** How long a writer waits for another process's write lock before `CheckpointBusyError`. Default 5000; must be >= 0. */
  busyTimeoutMs: Schema.optional(numberAtLeast(0)),
  /** Run `PRAGMA quick_check` when opening and refuse a corrupt database. Default false. */
  integrityCheckOnOpen: Schema.optional(Flag),
  ...storeQuotaFields
})
export interface SqliteCheckpointerOptions extends Schema.Schema.Type<typeof SqliteCheckpointerOptions> {}

/** SQLite before this has a WAL-reset bug that can corrupt a database under concurrent writers. */
export const MINIMUM_SQLITE_VERSION = "3.51.3"

const READ_PAGE_ROWS = 512
/** How often a followed database is checked for other connections' commits (one PRAGMA, microseconds). */
const DATA_VERSION_POLL_MS = 20
/**
 * How often a follower looks regardless. The data_version check covers every commit; this is
 * the last resort for what it cannot see (a database file replaced under the open connection,
 * a poller stopped by a defect), so it is rare: each look is a query per follower.
 */
const FOLLOW_POLL_MS = 30_000
const NATIVE_BUSY_TIMEOUT_MS = 1
/**
 * Other writers hold the lock for well under a millisecond, so the first retries come soon
 * (1, 2, 4 ms). Waiters are not woken by other processes' commits: under contention every
 * commit woke every waiter, and each wake-up costs a process tens to hundreds of microseconds
 * of CPU that the lock's holder needed (4 writers, 8 appends in flight: about a fifth fewer appends).
 */
const MAX_BACKOFF_MS = 8

const compareVersions = (a: string, b: string): number => {
  const pa = a.split(".").map(Number)
  const pb = b.split(".").map(Number)
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const diff = (pa[i] ?? 0) - (pb[i] ?? 0)
    if (diff !== 0) return diff
  }
  return 0
}

/** Why this SQLite library cannot be used, or `undefined` when it is recent enough. */
export const sqliteVersionProblem = (version: string): string | undefined =>
  /^\d+\.\d+\.\d+$/.test(version) && compareVersions(version, MINIMUM_SQLITE_VERSION) >= 0
    ? undefined
    : `SQLite ${version} is older than ${MINIMUM_SQLITE_VERSION}, which fixes a WAL-reset bug that can corrupt ` +
      `databases shared by several processes; upgrade better-sqlite3`

const resolveOptions = (input: SqliteCheckpointerOptions) =>
  Effect.map(decodeOptions(SqliteCheckpointerOptions, input, "SQLite checkpointer options"), (options) => ({
    file: options.file,
    synchronous: options.synchronous ?? "normal",
    busyTimeoutMs: options.busyTimeoutMs ?? 5000,
    integrityCheckOnOpen: options.integrityCheckOnOpen ?? false,
    maxStoreBytes: options.maxStoreBytes
  }))

/** A new generation: random, so a deleted and re-created session never reuses one. */
const NEW_GENERATION = "abs(random() % 9007199254740991)"

export const make = (options: SqliteCheckpointerOptions) =>
  Effect.gen(function*() {
    const config = yield* resolveOptions(options)
    const opened = openDatabase(config.file)
    if (opened instanceof StorageError || opened instanceof ConfigurationError) return yield* opened
    const { db, readOnly } = opened
    const { failure, toCheckpointerError } = makeSqliteErrors(db, config.file)
    /** Statements inside a write transaction: the lock is held, so busy cannot happen. */
    const inTransaction = <A>(operation: string, run: () => A): Effect.Effect<A, CheckpointerError> =>
      Effect.try({ try: run, catch: toCheckpointerError(operation) })
    const prepared = (statement: string) => {
      const compiled = db.prepare(statement)
      return () => void compiled.run()
    }
    const rollbackStatement = db.prepare("ROLLBACK")
    /** Statements that change the database, begun so far (see `GroupCommitOptions.writes`). */
    let writes = 0
    const writing = <A>(operation: string, run: () => A) =>
      inTransaction(operation, () => {
        writes++
        return run()
      })
    const transactions = yield* makeGroupCommit({
      busyTimeoutMs: config.busyTimeoutMs,
      maxPauseMs: MAX_BACKOFF_MS,
      failure,
      begin: prepared("BEGIN IMMEDIATE"),
      writes: () => writes,
      commit: prepared("COMMIT"),
      // A failed statement or COMMIT may have ended the transaction already; a failed rollback leaves it to SQLite.
      rollback: () => {
        try {
          if (db.inTransaction) rollbackStatement.run()
        } catch {
          // SQLite rolls back an open transaction when the connection closes.
        }
      }
    })
    // Closed once no transaction is open: a transaction's fiber finishes its statements first.
    yield* Effect.addFinalizer(() => Effect.zipRight(transactions.idle, Effect.sync(() => db.close())))
    /** A read: outside any open write transaction, waiting out another connection's lock. */
    const read = <A>(operation: string, run: () => A) =>
      retryWhileBusy(transactions.statement(operation, run), { timeoutMs: config.busyTimeoutMs, maxPauseMs: MAX_BACKOFF_MS })
    const pragma = (statement: string) => () => db.pragma(statement, { simple: true })

    // Refuse before touching anything: an old library, a newer schema, a corrupt file.
    const version = String(yield* read("open", () => db.prepare("SELECT sqlite_version()").pluck().get()))
    const versionProblem = sqliteVersionProblem(version)
    if (versionProblem !== undefined) return yield* new ConfigurationError({ option: "file", detail: versionProblem })
    yield* read("open", pragma(`busy_timeout = ${NATIVE_BUSY_TIMEOUT_MS}`))
    const found = yield* read("open", () => schemaVersionOf(db))
    if (found > SCHEMA_VERSION) {
      return yield* new SchemaVersionError({ found, supported: SCHEMA_VERSION, detail: config.file })
    }
    const quickCheck: Effect.Effect<IntegrityReport, CheckpointerError> = read("quick_check", () => {
      const rows: unknown = db.pragma("quick_check")
      const findings = Array.isArray(rows) ? rows.map((row: unknown) => String(Object.values(row ?? {})[0])) : [String(rows)]
      const ok = findings.length === 1 && findings[0] === "ok"
      return { ok, detail: ok ? "quick_check: ok" : findings.join("\n") }
    }).pipe(
      // A file too damaged to check at all is a finding too.
      Effect.catchIf((error) => error instanceof CheckpointIntegrityError, (error) => Effect.succeed({ ok: false, detail: error.detail }))
    )
    if (config.integrityCheckOnOpen) {
      const report = yield* quickCheck
      if (!report.ok) {
        return yield* new CheckpointIntegrityError({ detail: `${config.file} failed PRAGMA quick_check: ${report.detail}` })
      }
    }
    yield* read("open", pragma(`synchronous = ${config.synchronous === "full" ? "FULL" : "NORMAL"}`))
    if (readOnly !== undefined) {
      // Nothing can be created or migrated: the tables must be there as this version reads them.
      if (found !== SCHEMA_VERSION) {
        return yield* new StorageError({
          operation: "open",
          code: "SQLITE_READONLY",
          detail: `${config.file} is at schema version ${found}, and bringing it to ${SCHEMA_VERSION} needs writing, but it is ` +
            `read-only here (${readOnly}): open it once where it can be written`
        })
      }
    } else {
      // Changing the journal mode and migrating take the write lock, so they are done only when
      // needed: a process opening a current database never waits for another's writes.
      if (config.file !== ":memory:" && String(yield* read("open", pragma("journal_mode"))) !== "wal") {
        yield* read("open", pragma("journal_mode = WAL"))
      }
      if (found !== SCHEMA_VERSION) {
        yield* transactions.run(
          undefined,
          writing("migrate", () => migrate(db, config.file)).pipe(
            Effect.flatMap((refused) => (refused === undefined ? Effect.void : Effect.fail(refused)))
          )
        )
      }
    }

    // ------------------------------------------------------------------------------------
    // Statements, prepared once the schema exists
    // ------------------------------------------------------------------------------------

    const sql = {
      head: db.prepare<[string], { head: number; generation: number }>("SELECT head, generation FROM lite_agent_sessions WHERE id = ?"),
      insertEvent: db.prepare("INSERT INTO lite_agent_events (session_id, seq, ts, event) VALUES (?, ?, ?, ?)"),
      createSession: db.prepare(
        `INSERT INTO lite_agent_sessions (id, head, mtime, generation) VALUES (?, ?, ?, ${NEW_GENERATION})
         ON CONFLICT (id) DO UPDATE SET head = excluded.head, mtime = excluded.mtime`
      ),
      moveHead: db.prepare("UPDATE lite_agent_sessions SET head = ?, mtime = ? WHERE id = ?"),
      dropEventsAfter: db.prepare("DELETE FROM lite_agent_events WHERE session_id = ? AND seq > ?"),
      // A new generation tells readers paging through the old log that it changed under them.
      truncateHead: db.prepare(`UPDATE lite_agent_sessions SET head = ?, mtime = ?, generation = ${NEW_GENERATION} WHERE id = ?`),
      // The object store: stored once, touched (its time kept the latest) by every later put.
      putObject: db.prepare(
        `INSERT INTO lite_agent_objects (sha256, data, touched_ms) VALUES (?, ?, ?)
         ON CONFLICT (sha256) DO UPDATE SET touched_ms = max(touched_ms, excluded.touched_ms)`
      ),
      touchObject: db.prepare("UPDATE lite_agent_objects SET touched_ms = max(touched_ms, ?) WHERE sha256 = ?"),
      readObject: db.prepare<[string], Uint8Array>("SELECT data FROM lite_agent_objects WHERE sha256 = ?").pluck(),
      // length() of a blob reads its size from the record header, not its pages.
      objectSize: db.prepare<[string], number>("SELECT length(data) FROM lite_agent_objects WHERE sha256 = ?").pluck(),
      listObjects: db.prepare<[], Checkpointer.StoredObject>(
        "SELECT sha256, length(data) AS storedBytes, touched_ms AS touchedMs FROM lite_agent_objects"
      ),
      deleteUntouched: db.prepare<[string, number], Checkpointer.SnapshotInfo>(
        "DELETE FROM lite_agent_objects WHERE sha256 = ? AND touched_ms < ? RETURNING sha256, length(data) AS storedBytes"
      ),
      allEvents: db.prepare<[string], EventRow>("SELECT seq, ts, event FROM lite_agent_events WHERE session_id = ? ORDER BY seq"),
      // Rows as arrays: a page is the replay's hot path, and arrays cost less to make than objects.
      page: db.prepare<[string, number, number], [number, number, string]>(
        "SELECT seq, ts, event FROM lite_agent_events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?"
      ).raw(true),
      beginRead: db.prepare("BEGIN"),
      endRead: db.prepare("COMMIT"),
      logBytes: db.prepare("SELECT SUM(length(CAST(event AS BLOB))) FROM lite_agent_events WHERE session_id = ?").pluck(),
      list: db.prepare<[], { id: string; mtime: number }>("SELECT id, mtime FROM lite_agent_sessions"),
      deleteEvents: db.prepare("DELETE FROM lite_agent_events WHERE session_id = ?"),
      deleteSession: db.prepare("DELETE FROM lite_agent_sessions WHERE id = ?")
    }

    // ------------------------------------------------------------------------------------
    // The driver
    // ------------------------------------------------------------------------------------

    const headOf = (sessionId: string) => sql.head.get(sessionId)?.head ?? 0

    /** A page of the log and the session's version, in one snapshot (a read transaction). */
    const readPage = (sessionId: string, after: number, rows: number): EventPage | CheckpointIntegrityError => {
      sql.beginRead.run()
      let version: { head: number; generation: number } | undefined
      let found: Array<[number, number, string]>
      try {
        version = sql.head.get(sessionId)
        found = sql.page.all(sessionId, after, rows)
      } finally {
        sql.endRead.run()
      }
      const records: Array<StoredRecord> = []
      for (const [seq, ts, text] of found) {
        const record = parseRecord(sessionId, seq, ts, text)
        if (record instanceof CheckpointIntegrityError) return record
        records.push(record)
      }
      return { records, generation: version === undefined ? Checkpointer.NO_GENERATION : String(version.generation), head: version?.head ?? 0 }
    }

    const pageRead = (sessionId: string, after: number, rows: number) =>
      Effect.flatMap(read("read", () => readPage(sessionId, after, rows)), (page) =>
        page instanceof CheckpointIntegrityError ? Effect.fail(page) : Effect.succeed(page))

    const lockedSession = (
      sessionId: string,
      version: { readonly head: number; readonly generation: number } | undefined,
      mtime: number
    ): Checkpointer.LockedSession => ({
      head: version?.head ?? 0,
      generation: version === undefined ? Checkpointer.NO_GENERATION : String(version.generation),
      append: (records) =>
        writing("append", () => {
          for (const record of records) sql.insertEvent.run(sessionId, record.seq, record.ts, JSON.stringify(record.event))
          const newHead = records.at(-1)!.seq
          if (version === undefined || version.head === 0) sql.createSession.run(sessionId, newHead, mtime)
          else sql.moveHead.run(newHead, mtime, sessionId)
        }),
      truncate: (toSeq) =>
        writing("truncate", () => {
          sql.dropEventsAfter.run(sessionId, toSeq)
          sql.truncateHead.run(toSeq, mtime, sessionId)
        }),
      records: () => Stream.fromIterableEffect(inTransaction("read", () => sql.allEvents.all(sessionId))).pipe(
        Stream.mapEffect((row) => {
          const record = recordOf(sessionId, row)
          return record instanceof CheckpointIntegrityError ? Effect.fail(record) : Effect.succeed(record)
        })
      ),
      // In the open transaction: reads outside it wait for it to end.
      firstRecordOf: (other) =>
        Effect.flatMap(inTransaction("read", () => sql.page.all(other, 0, 1)[0]), (row) => {
          if (row === undefined) return Effect.succeed(undefined)
          const record = parseRecord(other, row[0], row[1], row[2])
          return record instanceof CheckpointIntegrityError ? Effect.fail(record) : Effect.succeed(record)
        }),
      remove: writing("delete", () => {
        sql.deleteEvents.run(sessionId)
        sql.deleteSession.run(sessionId)
      })
    })

    /** Every mutation of a database open for reading only, refused before it waits for anything. */
    const writesRefused = new StorageError({
      operation: "write",
      code: "SQLITE_READONLY",
      detail: `${config.file} is open for reading only (${readOnly}): appends, truncates and deletes are refused; ` +
        `make the file and its directory writable by this process and open it again`
    })

    /**
     * Whether the running effect is a body of this connection's open write transaction (a
     * `withSession` holder's, which stores and touches the objects its append references): the
     * object store's statements then run in that transaction — committed with the append, as
     * durably — and anywhere else in a transaction, or a read, of their own.
     */
    const inHolder = FiberRef.unsafeMake(false)
    const objectWrite = <A>(operation: string, run: () => A): Effect.Effect<A, CheckpointerError> =>
      readOnly !== undefined ? Effect.fail(writesRefused) : Effect.flatMap(FiberRef.get(inHolder), (inside) =>
        inside ? writing(operation, run) : transactions.run(undefined, writing(operation, run)))
    const objectRead = <A>(operation: string, run: () => A): Effect.Effect<A, CheckpointerError> =>
      Effect.flatMap(FiberRef.get(inHolder), (inside) => (inside ? inTransaction(operation, run) : read(operation, run)))
    const asBuffer = (data: Uint8Array) => Buffer.from(data.buffer, data.byteOffset, data.byteLength)

    const objects: Checkpointer.ObjectStore = {
      put: (added, nowMs) =>
        added.length === 0 ? Effect.void : objectWrite("store objects", () => {
          for (const { data, sha256 } of added) sql.putObject.run(sha256, asBuffer(data), nowMs)
        }),
      touch: (hashes, nowMs) =>
        hashes.length === 0 ? Effect.succeed([]) : objectWrite("touch objects", () =>
          hashes.filter((sha256) => sql.touchObject.run(nowMs, sha256).changes === 0)),
      read: (sha256) => objectRead("read object", () => sql.readObject.get(sha256)),
      sizes: (hashes) =>
        objectRead("object sizes", () =>
          [...new Set(hashes)].flatMap((sha256) => {
            const storedBytes = sql.objectSize.get(sha256)
            return storedBytes === undefined ? [] : [{ sha256, storedBytes }]
          })),
      list: objectRead("list objects", () => sql.listObjects.all()),
      // One transaction per call (the collector bounds how many): each delete decided with the row's touched time as committed.
      deleteUntouched: (hashes, cutoffMs) =>
        hashes.length === 0 ? Effect.succeed([]) : objectWrite("delete objects", () =>
          hashes.flatMap((sha256) => sql.deleteUntouched.all(sha256, cutoffMs)))
    }

    const driver: Checkpointer.CheckpointerDriver = {
      withSession: (sessionId, use) =>
        readOnly !== undefined ? Effect.fail(writesRefused) : transactions.run(
          sessionId,
          // One step: the head read and the holder made together (the body runs inside the lock).
          Effect.suspend(() => {
            let version: { head: number; generation: number } | undefined
            try {
              version = sql.head.get(sessionId)
            } catch (error) {
              return Effect.fail(toCheckpointerError("read head")(error))
            }
            return Effect.locally(use(lockedSession(sessionId, version, Date.now())), inHolder, true)
          })
        ),
      read: (sessionId, sinceSeq) =>
        pagedRead({
          sessionId,
          sinceSeq,
          pageRows: READ_PAGE_ROWS,
          page: (after) => pageRead(sessionId, after, READ_PAGE_ROWS),
          head: read("read", () => headOf(sessionId))
        }),
      readPage: (sessionId, sinceSeq, maxRecords) => pageRead(sessionId, sinceSeq, Math.min(maxRecords, READ_PAGE_ROWS)),
      head: (sessionId) => read("head", () => headOf(sessionId)),
      version: (sessionId) =>
        read("version", () => {
          const row = sql.head.get(sessionId)
          return row === undefined
            ? { head: 0, generation: Checkpointer.NO_GENERATION }
            : { head: row.head, generation: String(row.generation) }
        }),
      logBytes: (sessionId) => read("stats", () => Number(sql.logBytes.get(sessionId) ?? 0)),
      list: read("list", () => sql.list.all().map((row) => ({ id: row.id, mtime: new Date(row.mtime) }))),
      objects
    }

    // Other connections' commits wake the followers of the sessions they changed (./commitWatch.ts).
    const watch = yield* makeCommitWatch({
      dataVersion: () => Number(db.pragma("data_version", { simple: true })),
      versionOf: (sessionId) => {
        const row = sql.head.get(sessionId)
        return row === undefined ? undefined : `${row.head}:${row.generation}`
      },
      read,
      pollMs: DATA_VERSION_POLL_MS,
      ...(config.file === ":memory:" ? {} : { hints: fileWrites(config.file) })
    })
    const service = yield* Checkpointer.make({ ...driver, watch, followPollMs: FOLLOW_POLL_MS }, { maxStoreBytes: config.maxStoreBytes })
    return { service, integrity: { checkIntegrity: quickCheck } }
  })

export const layer = (
  options: SqliteCheckpointerOptions
): Layer.Layer<Checkpointer.Checkpointer | CheckpointerIntegrity, CheckpointerError | ConfigurationError> =>
  Layer.scopedContext(
    Effect.map(make(options), ({ integrity, service }) =>
      Context.make(Checkpointer.Checkpointer, service).pipe(Context.add(CheckpointerIntegrity, integrity)))
  )
