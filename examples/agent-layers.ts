/**
 * The agent for Effect users: `LiteAgent` is a service built from layers — a `Checkpointer`,
 * a `LanguageModel`, and the file tools working in a directory. Swapping the backend or the
 * model is swapping a layer; the program does not change. Run: npx tsx examples/agent-layers.ts
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Console, Effect, Layer } from "effect"
import { FileCheckpointer, LiteAgent, MemoryCheckpointer } from "@lite-agent/sdk/core"
import { SqliteCheckpointer } from "@lite-agent/sdk/checkpoint-sqlite"
import { anthropicLayer, scriptedLayer } from "@lite-agent/sdk/provider"

const temp = (label: string) => mkdtempSync(join(tmpdir(), `lite-agent-layers-${label}-`))

/** The program: one turn, then the checkpoints. It needs only the `LiteAgent` service. */
const program = Effect.gen(function*() {
  const agent = yield* LiteAgent.LiteAgent
  const result = yield* agent.send("Write hello.txt")
  const checkpoints = yield* agent.listCheckpoints(result.sessionId)
  return `${result.text} (head ${result.head}; checkpoints: ${checkpoints.map((c) => `${c.seq} ${c.files.join(",")}`).join("; ")})`
})

// The model: offline script, or Claude when a key is set — either way a `LanguageModel` layer.
const model = () =>
  process.env.ANTHROPIC_API_KEY
    ? anthropicLayer({ modelName: "claude-sonnet-4-6" })
    : scriptedLayer([
      { toolCalls: [{ name: "write_file", input: { path: "hello.txt", content: "hello\n" } }] },
      { text: "Wrote hello.txt." }
    ])

const backends = {
  memory: () => MemoryCheckpointer.layer,
  file: () => FileCheckpointer.layer({ dir: temp("log") }),
  sqlite: () => SqliteCheckpointer.layer({ file: join(temp("db"), "sessions.db") })
}

for (const [name, checkpointer] of Object.entries(backends)) {
  // LiteAgent needs Checkpointer + LanguageModel; layerWithWorkdir brings the file tools and time travel.
  const agentLayer = LiteAgent.layerWithWorkdir(temp("work")).pipe(Layer.provide(Layer.merge(checkpointer(), model())))
  const line = await Effect.runPromise(program.pipe(Effect.provide(agentLayer)))
  await Effect.runPromise(Console.log(`${name.padEnd(6)}: ${line}`))
}
