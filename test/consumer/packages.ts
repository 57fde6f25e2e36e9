// An outside consumer of the packed packages under the spec's names: every package resolves by
// name, and a class is the same whichever package it is imported from. Compiled with tsc
// (strict, NodeNext, no skipLibCheck) and run with node by package.test.ts.
import * as sqlite from "@lite-agent/checkpoint-sqlite"
import * as postgres from "@lite-agent/checkpoint-postgres"
import * as core from "@lite-agent/core"
import * as provider from "@lite-agent/provider"
import * as sdk from "@lite-agent/sdk"
import * as sdkCore from "@lite-agent/sdk/core"
import * as sdkPostgres from "@lite-agent/sdk/checkpoint-postgres"
import * as sdkProvider from "@lite-agent/sdk/provider"
import * as sdkServer from "@lite-agent/sdk/server"
import * as sdkSqlite from "@lite-agent/sdk/checkpoint-sqlite"
import * as server from "@lite-agent/server"

// A conflict raised by the SQLite package's checkpointer, checked against the classes of every name.
const checkpointer = sqlite.sqliteCheckpointer({ file: ":memory:" })
await checkpointer.append("s", [new core.UserMessage({ content: "hello", origin: "user" })])
const conflict = await checkpointer.append("s", [], 0).catch((err: unknown) => err)
await checkpointer.close()

console.log(JSON.stringify({
  conflictIsCoreClass: conflict instanceof core.CheckpointConflictError,
  conflictIsSdkClass: conflict instanceof sdk.CheckpointConflictError,
  conflictIsSdkCoreClass: conflict instanceof sdkCore.CheckpointConflictError,
  sameCheckpointerTag: core.Checkpointer === sdkCore.Checkpointer,
  sameSqliteLayer: sqlite.SqliteCheckpointer.layer === sdkSqlite.SqliteCheckpointer.layer,
  samePostgresLayer: postgres.PostgresCheckpointer.layer === sdkPostgres.PostgresCheckpointer.layer,
  sameProvider: provider.anthropic === sdkProvider.anthropic,
  sameServer: server.serveSessions === sdkServer.serveSessions && server.Unauthorized === sdkServer.Unauthorized
}))
