/**
 * The PostgreSQL backend: sessions shared by many processes on many machines.
 *
 * - Every mutation is one transaction (READ COMMITTED) on a connection of its own that first
 *   locks the session's row (`SELECT … FOR UPDATE`): writers of one session queue on that row
 *   lock in the server, writers of different sessions never wait for each other. A session
 *   without a row gets one (`INSERT … ON CONFLICT DO NOTHING`, which waits for a concurrent
 *   creator) before the lock is taken; a transaction that ends up writing nothing rolls back,
 *   so checking an expected head never creates a session. With the lock held, every statement
 *   sees the latest committed state, so no serialization failure can occur.
 * - The lock wait is bounded in the server (`lock_timeout` = `busyTimeoutMs`), then
 *   `CheckpointBusyError`; the wait never blocks the event loop.
 * - Appends and truncates `pg_notify` a change (schema, session, head, generation) in the same
 *   transaction, delivered on commit: the live feed (`changes`).
 * - Reads page by seq outside any transaction; each page carries the session's generation, and a
 *   read that finds it changed (a truncate, or a delete and re-creation) fails with
 *   `CheckpointConflictError` instead of mixing two logs.
 * - Tables live in a schema of their own (default `lite_agent`), created by migrations in one
 *   transaction under an advisory lock, so processes starting together on an empty database
 *   wait for each other; `lite_agent_meta` holds the schema version.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { PgClient } from "@effect/sql-pg"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { Context, Duration, Effect, Exit, Layer, PubSub, RcRef, Redacted, Schedule, Schema, type Scope, Stream } from "effect"
import { messageOf } from "../../core/causes.js"
import * as Checkpointer from "../../core/Checkpointer.js"
import {
  CheckpointBusyError,
  type CheckpointerError,
  CheckpointIntegrityError,
  ConfigurationError,
  SchemaVersionError,
  StorageError
} from "../../core/errors.js"
import { CheckpointerIntegrity, type IntegrityReport } from "../../core/integrity.js"
import { decodeOptions, expecting, NonEmptyString, numberAtLeast, PositiveInteger } from "../../core/options.js"
import { Busy, retryWhileBusy } from "../busy.js"
import { type EventRow, pagedRead, pageOfJoinedRows, recordOf } from "../pagedRead.js"

const Identifier = expecting(
  Schema.String.pipe(Schema.pattern(/^[A-Za-z_][A-Za-z0-9_]{0,62}$/)),
  "a PostgreSQL identifier (letters, digits and _, not starting with a digit, at most 63)"
)
const Port = expecting(Schema.Number.pipe(Schema.int(), Schema.between(1, 65535)), "a port number (1-65535)")

/** Where the tables live and how long a writer waits; shared by both ways of building the layer. */
const StorageFields = {
  /** The PostgreSQL schema holding the tables. Default `"lite_agent"`; created when missing. */
  schema: Schema.optional(Identifier),
  /** How long a writer waits for another writer's lock on the same session before `CheckpointBusyError`. Default 5000. */
  busyTimeoutMs: Schema.optional(numberAtLeast(0))
}

export const PostgresClientCheckpointerOptions = Schema.Struct(StorageFields)
export interface PostgresClientCheckpointerOptions extends Schema.Schema.Type<typeof PostgresClientCheckpointerOptions> {}

/** Why `url` is not a PostgreSQL URL, without quoting it (it may hold the password); undefined when it is one. */
const urlProblem = (url: string): string | undefined => {
  if (url.length === 0) return "expected a non-empty string"
  let protocol: string
  try {
    protocol = new URL(url).protocol
  } catch {
    return "is not a URL (expected postgres://user:password@host:port/database)"
  }
  return protocol === "postgres:" || protocol === "postgresql:"
    ? undefined
    : `expected a postgres:// URL, got one starting with ${protocol}//`
}

const PostgresUrl = Schema.String.pipe(Schema.filter((url) => urlProblem(url) ?? true))

