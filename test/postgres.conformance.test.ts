/**
 * The Postgres backend passes the one conformance suite (examples, model-based properties with
 * close-and-reopen steps, the snapshot store) against a real PostgreSQL server started for
 * this file.
 */
import { Layer } from "effect"
import { afterAll, beforeAll, describe, it } from "vitest"
import { PostgresCheckpointer } from "../src/checkpoint-postgres.js"
import { checkpointerConformance } from "../src/testing.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"

let server: PostgresServer | undefined
beforeAll(async () => {
  server = await startPostgres()
})
afterAll(() => server?.destroy())

/** Built when a test uses it: the server's address is known only once it has started. */
const layer = (schema: string) =>
  Layer.suspend(() => {
    if (server === undefined) throw new Error("the PostgreSQL server did not start")
    return PostgresCheckpointer.layer({ url: server.url, schema })
  })

checkpointerConformance("postgres", layer("conformance"), { runner: { describe, it }, reopen: true })
checkpointerConformance("postgres (a second schema in the same database)", layer("conformance_2"), {
  runner: { describe, it },
  propertyRuns: 50
})
