// An outside consumer of the built package: resolved by name through the exports map,
// types from the emitted .d.ts files. Compiled with tsc and run with node by package.test.ts.
import { CheckpointConflictError, memoryCheckpointer, UserMessage } from "@lite-agent/sdk"
import { Checkpointer, checkpointerConformance, MemoryCheckpointer, Session } from "@lite-agent/sdk/core"
import { SqliteCheckpointer, sqliteCheckpointer } from "@lite-agent/sdk/checkpoint-sqlite"

const checkpointer = memoryCheckpointer()
const head = await checkpointer.append("s", [new UserMessage({ content: "hello", origin: "user" })])
let conflict: unknown
try {
  await checkpointer.append("s", [{ _tag: "UserMessage", content: "stale" }], head - 1)
} catch (err) {
  conflict = err
}
if (!(conflict instanceof CheckpointConflictError)) throw new Error(`expected a conflict, got ${String(conflict)}`)
const events = await checkpointer.read("s")
const state = Session.fold(events)
await checkpointer.close()

const sqlite = sqliteCheckpointer({ file: ":memory:" })
const sqliteHead = await sqlite.append("s", [new UserMessage({ content: "in sqlite", origin: "user" })])
const sqliteConflict = await sqlite.append("s", [], 0).catch((err: unknown) => err)
await sqlite.close()

console.log(JSON.stringify({
  sqliteHead,
  sqliteConflict: sqliteConflict instanceof CheckpointConflictError,
  sqliteSchemaVersion: SqliteCheckpointer.SCHEMA_VERSION,
  head,
  expected: conflict.expected,
  actual: conflict.actual,
  checkpoints: Session.checkpoints(state).map((c) => c.prompt),
  tag: Checkpointer.key,
  conformance: typeof checkpointerConformance,
  memoryLayer: typeof MemoryCheckpointer.layer
}))
