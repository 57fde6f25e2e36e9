/**
 * The SQLite backend (WAL): one machine, many processes, optimistic concurrency.
 *
 * - Every mutation is one `BEGIN IMMEDIATE` transaction that reads the session's head and
 *   writes `head+1…n`, so SQLite serialises writers and seqs never interleave; an expected
 *   head is checked inside it.
 * - better-sqlite3 is synchronous, so its own busy timeout would freeze the event loop while
 *   another process holds the write lock. The native timeout is kept at 1 ms and the wait is
 *   an asynchronous retry with jittered back-off, up to `busyTimeoutMs`; still busy after that
 *   is `CheckpointBusyError`. `SQLITE_BUSY_SNAPSHOT` cannot happen: no transaction here ever
 *   upgrades from a read to a write.
 * - Reads are forward scans in pages, outside any write transaction.
 */
import { SqliteClient } from "@effect/sql-sqlite-node"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { Context, Duration, Effect, Layer, Option, PubSub, RcRef, Schema, Scope, Stream } from "effect"
import { errnoOf, messageOf } from "../../core/causes.js"
import * as Checkpointer from "../../core/Checkpointer.js"
import {
  type CheckpointerError,
  CheckpointIntegrityError,
  ConfigurationError,
  SchemaVersionError,
  StorageError
} from "../../core/errors.js"
import { CheckpointerIntegrity, type IntegrityReport } from "../../core/integrity.js"
import { decodeOptions, expecting, Flag, numberAtLeast, oneOf } from "../../core/options.js"
import { Busy, retryWhileBusy } from "../busy.js"
import { type EventRow, type PagedEventRow, pagedRead, recordOf } from "../pagedRead.js"

export const SqliteCheckpointerOptions = Schema.Struct({
  /** Path of the database file; `":memory:"` for a temporary database private to this process. */
  file: expecting(Schema.String.pipe(Schema.minLength(1)), 'a path or ":memory:"'),
  /** `"normal"` (default) is safe under WAL; `"full"` also survives an OS crash, at some write latency. */
  synchronous: Schema.optional(oneOf("normal", "full")),
  /** How long a writer waits for another process's write lock before `CheckpointBusyError`. Default 5000; must be >= 0. */
  busyTimeoutMs: Schema.optional(numberAtLeast(0)),
  /** Run `PRAGMA quick_check` when opening and refuse a corrupt database. Default false. */
  integrityCheckOnOpen: Schema.optional(Flag)
})
export interface SqliteCheckpointerOptions extends Schema.Schema.Type<typeof SqliteCheckpointerOptions> {}

/** The schema version this code writes and reads (`PRAGMA user_version`). */
export const SCHEMA_VERSION = 2
/** SQLite before this has a WAL-reset bug that can corrupt a database under concurrent writers. */
export const MINIMUM_SQLITE_VERSION = "3.51.3"

const READ_PAGE_ROWS = 512
/** How often a followed database is checked for other connections' commits (one PRAGMA, microseconds). */
const DATA_VERSION_POLL_MS = 20
/** How often a follower looks regardless: the data_version check already covers every commit. */
const FOLLOW_POLL_MS = 2000
const NATIVE_BUSY_TIMEOUT_MS = 1
/** Other writers hold the lock for well under a millisecond: poll often, but never spin. */
const MAX_BACKOFF_MS = 4

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
    integrityCheckOnOpen: options.integrityCheckOnOpen ?? false
  }))

const sqliteCode = (error: unknown): string | undefined => errnoOf(error instanceof SqlError ? error.cause : error)
const isBusy = (error: unknown) => {
  const code = sqliteCode(error)
  return code === "SQLITE_BUSY" || code === "SQLITE_BUSY_SNAPSHOT" || code === "SQLITE_BUSY_RECOVERY" ||
    code === "SQLITE_LOCKED"
}
const isCorrupt = (error: unknown) => {
  const code = sqliteCode(error)
  return code === "SQLITE_CORRUPT" || code === "SQLITE_NOTADB"
}
const describe = (error: unknown) => {
  const cause = error instanceof SqlError ? error.cause : error
  return messageOf(cause)
}

