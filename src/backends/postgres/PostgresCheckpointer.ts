/**
 * The PostgreSQL backend: sessions shared by many processes on many machines. This module
 * composes the parts (migrations.ts, transactions.ts, statements.ts, changeFeed.ts) into the
 * driver and offers the layers.
 *
 * - Every mutation is one transaction (READ COMMITTED) on a connection of its own that first
 *   locks the session's row (`SELECT … FOR UPDATE`): writers of one session queue on that row
 *   lock in the server, writers of different sessions wait for each other only over objects
 *   they both store or touch (below). A session without a row gets one (`INSERT … ON CONFLICT
 *   DO NOTHING`, which waits for a concurrent creator) before the lock is taken; a transaction
 *   that ends up writing nothing rolls back, so checking an expected head never creates a
 *   session. With the lock held, every statement sees the latest committed state, so no
 *   serialization failure can occur.
 * - The lock wait is bounded in the server (`lock_timeout` = `busyTimeoutMs`), then
 *   `CheckpointBusyError`; the wait never blocks the event loop.
 * - The objects (file states, large tool-call arguments) are one table shared by every session,
 *   by SHA-256, each with the time it was last stored or touched. A write's objects are stored
 *   and touched in the session's transaction (their rows stay locked until it commits); the
 *   collector's deletes are statements of their own, which pass over rows a transaction holds.
 *   Writers of two sessions touching the same objects in crossing orders can deadlock: the
 *   server rolls one back, and it is tried again.
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
import { Context, Duration, Effect, FiberRef, Layer, Redacted, Schema, type Scope, Stream } from "effect"
import * as Checkpointer from "../../core/Checkpointer.js"
import { type CheckpointerError, CheckpointIntegrityError, ConfigurationError } from "../../core/errors.js"
import { CheckpointerIntegrity, type IntegrityReport } from "../../core/integrity.js"
import { decodeOptions, expecting, NonEmptyString, numberAtLeast, PositiveInteger } from "../../core/internal/options.js"
import { storeQuotaFields } from "../../core/internal/storeQuota.js"
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
  busyTimeoutMs: Schema.optional(numberAtLeast(0)),
  ...storeQuotaFields
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

/** Statements in a session's transaction: `write` marks it as having written (so it commits). */
interface SessionStatements {
  readonly run: (operation: string, statement: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>, CheckpointerError>
  readonly write: (operation: string, statement: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>, CheckpointerError>
}

/** Objects stored per statement: bounds the statement's parameters (bytea travels as hex, twice its size). */
const PUT_BATCH_OBJECTS = 1000
const PUT_BATCH_BYTES = 16 * 1024 * 1024

/**
 * The objects to put, each hash once, in statements of at most `PUT_BATCH_OBJECTS` and about
 * `PUT_BATCH_BYTES`, in hash order: the rows of one put are locked in that order across its
 * statements, so two puts never wait for each other in a cycle.
 */
const putBatches = (objects: ReadonlyArray<Checkpointer.SnapshotBlob>): ReadonlyArray<ReadonlyArray<Checkpointer.SnapshotBlob>> => {
  const unique = [...new Map(objects.map((object) => [object.sha256, object])).values()]
    .sort((a, b) => (a.sha256 < b.sha256 ? -1 : a.sha256 > b.sha256 ? 1 : 0))
  const batches: Array<Array<Checkpointer.SnapshotBlob>> = []
  let batch: Array<Checkpointer.SnapshotBlob> = []
  let bytes = 0
  for (const object of unique) {
    if (batch.length > 0 && (batch.length >= PUT_BATCH_OBJECTS || bytes + object.data.byteLength > PUT_BATCH_BYTES)) {
      batches.push(batch)
      batch = []
      bytes = 0
    }
    batch.push(object)
    bytes += object.data.byteLength
  }
  if (batch.length > 0) batches.push(batch)
  return batches
}

/** A random generation, as an integer that survives a round trip through JavaScript numbers. */
const newGeneration = () => Math.floor(Math.random() * Number.MAX_SAFE_INTEGER) + 1

export interface ResolvedStorageOptions {
  readonly schema: string
  readonly busyTimeoutMs: number
  readonly maxStoreBytes?: number | undefined
}

const storageOptions = (options: PostgresClientCheckpointerOptions): ResolvedStorageOptions => ({
  schema: options.schema ?? DEFAULT_SCHEMA,
  busyTimeoutMs: options.busyTimeoutMs ?? 5000,
  maxStoreBytes: options.maxStoreBytes
})

export interface PostgresCheckpointerParts {
  readonly service: Checkpointer.CheckpointerService
  readonly integrity: Context.Tag.Service<CheckpointerIntegrity>
  readonly changes: Context.Tag.Service<PostgresChanges>
}

export interface PostgresDriverParts {
  readonly driver: Checkpointer.CheckpointerDriver
  readonly integrity: Context.Tag.Service<CheckpointerIntegrity>
  readonly changes: Context.Tag.Service<PostgresChanges>
}

/**
 * The driver over `client`, in the schema `options.schema` (what `makeWithClient` builds the
 * checkpointer on), with the integrity check and the live feed. Migrates the schema first (or
 * refuses a newer one with `SchemaVersionError`, writing nothing).
 */
export const makeDriverWithClient = (
  client: PgClient.PgClient,
  options: ResolvedStorageOptions
): Effect.Effect<PostgresDriverParts, CheckpointerError, Scope.Scope> =>
  Effect.gen(function*() {
    const statements = statementsFor(options.schema)
    const { query, transaction, write: writeAlone } = makeTransactions(client, options.busyTimeoutMs)
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

    /**
     * The transaction of the session whose `withSession` body is running, if any. `make` stores
     * and touches a batch's objects inside the session's exclusion; there they go in its
     * transaction, on its connection, and commit with the records that reference them. A second
     * pooled connection, asked for while the transaction holds one, could be waited for forever:
     * every connection held by a writer waiting for another (with `maxConnections: 1`, the first
     * write). The object rows stay locked until that commit: a writer of another session putting
     * or touching the same objects waits that long (bounded by `lock_timeout`).
     */
    const sessionTransaction = yield* FiberRef.make<SessionStatements | undefined>(undefined)
    /** An object statement: in the running session's transaction, else alone (and committed) on a connection of its own. */
    const objectStatement = <Row>(operation: string, statement: string, params: ReadonlyArray<unknown>, writes: boolean) =>
      Effect.flatMap(FiberRef.get(sessionTransaction), (session) =>
        session !== undefined
          ? Effect.map((writes ? session.write : session.run)(operation, statement, params), rowsOf<Row>)
          : (writes ? writeAlone : query)<Row>(operation, statement, params))

    const objects: Checkpointer.ObjectStore = {
      put: (added, nowMs) =>
        Effect.forEach(
          putBatches(added),
          (batch) =>
            objectStatement("store objects", statements.putObjects, [
              batch.map((object) => object.sha256),
              batch.map((object) => Buffer.from(object.data.buffer, object.data.byteOffset, object.data.byteLength)),
              nowMs
            ], true),
          { discard: true }
        ),
      touch: (hashes, nowMs) =>
        hashes.length === 0 ? Effect.succeed([]) : Effect.map(
          objectStatement<{ sha256: string }>("touch objects", statements.touchObjects, [[...new Set(hashes)], nowMs], true),
          (rows) => {
            const found = new Set(rows.map((row) => row.sha256))
            return hashes.filter((sha256) => !found.has(sha256))
          }
        ),
      read: (sha256) =>
        Effect.map(objectStatement<{ data: Buffer }>("read object", statements.readObject, [sha256], false), (rows) => {
          const data = rows[0]?.data
          return data === undefined ? undefined : new Uint8Array(data.buffer, data.byteOffset, data.byteLength)
        }),
      sizes: (hashes) => {
        const unique = [...new Set(hashes)]
        return unique.length === 0 ? Effect.succeed([]) : Effect.map(
          objectStatement<Checkpointer.SnapshotInfo>("object sizes", statements.objectSizes, [unique], false),
          // In the order asked for.
          (rows) => {
            const bytes = new Map(rows.map((row) => [row.sha256, row.storedBytes]))
            return unique.flatMap((sha256) => {
              const storedBytes = bytes.get(sha256)
              return storedBytes === undefined ? [] : [{ sha256, storedBytes }]
            })
          }
        )
      },
      list: Effect.map(
        objectStatement<{ sha256: string; storedBytes: number; touchedMs: string }>("list objects", statements.listObjects, [], false),
        (rows) => rows.map((row) => ({ sha256: row.sha256, storedBytes: row.storedBytes, touchedMs: Number(row.touchedMs) }))
      ),
      // A transaction never leaves part of a write or delete behind: no leftovers to clear.
      deleteUntouched: (hashes, cutoffMs) =>
        hashes.length === 0 ? Effect.succeed([]) : objectStatement<Checkpointer.SnapshotInfo>(
          "delete objects",
          statements.deleteUntouched,
          [[...new Set(hashes)], cutoffMs],
          true
        )
    }

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
            const value = yield* Effect.locally(sessionTransaction, { run, write })(use({
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
            }))
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
      logBytes: (sessionId) =>
        Effect.map(query<{ bytes: string }>("stats", statements.logBytes, [sessionId]), (rows) => Number(rows[0]?.bytes ?? 0)),
      list: Effect.map(
        query<{ id: string; mtime: string }>("list", statements.list, []),
        (rows) => rows.map((row) => ({ id: row.id, mtime: new Date(Number(row.mtime)) }))
      ),
      objects
    }

    const checkIntegrity: Effect.Effect<IntegrityReport, CheckpointerError> = Effect.map(
      Effect.forEach(statements.integrity, (statement) => query<{ finding: string }>("check integrity", statement, [])),
      (results) => {
        const findings = results.flat().map((row) => row.finding)
        return findings.length === 0
          ? { ok: true, detail: `schema ${options.schema}: every session's events run from 1 to its head; every object matches its hash` }
          : { ok: false, detail: findings.join("\n") }
      }
    )

    return {
      // Followers wake on this session's notifications, and on `reconnected` (what was missed is unknown).
      driver: { ...driver, watch: feed.wakeUps, followPollMs: FOLLOW_POLL_MS },
      integrity: { checkIntegrity },
      changes: { changes: feed.changes }
    }
  })

/**
 * The checkpointer over `client`, in the schema `options.schema`. Migrates the schema first
 * (or refuses a newer one with `SchemaVersionError`, writing nothing).
 */
export const makeWithClient = (
  client: PgClient.PgClient,
  options: ResolvedStorageOptions
): Effect.Effect<PostgresCheckpointerParts, CheckpointerError, Scope.Scope> =>
  Effect.flatMap(makeDriverWithClient(client, options), ({ changes, driver, integrity }) =>
    Effect.map(Checkpointer.make(driver, { maxStoreBytes: options.maxStoreBytes }), (service) => ({ service, integrity, changes })))

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
