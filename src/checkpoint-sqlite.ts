/**
 * `@lite-agent/sdk/checkpoint-sqlite` — the SQLite (WAL) backend for one machine with many
 * processes. The only entry point that loads the native better-sqlite3 module.
 */
import * as SqliteCheckpointer from "./backends/sqlite/SqliteCheckpointer.js"
import { decodeOptionsOrThrow } from "./core/internal/options.js"
import { type PromiseCheckpointerWithIntegrity, toPromiseCheckpointerWithIntegrity } from "./facade/checkpointer.js"

export * as SqliteCheckpointer from "./backends/sqlite/SqliteCheckpointer.js"
export type { SqliteCheckpointerOptions } from "./backends/sqlite/SqliteCheckpointer.js"

/**
 * A checkpointer on a SQLite database file shared by the processes of one machine. Bad options
 * throw `ConfigurationError` at once; a database that cannot be opened surfaces as one on the
 * first call. `close()` before exit.
 */
export const sqliteCheckpointer = (
  options: SqliteCheckpointer.SqliteCheckpointerOptions
): PromiseCheckpointerWithIntegrity =>
  toPromiseCheckpointerWithIntegrity(
    SqliteCheckpointer.layer(
      decodeOptionsOrThrow(SqliteCheckpointer.SqliteCheckpointerOptions, options, "SQLite checkpointer options")
    )
  )