/** Map what SQLite throws to the library's errors. */
const toCheckpointerError = (operation: string) => (error: unknown): CheckpointerError =>
  isCorrupt(error)
    ? new CheckpointIntegrityError({ detail: `${operation}: ${describe(error)}` })
    : new StorageError({ operation, detail: describe(error), cause: error })

const migrations = Migrator.fromRecord({
  "0001_sessions_and_events": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.all([
      sql`CREATE TABLE lite_agent_sessions (
        id TEXT PRIMARY KEY NOT NULL,
        head INTEGER NOT NULL,
        mtime INTEGER NOT NULL,
        generation INTEGER NOT NULL
      ) STRICT`,
      sql`CREATE TABLE lite_agent_events (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        ts INTEGER NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
      ) STRICT, WITHOUT ROWID`
    ], { discard: true })),
  // The snapshot store: blobs written in the same transaction as the events that reference them.
  "0002_snapshot_blobs": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`CREATE TABLE lite_agent_blobs (
      session_id TEXT NOT NULL,
      sha256 TEXT NOT NULL,
      data BLOB NOT NULL,
      PRIMARY KEY (session_id, sha256)
    ) STRICT, WITHOUT ROWID`)
})

/**
 * The connection of lite-agent's own write transaction. Private on purpose: @effect/sql's
 * `TransactionConnection` is shared by every SQL client, and an application's transaction
 * must never capture (or be captured by) the checkpointer's statements.
 */
class WriteTransaction extends Context.Tag("@lite-agent/backends/sqlite/WriteTransaction")<
  WriteTransaction,
  readonly [connection: Connection, depth: number]
>() {}

/** Run `effect` as if no application SQL transaction were in progress around it. */
const outsideCallerTransactions = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E> =>
  Effect.mapInputContext(effect, (context: Context.Context<never>) => Context.omit(SqlClient.TransactionConnection)(context))

const LIST_BLOBS = "SELECT sha256, length(data) AS storedBytes FROM lite_agent_blobs WHERE session_id = ?"

