/**
 * The session tree against its model (test/support/treeModel.ts) on PostgreSQL: one throwaway
 * server for the file.
 */
import { afterAll, beforeAll, describe, it } from "vitest"
import { postgresCheckpointer } from "../src/checkpoint-postgres.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"
import { runTreeModel } from "./support/treeModel.js"

let postgres: PostgresServer
beforeAll(async () => {
  postgres = await startPostgres()
})
afterAll(() => postgres?.destroy())

describe("the session tree, as a model, on PostgreSQL", () => {
  it("after every send, restore, undo, redo, switch and fork, the conversation, the tree and the workspace are the model's", async () => {
    await runTreeModel(() => postgresCheckpointer({ url: postgres.url }), 10)
  }, 600_000)
})