export const PostgresCheckpointerOptions = Schema.Struct({
  /** `postgres://user:password@host:port/database`; the separate options below override its parts. */
  url: Schema.optional(PostgresUrl),
  host: Schema.optional(NonEmptyString),
  port: Schema.optional(Port),
  database: Schema.optional(NonEmptyString),
  user: Schema.optional(NonEmptyString),
  /** Never quoted in errors or logs. */
  password: Schema.optional(expecting(Schema.String, "a string")),
  /** Use TLS. Default false. */
  ssl: Schema.optional(expecting(Schema.Boolean, "true or false")),
  /** Connections in this process's pool. Default 10. */
  maxConnections: Schema.optional(PositiveInteger),
  /** How long connecting may take before the call fails with `StorageError`. Default 10000. */
  connectTimeoutMs: Schema.optional(PositiveInteger),
  /** Shown in `pg_stat_activity`. Default `"lite-agent"`. */
  applicationName: Schema.optional(NonEmptyString),
  ...StorageFields
})
export interface PostgresCheckpointerOptions extends Schema.Schema.Type<typeof PostgresCheckpointerOptions> {}

/** Options whose values never appear in an error. */
const SECRETS = ["url", "password"]

/** The schema version this code writes and reads (`lite_agent_meta`). */
export const SCHEMA_VERSION = 1

/** The channel every backend instance notifies on; the payload names the schema. */
export const CHANGES_CHANNEL = "lite_agent_changes"

/** A change to a session, as the live feed reports it. */
export type SessionChange =
  | {
    readonly kind: "append" | "truncate" | "delete"
    readonly sessionId: string
    /** The head after the change (0 after a delete). */
    readonly head: number
    /** The generation after the change (`NO_GENERATION` after a delete). */
    readonly generation: string
  }
  | {
    /**
     * The feed's connection was lost and is back: changes made in between were not heard.
     * Re-check what you follow.
     */
    readonly kind: "reconnected"
  }

/** The live feed: every change any process commits to this schema, as it commits. */
export class PostgresChanges extends Context.Tag("@lite-agent/backends/postgres/PostgresChanges")<
  PostgresChanges,
  { readonly changes: Stream.Stream<SessionChange> }
>() {}

/** The feed notifies itself this often; hearing nothing at all for three times as long means its connection is gone. */
const FEED_HEARTBEAT_MS = 2000
/** Changes a feed subscriber may fall behind by before the oldest are dropped (it then gets `reconnected`-like gaps). */
const FEED_BUFFER = 10_000

const READ_PAGE_ROWS = 1000
/** How often a follower looks regardless of notifications (a lost one is caught by this). */
const FOLLOW_POLL_MS = 2000
const DEFAULT_SCHEMA = "lite_agent"

/** A random generation, as an integer that survives a round trip through JavaScript numbers. */
const newGeneration = () => Math.floor(Math.random() * Number.MAX_SAFE_INTEGER) + 1

// ---------------------------------------------------------------------------------------
// PostgreSQL's failures, as the library's errors
// ---------------------------------------------------------------------------------------

const pgErrorOf = (error: unknown): { readonly code?: string; readonly message: string } => {
  const cause = error instanceof SqlError ? error.cause : error
  const code = typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined
  return { ...(code === undefined ? {} : { code }), message: messageOf(cause) }
}

const LOCK_NOT_AVAILABLE = "55P03"
/** Cannot happen with the row lock held, but a retry is the right answer if it ever does. */
const RETRYABLE = new Set(["40001", "40P01"])
const DATA_CORRUPTED = new Set(["XX001", "XX002"])

const toCheckpointerError = (operation: string) => (error: unknown): CheckpointerError => {
  const { code, message } = pgErrorOf(error)
  if (code !== undefined && DATA_CORRUPTED.has(code)) {
    return new CheckpointIntegrityError({ detail: `${operation}: ${message}` })
  }
  return new StorageError({ operation, detail: code === undefined ? message : `${message} (SQLSTATE ${code})`, cause: error })
}

/** Failures of the connection itself (or authentication), as opposed to a statement's. */
const connectError = (error: unknown): CheckpointerError | ConfigurationError => {
  const { code, message } = pgErrorOf(error)
  switch (code) {
    case "28P01":
    case "28000":
      return new ConfigurationError({ option: "password", detail: `the server refused the credentials: ${message}` })
    case "3D000":
      return new ConfigurationError({ option: "database", detail: message })
    default:
      return new StorageError({ operation: "connect", detail: message, cause: error })
  }
}

