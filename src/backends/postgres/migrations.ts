/**
 * The schema's tables, created and upgraded by @effect/sql's Migrator, and the version marker
 * (`schema_version` in `lite_agent_meta`) that every release reads first: a schema marked newer
 * than this code knows is refused with `SchemaVersionError` before anything is written. Each
 * migration raises the marker in the Migrator's transaction, so releases that only know the
 * marker keep opening (or refusing) what this one writes.
 *
 * Releases before the Migrator created the same tables by hand, in one transaction that also set
 * the marker, and kept no migrations table. Such a schema is adopted: a migration whose id the
 * marker already reaches is recorded in `lite_agent_migrations` without being run.
 *
 * Version 2 replaced the per-session snapshot store (`lite_agent_blobs`) with one object store
 * shared by every session (`lite_agent_objects`), copying what was stored: a release that knows
 * only version 1 refuses a schema migrated to it.
 *
 * The Migrator alone is not safe for processes opening an empty schema together: it looks for its
 * table and creates it outside any lock or transaction. Measured with 4 clients opening a fresh
 * database at once, 5 rounds: in every round 2 or 3 of the 4 failed (`duplicate key value
 * violates unique constraint "pg_type_typname_nsp_index"`, or `relation … already exists`). Its
 * look (`select 'schema.table'::regclass`) also folds case, so a schema-qualified table in a
 * schema such as `MixedCase` is missed and re-created, failing every open after the first. So it
 * runs on one connection that first takes an advisory lock per schema, with `search_path` set to
 * the schema and its table named bare.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { PgClient } from "@effect/sql-pg"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { Context, Effect } from "effect"
import { type CheckpointerError, SchemaVersionError, StorageError } from "../../core/errors.js"
import { toCheckpointerError } from "./pgErrors.js"
import { quoteIdentifier, tablesOf } from "./statements.js"
import { type Execute, type Query, rowsOf } from "./transactions.js"

type Tables = ReturnType<typeof tablesOf>

interface Migration {
  readonly id: number
  readonly name: string
  readonly statements: (tables: Tables) => ReadonlyArray<string>
}

const MIGRATIONS: ReadonlyArray<Migration> = [
  {
    // The log, the sessions' heads and generations, and the snapshot store (one copy of an object
    // per session that stored it): the DDL releases before the Migrator ran by hand, unchanged,
    // so schemas of both kinds are the same.
    id: 1,
    name: "create_tables",
    statements: ({ blobs, events, meta, sessions }) => [
      `CREATE TABLE IF NOT EXISTS ${meta} (key text PRIMARY KEY, value text NOT NULL)`,
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
  },
  {
    // One object store shared by every session: each distinct object of the per-session store,
    // touched now (a collection keeps it for its grace period from now, as any object just
    // stored), then the per-session store dropped. In the Migrator's transaction with the marker:
    // a crash leaves the schema at version 1, whole. Of two copies of one hash, one whose bytes
    // match it is kept (a damaged copy in one session does not replace a good one in another).
    // The old store is locked first: a process of an earlier release still writing to it waits,
    // and then fails, instead of storing a copy after the copy was taken.
    id: 2,
    name: "shared_objects",
    statements: ({ blobs, objects }) => [
      `LOCK TABLE ${blobs} IN ACCESS EXCLUSIVE MODE`,
      `CREATE TABLE ${objects} (
          sha256 text PRIMARY KEY,
          data bytea NOT NULL,
          touched_ms bigint NOT NULL
        )`,
      `INSERT INTO ${objects} (sha256, data, touched_ms)
        SELECT DISTINCT ON (sha256) sha256, data, (extract(epoch from clock_timestamp()) * 1000)::bigint
          FROM ${blobs}
          ORDER BY sha256, encode(sha256(data), 'hex') = sha256 DESC`,
      `DROP TABLE ${blobs}`
    ]
  }
]

/** The schema version this code writes and reads: the last migration's id. */
export const SCHEMA_VERSION = 2

/** Named bare: it is looked up through `search_path` (see above). */
const MIGRATIONS_TABLE = "lite_agent_migrations"

/**
 * The marker's version (0 without one), and the last migration the Migrator recorded (0 without
 * its table, or with the empty one it leaves when its transaction did not commit).
 */
