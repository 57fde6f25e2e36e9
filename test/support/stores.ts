/**
 * The persistent stores the multi-process tests share, opened the same way by the test files
 * and their worker processes (no test runner here: workers load this too).
 *
 * A location names one store: a session directory (`file`), a database file (`sqlite`), or
 * `<url>#<schema>` (`postgres`: a schema of its own on a test server).
 */
import { fileCheckpointer, type PromiseCheckpointerWithIntegrity } from "../../src/index.js"

export type StoreBackend = "file" | "sqlite" | "postgres"

export const isStoreBackend = (value: unknown): value is StoreBackend =>
  value === "file" || value === "sqlite" || value === "postgres"

export const postgresLocation = (url: string, schema: string) => `${url}#${schema}`

const splitPostgresLocation = (location: string) => {
  const at = location.lastIndexOf("#")
  return { url: location.slice(0, at), schema: location.slice(at + 1) }
}

/** A checkpointer of its own on the store at `location`. Only the SQL stores load their drivers. */
export const openStore = async (
  backend: StoreBackend,
  location: string,
  options: { readonly lockLeaseMs?: number | undefined; readonly synchronous?: "normal" | "full" } = {}
): Promise<PromiseCheckpointerWithIntegrity> => {
  switch (backend) {
    case "sqlite":
      return (await import("../../src/checkpoint-sqlite.js")).sqliteCheckpointer({
        file: location,
        ...(options.synchronous === undefined ? {} : { synchronous: options.synchronous })
      })
    case "postgres":
      return (await import("../../src/checkpoint-postgres.js")).postgresCheckpointer({
        ...splitPostgresLocation(location),
        // Four writers retrying conflicts can keep one session's row lock busy for a while.
        busyTimeoutMs: 30_000
      })
    case "file":
      return fileCheckpointer({ dir: location, ...(options.lockLeaseMs === undefined ? {} : { lockLeaseMs: options.lockLeaseMs }) })
  }
}