const quoteIdentifier = (name: string) => `"${name.replaceAll(`"`, `""`)}"`

type Execute = (statement: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>, SqlError>

const rowsOf = <Row>(rows: ReadonlyArray<unknown>) => rows as ReadonlyArray<Row>

/** The statements, with the schema's name in them. */
const statementsFor = (schema: string) => {
  const s = quoteIdentifier(schema)
  const sessions = `${s}.lite_agent_sessions`
  const events = `${s}.lite_agent_events`
  const blobs = `${s}.lite_agent_blobs`
  const meta = `${s}.lite_agent_meta`
  const notify = (kind: SessionChange["kind"]) =>
    `pg_notify('${CHANGES_CHANNEL}', json_build_object('schema', ${quoteLiteral(schema)}::text, 'kind', '${kind}',
       'sessionId', id, 'head', head, 'generation', generation::text)::text)`
  return {
    meta,
    migrations: [
      // 1: the log, the sessions' heads and generations, and the snapshot store.
      [
        `CREATE TABLE ${sessions} (
          id text PRIMARY KEY,
          head bigint NOT NULL,
          mtime bigint NOT NULL,
          generation bigint NOT NULL
        )`,
        `CREATE TABLE ${events} (
          session_id text NOT NULL,
          seq bigint NOT NULL,
          ts bigint NOT NULL,
          event text NOT NULL,
          PRIMARY KEY (session_id, seq)
        )`,
        `CREATE TABLE ${blobs} (
          session_id text NOT NULL,
          sha256 text NOT NULL,
          data bytea NOT NULL,
          PRIMARY KEY (session_id, sha256)
        )`
      ]
    ] as ReadonlyArray<ReadonlyArray<string>>,
    lockSession: `SELECT head, generation::text AS generation FROM ${sessions} WHERE id = $1 FOR UPDATE`,
    createSession: `INSERT INTO ${sessions} (id, head, mtime, generation) VALUES ($1, 0, $2, $3) ON CONFLICT (id) DO NOTHING`,
    append: `WITH appended AS (
        INSERT INTO ${events} (session_id, seq, ts, event)
        SELECT $1, r.seq, r.ts, r.event FROM unnest($2::bigint[], $3::bigint[], $4::text[]) AS r(seq, ts, event)
      ), moved AS (
        UPDATE ${sessions} SET head = $5, mtime = $6 WHERE id = $1 RETURNING id, head, generation
      )
      SELECT ${notify("append")} FROM moved`,
    truncate: `WITH dropped AS (
        DELETE FROM ${events} WHERE session_id = $1 AND seq > $2
      ), moved AS (
        UPDATE ${sessions} SET head = $2, mtime = $3, generation = $4 WHERE id = $1 RETURNING id, head, generation
      )
      SELECT ${notify("truncate")} FROM moved`,
    putBlob: `INSERT INTO ${blobs} (session_id, sha256, data) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
    presentBlobs: `SELECT sha256 FROM ${blobs} WHERE session_id = $1 AND sha256 = ANY($2::text[])`,
    deleteBlobs: `DELETE FROM ${blobs} WHERE session_id = $1 AND sha256 = ANY($2::text[])`,
    listBlobs: `SELECT sha256, octet_length(data) AS "storedBytes" FROM ${blobs} WHERE session_id = $1 ORDER BY sha256`,
    readBlob: `SELECT data FROM ${blobs} WHERE session_id = $1 AND sha256 = $2`,
    allRecords: `SELECT seq, ts, event FROM ${events} WHERE session_id = $1 ORDER BY seq`,
    readPage: `SELECT e.seq, e.ts, e.event, s.head, s.generation::text AS generation
      FROM ${events} e JOIN ${sessions} s ON s.id = e.session_id
      WHERE e.session_id = $1 AND e.seq > $2 ORDER BY e.seq LIMIT ${READ_PAGE_ROWS}`,
    version: `SELECT head, generation::text AS generation FROM ${sessions} WHERE id = $1`,
    logBytes: `SELECT coalesce(sum(octet_length(event)), 0) AS bytes FROM ${events} WHERE session_id = $1`,
    list: `SELECT id, mtime FROM ${sessions}`,
    /** After `lockSession`: a statement taken before the lock could miss events committed while it waited. */
    deleteSession: `WITH dropped_events AS (
        DELETE FROM ${events} WHERE session_id = $1
      ), dropped_blobs AS (
        DELETE FROM ${blobs} WHERE session_id = $1
      ), dropped AS (
        DELETE FROM ${sessions} WHERE id = $1 RETURNING id, 0 AS head, '${Checkpointer.NO_GENERATION}' AS generation
      )
      SELECT ${notify("delete")} FROM dropped`,
    /** Sessions whose head disagrees with their events, events without a session, blobs whose bytes do not match their name. */
    integrity: [
      `SELECT 'session ' || s.id || ': head ' || s.head || ', but ' || count(e.seq) || ' events from seq ' ||
          coalesce(min(e.seq), 0) || ' to ' || coalesce(max(e.seq), 0) AS finding
        FROM ${sessions} s LEFT JOIN ${events} e ON e.session_id = s.id
        GROUP BY s.id, s.head
        HAVING count(e.seq) <> s.head OR coalesce(min(e.seq), 1) <> 1 OR coalesce(max(e.seq), 0) <> s.head`,
      `SELECT 'events of session ' || e.session_id || ' without a session row' AS finding
        FROM ${events} e WHERE NOT EXISTS (SELECT 1 FROM ${sessions} s WHERE s.id = e.session_id)
        GROUP BY e.session_id`,
      `SELECT 'snapshot ' || b.sha256 || ' of session ' || b.session_id || ': its bytes hash to ' ||
          encode(sha256(b.data), 'hex') AS finding
        FROM ${blobs} b WHERE encode(sha256(b.data), 'hex') <> b.sha256`
    ]
  }
}