export const make = (options: SqliteCheckpointerOptions) =>
  Effect.gen(function*() {
    const config = yield* resolveOptions(options)
    const client = yield* SqliteClient.make({ filename: config.file, disableWAL: true }).pipe(
      Effect.catchAllDefect((defect) =>
        Effect.fail(new ConfigurationError({ option: "file", detail: `cannot open ${config.file}: ${describe(defect)}` }))
      )
    )
    const sql: SqlClient.SqlClient = client
    const pragma = (statement: string) => sql.unsafe<Record<string, unknown>>(statement)
    /**
     * Run `attempt` again while SQLite reports it busy — another process writing, creating the
     * schema, switching to WAL or resetting the WAL — pausing asynchronously with jittered
     * exponential back-off (the event loop keeps running), up to `busyTimeoutMs`; then
     * `CheckpointBusyError` — the wait every backend shares (../busy.ts). Any other SQL failure
     * becomes the library's own error.
     */
    const whileBusy = <A, E>(attempt: Effect.Effect<A, E | SqlError>, operation: string, sessionId?: string) =>
      retryWhileBusy(
        Effect.catchIf(
          attempt,
          (error): error is SqlError => error instanceof SqlError,
          (error) =>
            Effect.fail(
              isBusy(error)
                ? new Busy({ detail: `${operation}: another connection held the database lock` })
                : toCheckpointerError(operation)(error)
            )
        ),
        { timeoutMs: config.busyTimeoutMs, maxPauseMs: MAX_BACKOFF_MS, sessionId }
      )
    const readStatement = <A>(statement: Effect.Effect<A, SqlError>, operation: string) =>
      whileBusy<A, never>(statement, operation)
    const onOpen = readStatement

    // Refuse before touching anything: an old library, a newer schema, a corrupt file.
    const version = (yield* onOpen(sql<{ version: string }>`SELECT sqlite_version() AS version`, "open"))[0]?.version ?? "unknown"
    const versionProblem = sqliteVersionProblem(version)
    if (versionProblem !== undefined) return yield* new ConfigurationError({ option: "file", detail: versionProblem })
    yield* onOpen(pragma(`PRAGMA busy_timeout = ${NATIVE_BUSY_TIMEOUT_MS}`), "open")
    const found = Number(Object.values((yield* onOpen(pragma("PRAGMA user_version"), "open"))[0] ?? {})[0] ?? 0)
    if (found > SCHEMA_VERSION) {
      return yield* new SchemaVersionError({ found, supported: SCHEMA_VERSION, detail: config.file })
    }
    const quickCheck: Effect.Effect<IntegrityReport, CheckpointerError> = pragma("PRAGMA quick_check").pipe(
      Effect.map((rows) => {
        const findings = rows.map((row) => String(Object.values(row)[0]))
        const ok = findings.length === 1 && findings[0] === "ok"
        return { ok, detail: ok ? "quick_check: ok" : findings.join("\n") }
      }),
      Effect.catchAll((error) =>
        isCorrupt(error)
          ? Effect.succeed({ ok: false, detail: describe(error) })
          : Effect.fail(toCheckpointerError("quick_check")(error))
      )
    )
    if (config.integrityCheckOnOpen) {
      const report = yield* quickCheck
      if (!report.ok) {
        return yield* new CheckpointIntegrityError({ detail: `${config.file} failed PRAGMA quick_check: ${report.detail}` })
      }
    }
    if (config.file !== ":memory:") yield* onOpen(pragma("PRAGMA journal_mode = WAL"), "open")
    yield* onOpen(pragma(`PRAGMA synchronous = ${config.synchronous === "full" ? "FULL" : "NORMAL"}`), "open")

    // ------------------------------------------------------------------------------------
    // BEGIN IMMEDIATE transactions that wait for other writers without blocking the loop
    // ------------------------------------------------------------------------------------

    const immediateTransaction = SqlClient.makeWithTransaction({
      transactionTag: WriteTransaction,
      spanAttributes: [["db.system.name", "sqlite"]],
      acquireConnection: Effect.flatMap(Scope.make(), (scope) =>
        Effect.map(Scope.extend(sql.reserve, scope), (connection) => [scope, connection] as const)),
      begin: (connection) => connection.executeUnprepared("BEGIN IMMEDIATE", [], undefined),
      savepoint: (connection, id) => connection.executeUnprepared(`SAVEPOINT lite_agent_${id}`, [], undefined),
      commit: (connection) => connection.executeUnprepared("COMMIT", [], undefined),
      // When BEGIN itself failed (busy), there is nothing to roll back: keep the BEGIN error.
      rollback: (connection) =>
        connection.executeUnprepared("ROLLBACK", [], undefined).pipe(
          Effect.catchIf((error) => describe(error).includes("no transaction is active"), () => Effect.succeed([]))
        ),
      rollbackSavepoint: (connection, id) =>
        connection.executeUnprepared(`ROLLBACK TO SAVEPOINT lite_agent_${id}`, [], undefined)
    })

    /** The connection of the write transaction the current fiber is in. */
    const transactionConnection = Effect.flatMap(
      Effect.serviceOption(WriteTransaction),
      Option.match({
        onNone: () => Effect.dieMessage("lite-agent: a write ran outside its transaction"),
        onSome: ([connection]) => Effect.succeed(connection)
      })
    )

    /**
     * Run `body` in one BEGIN IMMEDIATE transaction. While another process holds the write
     * lock, wait asynchronously (jittered back-off) and try again, up to `busyTimeoutMs`.
     */
    const writeTransaction = <A, E>(sessionId: string | undefined, body: Effect.Effect<A, E>) =>
      whileBusy(
        immediateTransaction(body).pipe(
          // A failed COMMIT surfaces as a defect from @effect/sql; keep SQLite's failures typed.
          Effect.catchAllDefect((defect) => (defect instanceof SqlError ? Effect.fail(defect) : Effect.die(defect)))
        ),
        "write",
        sessionId
      )

    // The schema, created by the migrations in one immediate transaction, then marked.
    yield* writeTransaction(
      undefined,
      Effect.gen(function*() {
        const current = Number(Object.values((yield* pragma("PRAGMA user_version"))[0] ?? {})[0] ?? 0)
        if (current > SCHEMA_VERSION) {
          return yield* new SchemaVersionError({ found: current, supported: SCHEMA_VERSION, detail: config.file })
        }
        yield* Migrator.make({})({ loader: migrations, table: "lite_agent_migrations" })
        if (current < SCHEMA_VERSION) yield* pragma(`PRAGMA user_version = ${SCHEMA_VERSION}`)
      }).pipe(
        Effect.provideService(SqlClient.SqlClient, sql),
        // The migrator speaks through the SQL client: point it at this transaction's connection.
        (migration) =>
          Effect.flatMap(transactionConnection, (connection) =>
            Effect.provideService(migration, SqlClient.TransactionConnection, [connection, 1] as const)),
        Effect.mapError((error) =>
          error instanceof SchemaVersionError || error instanceof SqlError
            ? error
            : new StorageError({ operation: "migrate", detail: String(error), cause: error })
        )
      )
    ).pipe(Effect.mapError((error) => (error instanceof SqlError ? toCheckpointerError("migrate")(error) : error)))

    // ------------------------------------------------------------------------------------
    // The driver
    // ------------------------------------------------------------------------------------

    const now = Effect.clockWith((clock) => clock.currentTimeMillis)
    const headOf = (sessionId: string) =>
      Effect.map(
        sql<{ head: number }>`SELECT head FROM lite_agent_sessions WHERE id = ${sessionId}`,
        (rows) => rows[0]?.head ?? 0
      )

    /**
     * Statements on the transaction's own connection, skipping the statement compiler:
     * appends are the hot path, and these few statements never change shape.
     */
    const onConnection = Effect.map(transactionConnection, (connection) =>
      (statement: string, params: ReadonlyArray<unknown>) => connection.execute(statement, params, undefined))

    const driver: Checkpointer.CheckpointerDriver = {
      withSession: (sessionId, use) =>
        writeTransaction(
          sessionId,
          Effect.gen(function*() {
            const execute = yield* onConnection
            const statements = <A>(effect: Effect.Effect<A, SqlError>, operation: string) =>
              Effect.mapError(effect, toCheckpointerError(operation))
            const rows = yield* statements(
              execute("SELECT head FROM lite_agent_sessions WHERE id = ?", [sessionId]),
              "read head"
            )
            const head = Number((rows[0] as { head?: number } | undefined)?.head ?? 0)
            return yield* use({
              head,
              append: (records) =>
                statements(
                  Effect.gen(function*() {
                    for (const record of records) {
                      yield* execute(
                        "INSERT INTO lite_agent_events (session_id, seq, ts, event) VALUES (?, ?, ?, ?)",
                        [sessionId, record.seq, record.ts, JSON.stringify(record.event)]
                      )
                    }
                    const newHead = records.at(-1)!.seq
                    const mtime = yield* now
                    yield* head === 0
                      ? execute(
                        `INSERT INTO lite_agent_sessions (id, head, mtime, generation)
                         VALUES (?, ?, ?, abs(random() % 9007199254740991))
                         ON CONFLICT (id) DO UPDATE SET head = excluded.head, mtime = excluded.mtime`,
                        [sessionId, newHead, mtime]
                      )
                      : execute("UPDATE lite_agent_sessions SET head = ?, mtime = ? WHERE id = ?", [newHead, mtime, sessionId])
                  }),
                  "append"
                ),
              truncate: (toSeq) =>
                statements(
                  Effect.gen(function*() {
                    const mtime = yield* now
                    yield* execute("DELETE FROM lite_agent_events WHERE session_id = ? AND seq > ?", [sessionId, toSeq])
                    // A new generation tells readers paging through the old log that it changed under them.
                    yield* execute(
                      `UPDATE lite_agent_sessions SET head = ?, mtime = ?, generation = abs(random() % 9007199254740991)
                       WHERE id = ?`,
                      [toSeq, mtime, sessionId]
                    )
                  }),
                  "truncate"
                ),
              putBlobs: (blobs) =>
                statements(
                  Effect.forEach(blobs, (blob) =>
                    execute(
                      "INSERT INTO lite_agent_blobs (session_id, sha256, data) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                      [sessionId, blob.sha256, Buffer.from(blob.data.buffer, blob.data.byteOffset, blob.data.byteLength)]
                    ), { discard: true }),
                  "store snapshot"
                ),
              missingBlobs: (hashes) =>
                statements(
                  Effect.filter(hashes, (sha256) =>
                    Effect.map(
                      execute("SELECT 1 AS found FROM lite_agent_blobs WHERE session_id = ? AND sha256 = ?", [sessionId, sha256]),
                      (rows) => rows.length === 0
                    )),
                  "check snapshots"
                ),
              deleteBlobs: (hashes) =>
                statements(
                  Effect.forEach(hashes, (sha256) =>
                    execute("DELETE FROM lite_agent_blobs WHERE session_id = ? AND sha256 = ?", [sessionId, sha256]), {
                    discard: true
                  }),
                  "delete snapshots"
                ),
              storedBlobs: statements(
                Effect.map(execute(LIST_BLOBS, [sessionId]), (rows) => rows as ReadonlyArray<Checkpointer.SnapshotInfo>),
                "list snapshots"
              ),
              records: Stream.fromIterableEffect(statements(
                execute("SELECT seq, ts, event FROM lite_agent_events WHERE session_id = ? ORDER BY seq", [sessionId]),
                "read"
              )).pipe(Stream.mapEffect((row) => {
                const record = recordOf(sessionId, row as EventRow)
                return record instanceof CheckpointIntegrityError ? Effect.fail(record) : Effect.succeed(record)
              }))
            })
          })
        ),
      read: (sessionId, sinceSeq) =>
        pagedRead({
          sessionId,
          sinceSeq,
          pageRows: READ_PAGE_ROWS,
          page: (after) =>
            outsideCallerTransactions(readStatement(
              sql<PagedEventRow>`SELECT e.seq AS seq, e.ts AS ts, e.event AS event, s.head AS head, s.generation AS generation
                FROM lite_agent_events e JOIN lite_agent_sessions s ON s.id = e.session_id
                WHERE e.session_id = ${sessionId} AND e.seq > ${after}
                ORDER BY e.seq LIMIT ${READ_PAGE_ROWS}`,
              "read"
            )),
          head: outsideCallerTransactions(readStatement(headOf(sessionId), "read"))
        }),
      head: (sessionId) => readStatement(headOf(sessionId), "head"),
      version: (sessionId) =>
        Effect.map(
          readStatement(
            sql<{ head: number; generation: number }>`SELECT head, generation FROM lite_agent_sessions WHERE id = ${sessionId}`,
            "version"
          ),
          (rows) => {
            const row = rows[0]
            return row === undefined
              ? { head: 0, generation: Checkpointer.NO_GENERATION }
              : { head: row.head, generation: String(row.generation) }
          }
        ),
      readBlob: (sessionId, sha256) =>
        Effect.map(
          readStatement(
            sql<{ data: Uint8Array }>`SELECT data FROM lite_agent_blobs WHERE session_id = ${sessionId} AND sha256 = ${sha256}`,
            "read snapshot"
          ),
          (rows) => rows[0]?.data
        ),
      logBytes: (sessionId) =>
        Effect.map(
          readStatement(
            sql<{ bytes: number | null }>`SELECT SUM(length(CAST(event AS BLOB))) AS bytes FROM lite_agent_events
              WHERE session_id = ${sessionId}`,
            "stats"
          ),
          (rows) => Number(rows[0]?.bytes ?? 0)
        ),
      listBlobs: (sessionId) => readStatement(sql.unsafe<Checkpointer.SnapshotInfo>(LIST_BLOBS, [sessionId]), "list snapshots"),
      list: Effect.map(
        readStatement(sql<{ id: string; mtime: number }>`SELECT id, mtime FROM lite_agent_sessions`, "list"),
        (rows) => rows.map((row) => ({ id: row.id, mtime: new Date(row.mtime) }))
      ),
      delete: (sessionId) =>
        writeTransaction(
          sessionId,
          Effect.flatMap(onConnection, (execute) =>
            Effect.mapError(
              Effect.all([
                execute("DELETE FROM lite_agent_events WHERE session_id = ?", [sessionId]),
                execute("DELETE FROM lite_agent_blobs WHERE session_id = ?", [sessionId]),
                execute("DELETE FROM lite_agent_sessions WHERE id = ?", [sessionId])
              ], { discard: true }),
              toCheckpointerError("delete")
            ))
        )
    }

    /**
     * Wake-ups for followers: `PRAGMA data_version` changes when another connection (another
     * process, or another checkpointer on the file) commits. One poller per checkpointer,
     * while anyone follows; every change wakes every follower, each of which checks its own
     * session's version — a query of one row.
     */
    const dataVersion = Effect.map(
      outsideCallerTransactions(readStatement(pragma("PRAGMA data_version"), "watch")),
      (rows) => Number(Object.values(rows[0] ?? {})[0] ?? 0)
    )
    const commits = yield* RcRef.make({
      acquire: Effect.gen(function*() {
        const hub = yield* Effect.acquireRelease(PubSub.sliding<void>(1), PubSub.shutdown)
        let last = yield* Effect.orElseSucceed(dataVersion, () => -1)
        yield* Effect.forkScoped(
          Effect.forever(
            Effect.zipRight(
              Effect.sleep(Duration.millis(DATA_VERSION_POLL_MS)),
              Effect.flatMap(Effect.orElseSucceed(dataVersion, () => last), (current) => {
                if (current === last) return Effect.void
                last = current
                return PubSub.publish(hub, undefined)
              })
            )
          )
        )
        return hub
      })
    })
    const watch = (_sessionId: string): Stream.Stream<unknown> =>
      Stream.unwrapScoped(Effect.map(Effect.flatMap(RcRef.get(commits), PubSub.subscribe), (subscription) => Stream.fromQueue(subscription)))

    const isolated: Checkpointer.CheckpointerDriver = {
      watch,
      followPollMs: FOLLOW_POLL_MS,
      withSession: (sessionId, use) => outsideCallerTransactions(driver.withSession(sessionId, use)),
      read: driver.read,
      head: (sessionId) => outsideCallerTransactions(driver.head(sessionId)),
      version: (sessionId) => outsideCallerTransactions(driver.version(sessionId)),
      list: outsideCallerTransactions(driver.list),
      delete: (sessionId) => outsideCallerTransactions(driver.delete(sessionId)),
      readBlob: (sessionId, sha256) => outsideCallerTransactions(driver.readBlob(sessionId, sha256)),
      listBlobs: (sessionId) => outsideCallerTransactions(driver.listBlobs(sessionId)),
      logBytes: (sessionId) => outsideCallerTransactions(driver.logBytes(sessionId))
    }
    const service = yield* Checkpointer.make(isolated)
    return { service, integrity: { checkIntegrity: quickCheck } }
  })

export const layer = (
  options: SqliteCheckpointerOptions
): Layer.Layer<Checkpointer.Checkpointer | CheckpointerIntegrity, CheckpointerError | ConfigurationError> =>
  Layer.scopedContext(
    Effect.map(make(options), ({ integrity, service }) =>
      Context.make(Checkpointer.Checkpointer, service).pipe(Context.add(CheckpointerIntegrity, integrity)))
  ).pipe(Layer.provide(Reactivity.layer))
