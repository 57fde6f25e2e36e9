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
import { sha256Hex } from "../../core/internal/sha256.js"

/** The schema version this code writes and reads (`PRAGMA user_version`). */
export const SCHEMA_VERSION = 3

/**
 * Version 3: one object store for every session — content-addressed bytes and when each was last
 * stored or touched (epoch ms, which the collector reads); a rowid table, its rows are large.
 * Version 2's blobs, one copy per session that stored them, become its objects: one row per
 * hash, touched now, so the collector keeps even those no log references for its grace period.
 * Of several copies of a hash, one whose bytes match it is kept.
 */
const sharedObjects = (db: Database.Database) => {
  db.exec(`CREATE TABLE IF NOT EXISTS lite_agent_objects (
    sha256 TEXT PRIMARY KEY NOT NULL,
    data BLOB NOT NULL,
    touched_ms INTEGER NOT NULL
  ) STRICT`)
  const holders = new Map<string, Array<string>>()
  const copies = db.prepare<[], { session_id: string; sha256: string }>("SELECT session_id, sha256 FROM lite_agent_blobs ORDER BY sha256, session_id")
  for (const { session_id, sha256 } of copies.all()) {
    const sessions = holders.get(sha256)
    if (sessions === undefined) holders.set(sha256, [session_id])
    else sessions.push(session_id)
  }
  const bytesOf = db.prepare<[string, string], Buffer>("SELECT data FROM lite_agent_blobs WHERE session_id = ? AND sha256 = ?").pluck()
  const copy = db.prepare(
    "INSERT INTO lite_agent_objects (sha256, data, touched_ms) SELECT sha256, data, ? FROM lite_agent_blobs WHERE session_id = ? AND sha256 = ?"
  )
  const now = Date.now()
  for (const [sha256, sessions] of holders) {
    const intact = sessions.length === 1 ? undefined : sessions.find((session) => sha256Hex(bytesOf.get(session, sha256)!) === sha256)
    copy.run(now, intact ?? sessions[0]!, sha256)
  }
  db.exec("DROP TABLE lite_agent_blobs")
}

/** Each migration's statements, or a function run on the database (inside the caller's transaction). */
const MIGRATIONS: ReadonlyArray<{ readonly id: number; readonly name: string; readonly sql: string | ((db: Database.Database) => void) }> = [
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
    // The snapshot store of version 2: blobs written in the same transaction as the events that
    // reference them, per session (moved to the shared objects by version 3).
    id: 2,
    name: "snapshot_blobs",
    sql: `CREATE TABLE IF NOT EXISTS lite_agent_blobs (
      session_id TEXT NOT NULL,
      sha256 TEXT NOT NULL,
      data BLOB NOT NULL,
      PRIMARY KEY (session_id, sha256)
    ) STRICT, WITHOUT ROWID;`
  },
  { id: 3, name: "shared_objects", sql: sharedObjects }
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
    if (typeof migration.sql === "string") db.exec(migration.sql)
    else migration.sql(db)
    record.run(migration.id, migration.name)
  }
  db.pragma(`user_version = ${SCHEMA_VERSION}`)
  return undefined
}