const storedState = <E>(execute: (statement: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>, E>, schema: string) =>
  Effect.gen(function*() {
    const tables = tablesOf(schema)
    const migrations = `${quoteIdentifier(schema)}.${MIGRATIONS_TABLE}`
    const [present] = rowsOf<{ meta: boolean; migrations: boolean }>(
      yield* execute("SELECT to_regclass($1) IS NOT NULL AS meta, to_regclass($2) IS NOT NULL AS migrations", [tables.meta, migrations])
    )
    const marked = present?.meta === true
      ? rowsOf<{ value: string }>(yield* execute(`SELECT value FROM ${tables.meta} WHERE key = 'schema_version'`, []))
      : []
    const recorded = present?.migrations === true
      ? rowsOf<{ latest: number | null }>(yield* execute(`SELECT max(migration_id) AS latest FROM ${migrations}`, []))
      : []
    return { version: Number(marked[0]?.value ?? 0), recorded: recorded[0]?.latest ?? 0 }
  })

const isCurrent = (state: { readonly version: number; readonly recorded: number }) =>
  state.version === SCHEMA_VERSION && state.recorded >= SCHEMA_VERSION

const refuseNewer = (schema: string, found: number) =>
  found > SCHEMA_VERSION
    ? Effect.fail(new SchemaVersionError({ found, supported: SCHEMA_VERSION, detail: `schema ${schema}` }))
    : Effect.void

/** A migration's statements, then the marker raised to its id, in the Migrator's transaction. */
const apply = (migration: Migration, tables: Tables) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.zipRight(
      Effect.forEach(migration.statements(tables), (statement) => sql.unsafe(statement), { discard: true }),
      sql.unsafe(
        `INSERT INTO ${tables.meta} (key, value) VALUES ('schema_version', $1)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
        [String(migration.id)]
      )
    ))

/** Every migration, those the marker already reaches (applied by hand before the Migrator) recorded but not run. */
const loaderFor = (tables: Tables, markedVersion: number) =>
  Migrator.fromRecord(Object.fromEntries(MIGRATIONS.map((migration) => [
    `${migration.id}_${migration.name}`,
    migration.id <= markedVersion ? Effect.void : apply(migration, tables)
  ])))

/** A client whose every statement and transaction runs on `connection`, the one holding the lock. */
const clientOn = (connection: Connection) =>
  SqlClient.make({
    acquirer: Effect.succeed(connection),
    transactionAcquirer: Effect.succeed(connection),
    compiler: PgClient.makeCompiler(),
    spanAttributes: []
  }).pipe(Effect.provide(Reactivity.layer))

const migrateLocked = (connection: Connection, schema: string) =>
  Effect.gen(function*() {
    const execute: Execute = (statement, params) => connection.execute(statement, params, undefined)
    // One migrator at a time per schema; the others wait, then find it done. The lock is taken
    // before any transaction starts: a transaction that waited for it inside could go on
    // seeing the catalog as it was before the wait, and create tables that now exist.
    const lockKey = [`lite-agent:${schema}`]
    yield* Effect.acquireRelease(
      execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", lockKey),
      () => Effect.ignore(execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", lockKey))
    )
    const current = yield* storedState(execute, schema)
    yield* refuseNewer(schema, current.version)
    if (isCurrent(current)) return
    // Looked up: `CREATE SCHEMA IF NOT EXISTS` on a schema that exists still fails without CREATE on the database
    // ("permission denied for database"), which an application given its schema may lack.
    const schemaRows = yield* execute("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema])
    if (schemaRows.length === 0) yield* execute(`CREATE SCHEMA ${quoteIdentifier(schema)}`, [])
    yield* Effect.acquireRelease(
      execute("SELECT set_config('search_path', $1, false)", [quoteIdentifier(schema)]),
      () => Effect.ignore(execute("RESET search_path", []))
    )
    const sql = yield* clientOn(connection)
    yield* Migrator.make({})({ loader: loaderFor(tablesOf(schema), current.version), table: MIGRATIONS_TABLE }).pipe(
      Effect.provideService(SqlClient.SqlClient, sql),
      // An application's transaction around the open must not capture the migration's statements.
      Effect.mapInputContext((context: Context.Context<never>) => Context.omit(SqlClient.TransactionConnection)(context))
    )
    // The Migrator reports a failure to record a migration as "already running" and succeeds.
    const after = yield* storedState(execute, schema)
    if (!isCurrent(after)) {
      return yield* new StorageError({
        operation: "migrate",
        detail: `schema ${schema} is at version ${after.version} after migrating, expected ${SCHEMA_VERSION}`
      })
    }
  })

/** Bring `schema` to `SCHEMA_VERSION`, or refuse a newer one with `SchemaVersionError`, writing nothing. */
export const migrate = (client: PgClient.PgClient, schema: string, query: Query): Effect.Effect<void, CheckpointerError> =>
  Effect.gen(function*() {
    const found = yield* storedState((statement, params) => query("open", statement, params), schema)
    yield* refuseNewer(schema, found.version)
    if (isCurrent(found)) return
    yield* Effect.scoped(Effect.flatMap(client.reserve, (connection) => migrateLocked(connection, schema))).pipe(
      Effect.catchIf(
        (error): error is SqlError | Migrator.MigrationError => error instanceof SqlError || error instanceof Migrator.MigrationError,
        (error) => Effect.fail(toCheckpointerError("migrate")(error))
      ),
      // A migration that fails is a defect to the Migrator (its transaction rolled back); here it is a storage failure.
      Effect.catchAllDefect((defect) =>
        defect instanceof Migrator.MigrationError
          ? Effect.fail(toCheckpointerError("migrate")(defect.cause ?? defect))
          : Effect.die(defect)
      )
    )
  })