const quoteLiteral = (text: string) => `'${text.replaceAll("'", "''")}'`

export interface ResolvedStorageOptions {
  readonly schema: string
  readonly busyTimeoutMs: number
}

const storageOptions = (options: PostgresClientCheckpointerOptions): ResolvedStorageOptions => ({
  schema: options.schema ?? DEFAULT_SCHEMA,
  busyTimeoutMs: options.busyTimeoutMs ?? 5000
})

export interface PostgresCheckpointerParts {
  readonly service: Checkpointer.CheckpointerService
  readonly integrity: Context.Tag.Service<CheckpointerIntegrity>
  readonly changes: Context.Tag.Service<PostgresChanges>
}

/**
 * The checkpointer over `client`, in the schema `options.schema`. Migrates the schema first
 * (or refuses a newer one with `SchemaVersionError`, writing nothing).
 */
export const makeWithClient = (
  client: PgClient.PgClient,
  options: ResolvedStorageOptions
): Effect.Effect<PostgresCheckpointerParts, CheckpointerError, Scope.Scope> =>
  Effect.gen(function*() {
    const statements = statementsFor(options.schema)
    /** Locks are waited for in the server; 0 there would mean "forever". */
    const lockTimeoutMs = Math.max(1, Math.round(options.busyTimeoutMs))

    /** One statement on a pooled connection of its own (never an application's transaction). */
    const query = <Row>(operation: string, statement: string, params: ReadonlyArray<unknown>) =>
      Effect.scoped(Effect.flatMap(client.reserve, (connection) => connection.execute(statement, params, undefined))).pipe(
        Effect.map(rowsOf<Row>),
        Effect.mapError(toCheckpointerError(operation))
      )

    /**
     * Run `body` in one transaction on a connection of its own. It commits when `body`
     * succeeds having written something (`body` says so), and rolls back otherwise. A failed
     * COMMIT leaves the outcome unknown, and says so.
     */
    const transaction = <A>(
      operation: string,
      sessionId: string | undefined,
      body: (execute: Execute) => Effect.Effect<{ readonly value: A; readonly wrote: boolean }, CheckpointerError | SqlError | Busy>
    ): Effect.Effect<A, CheckpointerError> =>
      retryWhileBusy(
        Effect.scoped(Effect.flatMap(client.reserve, (connection) => inTransaction(connection, operation, body))).pipe(
          Effect.catchIf(
            (error): error is SqlError => error instanceof SqlError,
            (error): Effect.Effect<never, CheckpointerError | Busy> => {
              const { code } = pgErrorOf(error)
              if (code === LOCK_NOT_AVAILABLE) {
                return Effect.fail(
                  new CheckpointBusyError({
                    ...(sessionId === undefined ? {} : { sessionId }),
                    waitedMs: lockTimeoutMs,
                    detail: `${operation}: another writer held the session's row lock`
                  })
                )
              }
              if (code !== undefined && RETRYABLE.has(code)) return Effect.fail(new Busy({ detail: `${operation}: ${code}` }))
              return Effect.fail(toCheckpointerError(operation)(error))
            }
          )
        ),
        { timeoutMs: options.busyTimeoutMs, maxPauseMs: 50, sessionId }
      )

    /** `body` in one transaction on `connection`: see `transaction`. */
    const inTransaction = <A>(
      connection: Connection,
      operation: string,
      body: (execute: Execute) => Effect.Effect<{ readonly value: A; readonly wrote: boolean }, CheckpointerError | SqlError | Busy>
    ): Effect.Effect<A, CheckpointerError | SqlError | Busy> => {
      const execute: Execute = (statement, params) => connection.execute(statement, params, undefined)
      const finish = (
        exit: Exit.Exit<{ readonly value: A; readonly wrote: boolean }, CheckpointerError | SqlError | Busy>
      ): Effect.Effect<A, CheckpointerError | SqlError | Busy> =>
        Exit.isSuccess(exit) && exit.value.wrote
          ? Effect.as(
            Effect.mapError(
              execute("COMMIT", []),
              (error) =>
                new StorageError({
                  operation,
                  detail: `COMMIT failed, so whether it took effect is unknown (re-read the head): ${pgErrorOf(error).message}`,
                  cause: error
                })
            ),
            exit.value.value
          )
          // A broken connection cannot roll back, and need not: the server drops its transaction.
          : Effect.zipRight(Effect.ignore(execute("ROLLBACK", [])), Effect.map(exit, (result) => result.value))
      return Effect.uninterruptibleMask((restore) =>
        Effect.zipRight(
          connection.executeUnprepared(
            `BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = ${lockTimeoutMs}`,
            [],
            undefined
          ),
          Effect.flatMap(Effect.exit(restore(body(execute))), finish)
        )
      )
    }

    // ------------------------------------------------------------------------------------
    // The schema: refuse a newer one before writing anything, then migrate under a lock
    // ------------------------------------------------------------------------------------

    const storedVersion = <E>(execute: (statement: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>, E>) =>
      Effect.gen(function*() {
        const present = rowsOf<{ present: boolean }>(
          yield* execute("SELECT to_regclass($1) IS NOT NULL AS present", [statements.meta])
        )
        if (present[0]?.present !== true) return 0
        const rows = rowsOf<{ value: string }>(
          yield* execute(`SELECT value FROM ${statements.meta} WHERE key = 'schema_version'`, [])
        )
        return Number(rows[0]?.value ?? 0)
      })
    const refuseNewer = (found: number) =>
      found > SCHEMA_VERSION
        ? Effect.fail(new SchemaVersionError({ found, supported: SCHEMA_VERSION, detail: `schema ${options.schema}` }))
        : Effect.void

    const found = yield* storedVersion((statement, params) => query("open", statement, params))
    yield* refuseNewer(found)
    if (found < SCHEMA_VERSION) {
      // One migrator at a time per schema; the others wait, then find it done. The lock is taken
      // before the transaction starts: a transaction that waited for it inside could go on
      // seeing the catalog as it was before the wait, and create tables that now exist.
      const lockKey = [`lite-agent:${options.schema}`]
      const migrate = (connection: Connection) => inTransaction(connection, "migrate", (execute) =>
        Effect.gen(function*() {
          const current = yield* storedVersion(execute)
          yield* refuseNewer(current)
          if (current >= SCHEMA_VERSION) return { value: undefined, wrote: false }
          const schemaRows = rowsOf<unknown>(yield* execute("SELECT 1 FROM pg_namespace WHERE nspname = $1", [options.schema]))
          if (schemaRows.length === 0) yield* execute(`CREATE SCHEMA ${quoteIdentifier(options.schema)}`, [])
          yield* execute(`CREATE TABLE IF NOT EXISTS ${statements.meta} (key text PRIMARY KEY, value text NOT NULL)`, [])
          for (const migration of statements.migrations.slice(current)) {
            for (const statement of migration) yield* execute(statement, [])
          }
          yield* execute(
            `INSERT INTO ${statements.meta} (key, value) VALUES ('schema_version', $1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
            [String(SCHEMA_VERSION)]
          )
          return { value: undefined, wrote: true }
        }))
      yield* Effect.scoped(
        Effect.flatMap(client.reserve, (connection) =>
          Effect.acquireUseRelease(
            connection.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", lockKey, undefined),
            () => migrate(connection),
            () => Effect.ignore(connection.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", lockKey, undefined))
          ))
      ).pipe(Effect.catchIf((error): error is SqlError | Busy => error instanceof SqlError || error instanceof Busy, (error) =>
        Effect.fail(toCheckpointerError("migrate")(error))))
    }

    // ------------------------------------------------------------------------------------
    // The driver
    // ------------------------------------------------------------------------------------

    const now = Effect.clockWith((clock) => clock.currentTimeMillis)

    const driver: Checkpointer.CheckpointerDriver = {
      withSession: (sessionId, use) =>
        transaction("write", sessionId, (execute) =>
          Effect.gen(function*() {
            let wrote = false
            const run = (operation: string, statement: string, params: ReadonlyArray<unknown>) =>
              Effect.mapError(execute(statement, params), toCheckpointerError(operation))
            const write = (operation: string, statement: string, params: ReadonlyArray<unknown>) =>
              Effect.map(run(operation, statement, params), (rows) => {
                wrote = true
                return rows
              })
            let locked = rowsOf<{ head: string }>(yield* execute(statements.lockSession, [sessionId]))
            if (locked.length === 0) {
              // No row to lock yet: create it (rolled back unless something is written).
              yield* execute(statements.createSession, [sessionId, yield* now, newGeneration()])
              locked = rowsOf<{ head: string }>(yield* execute(statements.lockSession, [sessionId]))
            }
            const head = Number(locked[0]?.head ?? 0)
            const value = yield* use({
              head,
              append: (records) =>
                Effect.flatMap(now, (mtime) =>
                  write("append", statements.append, [
                    sessionId,
                    records.map((record) => record.seq),
                    records.map((record) => record.ts),
                    records.map((record) => JSON.stringify(record.event)),
                    records.at(-1)!.seq,
                    mtime
                  ])),
              truncate: (toSeq) =>
                Effect.flatMap(now, (mtime) => write("truncate", statements.truncate, [sessionId, toSeq, mtime, newGeneration()])),
              putBlobs: (blobs) =>
                Effect.forEach(
                  blobs,
                  (blob) =>
                    write("store snapshot", statements.putBlob, [
                      sessionId,
                      blob.sha256,
                      Buffer.from(blob.data.buffer, blob.data.byteOffset, blob.data.byteLength)
                    ]),
                  { discard: true }
                ),
              missingBlobs: (hashes) =>
                Effect.map(run("check snapshots", statements.presentBlobs, [sessionId, hashes]), (rows) => {
                  const present = new Set(rowsOf<{ sha256: string }>(rows).map((row) => row.sha256))
                  return hashes.filter((sha256) => !present.has(sha256))
                }),
              deleteBlobs: (hashes) =>
                hashes.length === 0 ? Effect.void : Effect.asVoid(write("delete snapshots", statements.deleteBlobs, [sessionId, hashes])),
              storedBlobs: Effect.map(
                run("list snapshots", statements.listBlobs, [sessionId]),
                rowsOf<Checkpointer.SnapshotInfo>
              ),
              records: () => Stream.fromIterableEffect(run("read", statements.allRecords, [sessionId])).pipe(
                Stream.mapEffect((row) => {
                  const record = recordOf(sessionId, row as EventRow)
                  return record instanceof CheckpointIntegrityError ? Effect.fail(record) : Effect.succeed(record)
                })
              )
            })
            return { value, wrote }
          })),
      read: (sessionId, sinceSeq) =>
        pagedRead({
          sessionId,
          sinceSeq,
          pageRows: READ_PAGE_ROWS,
          page: (after) =>
            Effect.flatMap(
              query<EventRow & { readonly head: string; readonly generation: string }>("read", statements.readPage, [sessionId, after]),
              (rows) => {
                const page = pageOfJoinedRows(sessionId, rows)
                return page instanceof CheckpointIntegrityError ? Effect.fail(page) : Effect.succeed(page)
              }
            ),
          head: driver.head(sessionId)
        }),
      head: (sessionId) => Effect.map(driver.version(sessionId), (version) => version.head),
      version: (sessionId) =>
        Effect.map(query<{ head: string; generation: string }>("version", statements.version, [sessionId]), (rows) => {
          const row = rows[0]
          return row === undefined
            ? { head: 0, generation: Checkpointer.NO_GENERATION }
            : { head: Number(row.head), generation: row.generation }
        }),
      readBlob: (sessionId, sha256) =>
        Effect.map(query<{ data: Uint8Array }>("read snapshot", statements.readBlob, [sessionId, sha256]), (rows) => rows[0]?.data),
      logBytes: (sessionId) =>
        Effect.map(query<{ bytes: string }>("stats", statements.logBytes, [sessionId]), (rows) => Number(rows[0]?.bytes ?? 0)),
      listBlobs: (sessionId) => query<Checkpointer.SnapshotInfo>("list snapshots", statements.listBlobs, [sessionId]),
      list: Effect.map(
        query<{ id: string; mtime: string }>("list", statements.list, []),
        (rows) => rows.map((row) => ({ id: row.id, mtime: new Date(Number(row.mtime)) }))
      ),
      delete: (sessionId) =>
        transaction("delete", sessionId, (execute) =>
          Effect.gen(function*() {
            const locked = yield* execute(statements.lockSession, [sessionId])
            if (locked.length === 0) return { value: undefined, wrote: false }
            yield* execute(statements.deleteSession, [sessionId])
            return { value: undefined, wrote: true }
          }))
    }

    const checkIntegrity: Effect.Effect<IntegrityReport, CheckpointerError> = Effect.map(
      Effect.forEach(statements.integrity, (statement) => query<{ finding: string }>("check integrity", statement, [])),
      (results) => {
        const findings = results.flat().map((row) => row.finding)
        return findings.length === 0
          ? { ok: true, detail: `schema ${options.schema}: every session's events run from 1 to its head; every snapshot matches its hash` }
          : { ok: false, detail: findings.join("\n") }
      }
    )

    // The live feed: one LISTEN per checkpointer while anyone subscribes, shared through a
    // PubSub. The connection is watched with heartbeats (a NOTIFY to itself): when it goes
    // quiet, it is replaced, and subscribers hear `reconnected` once the new one is listening.
    const HEARTBEAT = "heartbeat"
    const heard = (payload: string): SessionChange | typeof HEARTBEAT | undefined => {
      try {
        const message = JSON.parse(payload) as { schema?: unknown; kind?: unknown; sessionId?: unknown; head?: unknown; generation?: unknown }
        if (message.schema !== options.schema) return undefined
        if (message.kind === HEARTBEAT) return HEARTBEAT
        if ((message.kind === "append" || message.kind === "truncate" || message.kind === "delete") && typeof message.sessionId === "string") {
          return { kind: message.kind, sessionId: message.sessionId, head: Number(message.head), generation: String(message.generation) }
        }
      } catch {
        // Not one of ours.
      }
      return undefined
    }
    // Not PgClient's `notify`: it sends `NOTIFY channel, $1`, which PostgreSQL refuses (NOTIFY takes no parameters).
    const heartbeat = Effect.ignore(
      query("notify", "SELECT pg_notify($1, $2)", [CHANGES_CHANNEL, JSON.stringify({ schema: options.schema, kind: HEARTBEAT })])
    )
    const heartbeats = Stream.fromSchedule(Schedule.spaced(Duration.millis(FEED_HEARTBEAT_MS))).pipe(
      Stream.mapEffect(() => heartbeat),
      Stream.drain
    )
    const listening = client.listen(CHANGES_CHANNEL).pipe(
      Stream.mapError(toCheckpointerError("listen")),
      Stream.merge(Stream.drain(Stream.concat(Stream.fromEffect(heartbeat), heartbeats)), {
        haltStrategy: "left"
      }),
      Stream.timeoutFail(
        () => new StorageError({ operation: "listen", detail: "the live feed heard nothing, not even its own heartbeat: its connection is gone" }),
        Duration.millis(3 * FEED_HEARTBEAT_MS)
      )
    )
    const feed = yield* RcRef.make({
      acquire: Effect.gen(function*() {
        const hub = yield* Effect.acquireRelease(PubSub.sliding<SessionChange>(FEED_BUFFER), PubSub.shutdown)
        let lost = false
        const listen = Stream.runForEach(listening, (payload) => {
          const change = heard(payload)
          if (change === HEARTBEAT) {
            if (!lost) return Effect.void
            lost = false
            return PubSub.publish(hub, { kind: "reconnected" })
          }
          return change === undefined ? Effect.void : PubSub.publish(hub, change)
        })
        yield* Effect.forkScoped(
          listen.pipe(
            Effect.catchAllCause(() => Effect.sync(() => (lost = true))),
            Effect.zipRight(Effect.sleep(Duration.millis(250))),
            Effect.forever
          )
        )
        return hub
      })
    })
    const changes: Stream.Stream<SessionChange> = Stream.unwrapScoped(
      Effect.map(Effect.flatMap(RcRef.get(feed), PubSub.subscribe), (subscription) => Stream.fromQueue(subscription))
    )

    // Followers wake on this session's notifications, and on `reconnected` (what was missed is unknown).
    const watch = (sessionId: string): Stream.Stream<unknown> =>
      Stream.filter(changes, (change) => change.kind === "reconnected" || change.sessionId === sessionId)

    const service = yield* Checkpointer.make({ ...driver, watch, followPollMs: FOLLOW_POLL_MS })
    return { service, integrity: { checkIntegrity }, changes: { changes } }
  })

const contextOf = (built: PostgresCheckpointerParts) =>
  Context.make(Checkpointer.Checkpointer, built.service).pipe(
    Context.add(CheckpointerIntegrity, built.integrity),
    Context.add(PostgresChanges, built.changes)
  )

export type PostgresCheckpointerServices = Checkpointer.Checkpointer | CheckpointerIntegrity | PostgresChanges

/** The checkpointer over a `PgClient` the application already has (its pool, its settings). */
export const layerWithClient = (
  options: PostgresClientCheckpointerOptions = {}
): Layer.Layer<PostgresCheckpointerServices, CheckpointerError | ConfigurationError, PgClient.PgClient> =>
  Layer.scopedContext(
    Effect.gen(function*() {
      const decoded = yield* decodeOptions(PostgresClientCheckpointerOptions, options, "Postgres checkpointer options")
      const client = yield* PgClient.PgClient
      return contextOf(yield* makeWithClient(client, storageOptions(decoded)))
    })
  )

/** The client configuration `options` describe, checked. */
const clientConfig = (options: PostgresCheckpointerOptions): PgClient.PgClientConfig => ({
    ...(options.url === undefined ? {} : { url: Redacted.make(options.url) }),
    ...(options.host === undefined ? {} : { host: options.host }),
    ...(options.port === undefined ? {} : { port: options.port }),
    ...(options.database === undefined ? {} : { database: options.database }),
    ...(options.user === undefined ? {} : { username: options.user }),
    ...(options.password === undefined ? {} : { password: Redacted.make(options.password) }),
    ...(options.ssl === undefined ? {} : { ssl: options.ssl }),
    maxConnections: options.maxConnections ?? 10,
    connectTimeout: Duration.millis(options.connectTimeoutMs ?? 10_000),
    applicationName: options.applicationName ?? "lite-agent"
})

/** Decode `options` (a `ConfigurationError` names the option and never quotes a secret). */
export const decodePostgresOptions = (options: unknown) =>
  decodeOptions(PostgresCheckpointerOptions, options, { name: "Postgres checkpointer options", secrets: SECRETS })

/** A pool of its own, then the checkpointer over it. */
export const make = (options: PostgresCheckpointerOptions) =>
  Effect.gen(function*() {
    const decoded = yield* decodePostgresOptions(options)
    const client = yield* PgClient.make(clientConfig(decoded)).pipe(Effect.mapError(connectError))
    return yield* makeWithClient(client, storageOptions(decoded))
  })

export const layer = (
  options: PostgresCheckpointerOptions
): Layer.Layer<PostgresCheckpointerServices, CheckpointerError | ConfigurationError> =>
  Layer.scopedContext(Effect.map(make(options), contextOf)).pipe(Layer.provide(Reactivity.layer))
