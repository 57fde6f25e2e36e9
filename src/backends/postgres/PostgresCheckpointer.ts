/**
 * The PostgreSQL backend: sessions shared by many processes on many machines. This module
 * composes the parts (migrations.ts, transactions.ts, statements.ts, changeFeed.ts) into the
 * driver and offers the layers.
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
 * - Tables live in a schema of their own (default `lite_agent`), created by @effect/sql's
 *   Migrator under an advisory lock, so processes starting together on an empty database wait
 *   for each other; `lite_agent_meta` holds the schema version.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Redacted, Schema, type Scope, Stream } from "effect"
import * as Checkpointer from "../../core/Checkpointer.js"
import { type CheckpointerError, CheckpointIntegrityError, ConfigurationError } from "../../core/errors.js"
import { CheckpointerIntegrity, type IntegrityReport } from "../../core/integrity.js"
import { decodeOptions, expecting, NonEmptyString, numberAtLeast, PositiveInteger } from "../../core/internal/options.js"
import { type EventRow, pagedRead, pageOfJoinedRows, recordOf } from "../internal/pagedRead.js"
import { carriedRecordsJson, makeChangeFeed, PostgresChanges } from "./changeFeed.js"
import { migrate } from "./migrations.js"
import { connectError, toCheckpointerError } from "./pgErrors.js"
import { READ_PAGE_ROWS, statementsFor } from "./statements.js"
import { makeTransactions, rowsOf } from "./transactions.js"

export { CHANGES_CHANNEL, PostgresChanges, type SessionChange } from "./changeFeed.js"
export { SCHEMA_VERSION } from "./migrations.js"

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

/**
 * How often a follower looks regardless of notifications. The feed's heartbeats find a lost
 * connection and `reconnected` wakes every follower, so this is only the last resort (a
 * notification lost otherwise), and rare: each look is a query per follower.
 */
const FOLLOW_POLL_MS = 30_000
const DEFAULT_SCHEMA = "lite_agent"

/** A random generation, as an integer that survives a round trip through JavaScript numbers. */
const newGeneration = () => Math.floor(Math.random() * Number.MAX_SAFE_INTEGER) + 1

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
    const { query, transaction } = makeTransactions(client, options.busyTimeoutMs)
    yield* migrate(client, options.schema, query)

    const now = Effect.clockWith((clock) => clock.currentTimeMillis)

    /** A page of the log with the session's version, in one statement (one snapshot). */
    const pageRead = (sessionId: string, after: number) =>
      Effect.flatMap(
        query<{ readonly [K in keyof EventRow]: EventRow[K] | null } & { readonly head: string; readonly generation: string }>(
          "read",
          statements.readPage,
          [sessionId, after]
        ),
        (rows) => {
          const page = pageOfJoinedRows(sessionId, rows)
          return page instanceof CheckpointIntegrityError ? Effect.fail(page) : Effect.succeed(page)
        }
      )

    const feed = yield* makeChangeFeed(client, options.schema, query)
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
            let locked = rowsOf<{ head: string; generation: string }>(yield* execute(statements.lockSession, [sessionId]))
            const existed = locked.length > 0
            if (!existed) {
              // No row to lock yet: create it (rolled back unless something is written).
              yield* execute(statements.createSession, [sessionId, yield* now, newGeneration()])
              locked = rowsOf<{ head: string; generation: string }>(yield* execute(statements.lockSession, [sessionId]))
            }
            const head = Number(locked[0]?.head ?? 0)
            const value = yield* use({
              head,
              generation: existed && locked[0] !== undefined ? locked[0].generation : Checkpointer.NO_GENERATION,
              append: (records) =>
                Effect.flatMap(now, (mtime) => {
                  const eventTexts = records.map((record) => JSON.stringify(record.event))
                  return write("append", statements.append, [
                    sessionId,
                    records.map((record) => record.seq),
                    records.map((record) => record.ts),
                    eventTexts,
                    records.at(-1)!.seq,
                    mtime,
                    carriedRecordsJson(records, eventTexts) ?? null
                  ])
                }),
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
              ),
              firstRecordOf: (other) =>
                Effect.flatMap(run("read", statements.firstRecord, [other]), (rows) => {
                  const row = rows[0]
                  if (row === undefined) return Effect.succeed(undefined)
                  const record = recordOf(other, row as EventRow)
                  return record instanceof CheckpointIntegrityError ? Effect.fail(record) : Effect.succeed(record)
                }),
              remove: existed ? Effect.asVoid(write("delete", statements.deleteSession, [sessionId])) : Effect.void
            })
            return { value, wrote }
          })),
      read: (sessionId, sinceSeq) =>
        pagedRead({
          sessionId,
          sinceSeq,
          pageRows: READ_PAGE_ROWS,
          page: (after) => pageRead(sessionId, after),
          head: driver.head(sessionId)
        }),
      // What the notifications carried, else the statement's page (READ_PAGE_ROWS) cut to size.
      readPage: (sessionId, sinceSeq, maxRecords, generation) => {
        const carried = generation === undefined ? undefined : feed.carried(sessionId, sinceSeq, generation, maxRecords)
        return carried !== undefined ? Effect.succeed(carried) : Effect.map(pageRead(sessionId, sinceSeq), (page) =>
          page.records.length > maxRecords ? { ...page, records: page.records.slice(0, maxRecords) } : page)
      },
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

    // Followers wake on this session's notifications, and on `reconnected` (what was missed is unknown).
    const service = yield* Checkpointer.make({ ...driver, watch: feed.wakeUps, followPollMs: FOLLOW_POLL_MS })
    return { service, integrity: { checkIntegrity }, changes: { changes: feed.changes } }
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

/** How long an idle pooled connection is kept open. */
const POOL_IDLE_MS = 5 * 60_000

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
    // A connection is a server process: opening one costs milliseconds (tens on a busy machine),
    // so a pool that serves followers keeps what it used lately instead of the 10 s default.
    idleTimeout: Duration.millis(POOL_IDLE_MS),
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
