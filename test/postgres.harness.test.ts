/**
 * The throwaway PostgreSQL server the Postgres backend's tests will run against: a fresh
 * cluster from the machine's binaries that answers over TCP, keeps what was committed across a
 * crash (`pg_ctl stop -m immediate`) and a restart, and is removed afterwards.
 */
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type PostgresServer, startPostgres } from "./support/postgres.js"

let server: PostgresServer
beforeAll(async () => {
  server = await startPostgres()
})
afterAll(() => server?.destroy())

const query = <A>(use: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, use).pipe(
      Effect.provide(PgClient.layer({ url: Redacted.make(server.url) })),
      Effect.scoped
    )
  )

describe("a throwaway PostgreSQL server", () => {
  it("answers over TCP, and keeps what was committed across a crash and a restart", async () => {
    const version = await query((sql) => sql<{ version: string }>`SELECT current_setting('server_version_num') AS version`)
    expect(Number(version[0]!.version)).toBeGreaterThanOrEqual(150000)
    await query((sql) => Effect.zipRight(sql`CREATE TABLE kept (n int)`, sql`INSERT INTO kept VALUES (1), (2)`))
    server.crash()
    await expect(query((sql) => sql`SELECT 1`)).rejects.toBeDefined()
    server.start()
    const rows = await query((sql) => sql<{ n: number }>`SELECT n FROM kept ORDER BY n`)
    expect(rows.map((row) => row.n)).toEqual([1, 2])
  })
})
