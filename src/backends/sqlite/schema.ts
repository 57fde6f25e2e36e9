/**
 * The SQLite schema: created in one immediate transaction and marked with `user_version`. The
 * `lite_agent_migrations` table is kept as earlier versions (which used @effect/sql's migrator)
 * left it, so they can still open a database this version created.
 *
 * Opening reads `user_version` first, without the write lock: a database already at this
 * version needs nothing written, so a process opening it never waits for another's writes.
 */
import type Database from "better-sqlite3"
import { SchemaVersionError } from "../../core/errors.js"

/** The schema version this code writes and reads (`PRAGMA user_version`). */
export const SCHEMA_VERSION = 2

const MIGRATIONS: ReadonlyArray<{ readonly id: number; readonly name: string; readonly sql: string }> = [
  {
    id: 1,
    name: "sessions_and_events",
    sql: `CREATE TABLE IF NOT EXISTS lite_agent_sessions (
        id TEXT PRIMARY KEY NOT NULL,
        head INTEGER NOT NULL,
        mtime INTEGER NOT NULL,
        generation INTEGER NOT NULL
      ) STRICT;
      CREATE TABLE IF NOT EXISTS lite_agent_events (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        ts INTEGER NOT NULL,
        event TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
      ) STRICT, WITHOUT ROWID;`
  },
  {
    // The snapshot store: blobs written in the same transaction as the events that reference them.
    id: 2,
    name: "snapshot_blobs",
    sql: `CREATE TABLE IF NOT EXISTS lite_agent_blobs (
      session_id TEXT NOT NULL,
      sha256 TEXT NOT NULL,
      data BLOB NOT NULL,
      PRIMARY KEY (session_id, sha256)
    ) STRICT, WITHOUT ROWID;`
  }
]
const MIGRATIONS_TABLE = `CREATE TABLE IF NOT EXISTS lite_agent_migrations (
  migration_id integer PRIMARY KEY NOT NULL,
  created_at datetime NOT NULL DEFAULT current_timestamp,
  name VARCHAR(255) NOT NULL
)`

/** The schema version of the database (a read: no lock beyond a reader's). */
export const schemaVersionOf = (db: Database.Database): number => Number(db.pragma("user_version", { simple: true }))

/**
 * Bring the schema to `SCHEMA_VERSION`, inside a write transaction the caller holds: the version
 * is read again there, since another process may have migrated (or moved past it) meanwhile.
 */
export const migrate = (db: Database.Database, file: string): SchemaVersionError | undefined => {
  const current = schemaVersionOf(db)
  if (current > SCHEMA_VERSION) return new SchemaVersionError({ found: current, supported: SCHEMA_VERSION, detail: file })
  if (current === SCHEMA_VERSION) return undefined
  db.exec(MIGRATIONS_TABLE)
  const applied = new Set(db.prepare("SELECT migration_id FROM lite_agent_migrations").pluck().all() as Array<number>)
  const record = db.prepare("INSERT INTO lite_agent_migrations (migration_id, name) VALUES (?, ?)")
  for (const migration of MIGRATIONS) {
    if (applied.has(migration.id)) continue
    db.exec(migration.sql)
    record.run(migration.id, migration.name)
  }
  db.pragma(`user_version = ${SCHEMA_VERSION}`)
  return undefined
}
