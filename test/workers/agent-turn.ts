/**
 * Worker for test/agent.processes.test.ts: runs one agent turn in its own Node process, to
 * be killed part-way.
 *
 *   node --import tsx test/workers/agent-turn.ts '<json config>'
 *
 * - mode "tool": the promise facade with the file checkpointer and a scripted model whose
 *   first answer writes a.txt and then runs `shell` that records its pid and sleeps. Prints
 *   `tool_start <name>` and `event <seq> <tag>` lines as they happen.
 * - mode "model": the Effect layers (file checkpointer, a model that never answers): prints
 *   `calling model` once the model is called.
 * - mode "resume": a new agent on the same session and a scripted model that answers
 *   `recovered`; prints `result <json>`.
 * - mode "capture": the promise facade with the file checkpointer and a model that answers at
 *   once, so that the turn is mostly its workspace capture; prints `sending` right before it.
 */
import { LanguageModel } from "@effect/ai"
import { Effect, Layer, Stream } from "effect"
import { createLiteAgent, fileCheckpointer } from "../../src/index.js"
import { FileCheckpointer, LiteAgent } from "../../src/core.js"
import { scripted } from "../../src/provider.js"

interface Config {
  readonly mode: "tool" | "model" | "resume" | "capture"
  readonly dir: string
  readonly workdir: string
  readonly sessionId: string
  readonly prompt: string
}

const config = JSON.parse(process.argv[2] ?? "{}") as Config
const print = (line: string) => process.stdout.write(`${line}\n`)

const main = async () => {
  if (config.mode === "model") {
    const silentModel = Layer.effect(
      LanguageModel.LanguageModel,
      LanguageModel.make({
        generateText: () => Effect.dieMessage("a turn streams its model calls"),
        streamText: () => Stream.unwrap(Effect.as(Effect.sync(() => print("calling model")), Stream.never))
      })
    )
    const program = Effect.flatMap(LiteAgent.LiteAgent, (agent) => agent.send(config.prompt, { sessionId: config.sessionId }))
    await Effect.runPromise(
      program.pipe(
        Effect.provide(
          LiteAgent.layerWithWorkdir(config.workdir).pipe(
            Layer.provide(Layer.merge(FileCheckpointer.layer({ dir: config.dir }), silentModel))
          )
        )
      )
    )
    return
  }
  const checkpointer = fileCheckpointer({ dir: config.dir })
  const model = config.mode === "tool"
    ? scripted([
      {
        text: "Writing a.txt, then a long command.",
        toolCalls: [
          { name: "write_file", input: { path: "a.txt", content: "from the crashed turn\n" } },
          { name: "shell", input: { command: "echo $$ > bash.pid; sleep 60" } }
        ]
      }
    ])
    : config.mode === "capture"
    ? scripted([{ text: "looked" }])
    : scripted([{ text: "recovered" }])
  const agent = createLiteAgent({ model, workdir: config.workdir, checkpointer, sessionId: config.sessionId })
  agent.subscribe((event) => {
    if (event.type === "tool_start") print(`tool_start ${event.name}`)
    if (event.type === "session_event") print(`event ${event.seq} ${event.event._tag}`)
  })
  if (config.mode === "capture") print("sending")
  const result = await agent.send(config.prompt)
  print(`result ${JSON.stringify(result)}`)
  await agent.close()
  await checkpointer.close()
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
  process.exit(1)
})
