// An outside consumer of the built package: resolved by name through the exports map,
// types from the emitted .d.ts files. Compiled with tsc and run with node by package.test.ts.
import { CheckpointConflictError, ConfigurationError, createLiteAgent, memoryCheckpointer, UserMessage } from "@lite-agent/sdk"
import { Checkpointer, checkpointerConformance, MemoryCheckpointer, Session } from "@lite-agent/sdk/core"
import { SqliteCheckpointer, sqliteCheckpointer } from "@lite-agent/sdk/checkpoint-sqlite"
import { anthropic, type ModelProvider, scripted, type ScriptedTurn } from "@lite-agent/sdk/provider"
// Deep import: the @effect/ai index also loads its MCP server (and @effect/rpc).
import * as LanguageModel from "@effect/ai/LanguageModel"
import { Effect } from "effect"

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

// The provider subpath: a scripted model answers through the real LanguageModel API, and the
// Anthropic provider reports a missing key as the package's own ConfigurationError.
const turns: ReadonlyArray<ScriptedTurn> = [{ text: "scripted hello" }]
const model = scripted(turns)
const reply = await Effect.runPromise(
  LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(model.layer()))
)
const real: ModelProvider = anthropic({ apiKey: "" })
const missingKey = await Effect.runPromise(
  Effect.flip(LanguageModel.generateText({ prompt: "hi" }).pipe(Effect.provide(real.layer())))
)

// The agent through the promise facade: one scripted turn with a file tool, in the working
// directory (the consumer's temporary folder; package.test.ts checks the file).
const agent = createLiteAgent({
  model: scripted([{ toolCalls: [{ name: "write_file", input: { path: "out.txt", content: "from the consumer" } }] }, { text: "wrote it" }]),
  checkpointer: memoryCheckpointer()
})
const turn = await agent.send("write out.txt")
const agentCheckpoints = await agent.listCheckpoints(agent.sessionId)
await agent.close()

console.log(JSON.stringify({
  agent: { text: turn.text, tool: turn.toolCalls.map((call) => call.output), checkpointFiles: agentCheckpoints.map((c) => c.files) },
  provider: {
    scriptedText: reply.text,
    remaining: model.remaining(),
    anthropicDefault: real.defaultModelName,
    missingKey: missingKey instanceof ConfigurationError ? missingKey.option : String(missingKey)
  },
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
