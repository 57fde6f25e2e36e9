/**
 * `@lite-agent/sdk/checkpoint-postgres` — the PostgreSQL backend for sessions shared by many
 * machines. The only entry point that loads `@effect/sql-pg` (and `pg`).
 */
import * as PostgresCheckpointer from "./backends/postgres/PostgresCheckpointer.js"
import { Either } from "effect"
import { type PromiseCheckpointerWithIntegrity, toPromiseCheckpointerWithIntegrity } from "./facade/checkpointer.js"

export * as PostgresCheckpointer from "./backends/postgres/PostgresCheckpointer.js"
export type {
  PostgresCheckpointerOptions,
  PostgresClientCheckpointerOptions,
  SessionChange
} from "./backends/postgres/PostgresCheckpointer.js"

/**
 * A checkpointer on a PostgreSQL database, shared by every process that points at the same
 * database and schema. Bad options throw `ConfigurationError` at once (never quoting the
 * password); a server that cannot be reached surfaces as `StorageError` on the first call.
 * `close()` before exit.
 */
export const postgresCheckpointer = (
  options: PostgresCheckpointer.PostgresCheckpointerOptions
): PromiseCheckpointerWithIntegrity =>
  toPromiseCheckpointerWithIntegrity(
    PostgresCheckpointer.layer(Either.getOrThrowWith(PostgresCheckpointer.decodePostgresOptions(options), (error) => error))
  )
