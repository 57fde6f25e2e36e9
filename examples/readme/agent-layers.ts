import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Layer } from "effect"
import { FileCheckpointer, LiteAgent } from "@lite-agent/core"
import { scriptedLayer } from "@lite-agent/provider"

const workdir = mkdtempSync(join(tmpdir(), "lite-agent-layers-work-"))
const sessions = mkdtempSync(join(tmpdir(), "lite-agent-layers-sessions-"))

const program = Effect.flatMap(LiteAgent.LiteAgent, (agent) => agent.send("Write hello.txt"))
const agentLayer = LiteAgent.layerWithWorkdir(workdir).pipe(
  Layer.provide(Layer.merge(
    FileCheckpointer.layer({ dir: sessions }), // or MemoryCheckpointer.layer, SqliteCheckpointer.layer(...)
    scriptedLayer([ // or anthropicLayer({ modelName: "claude-sonnet-4-6" })
      { toolCalls: [{ name: "write_file", input: { path: "hello.txt", content: "hello\n" } }] },
      { text: "Wrote hello.txt." }
    ])
  ))
)

try {
  // The layers are built for this run and released (the checkpointer closed) when it ends.
  const result = await Effect.runPromise(program.pipe(Effect.provide(agentLayer)))
  console.log(`${result.text} head ${result.head}, tools: ${result.toolCalls.map((call) => call.output).join("; ")}`)
} finally {
  for (const dir of [workdir, sessions]) rmSync(dir, { recursive: true, force: true })
}
