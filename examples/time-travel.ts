/**
 * Time travel, worked: an agent-like session changes files through the file tools, then the
 * session is rolled back to before the second prompt — and a restore that would overwrite
 * an edit of yours is refused. Run: npx tsx examples/time-travel.ts
 */
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Console, Effect, Layer } from "effect"
import {
  AssistantMessage,
  Checkpointer,
  FileCheckpointer,
  FileTools,
  RestoreRefusedError,
  TimeTravel,
  ToolResult,
  UserMessage,
  Workspace
} from "@lite-agent/sdk/core"

const workdir = mkdtempSync(join(tmpdir(), "time-travel-example-"))
const sessionId = "example"

/** One turn as the agent records it: the prompt, the tool call, the change, the result. */
const turn = (prompt: string, toolUseId: string, path: string, content: string) =>
  Effect.gen(function*() {
    const checkpointer = yield* Checkpointer
    const tools = yield* FileTools.FileTools
    yield* checkpointer.append(sessionId, [
      new UserMessage({ content: prompt, origin: "user" }),
      new AssistantMessage({ content: [{ type: "tool_use", id: toolUseId, name: "write_file", input: { path, content } }] })
    ])
    yield* tools.writeFile({ sessionId, toolUseId }, { path, content })
    yield* checkpointer.append(sessionId, [new ToolResult({ toolUseId, toolName: "write_file", content: "ok", isError: false })])
  })

const program = Effect.gen(function*() {
  const timeTravel = yield* TimeTravel.TimeTravel
  yield* turn("Create the greeting", "t1", "greeting.txt", "hello\n")
  yield* turn("Make it louder", "t2", "greeting.txt", "HELLO!!!\n")
  yield* turn("Add a farewell", "t3", "farewell.txt", "bye\n")

  const checkpoints = yield* timeTravel.listCheckpoints(sessionId)
  for (const c of checkpoints) yield* Console.log(`checkpoint ${c.seq}: "${c.prompt}" files=[${c.files.join(", ")}]`)

  // Your own edit after the agent's: restore refuses rather than overwrite it.
  writeFileSync(join(workdir, "farewell.txt"), "bye, edited by hand\n")
  const refused = yield* Effect.flip(timeTravel.restore(sessionId, checkpoints[1]!.seq))
  if (refused instanceof RestoreRefusedError) {
    for (const r of refused.refusals) yield* Console.log(`refused: ${r.path} ${r.reason}`)
  }

  // Put the agent's version back, then roll back to just before "Make it louder".
  writeFileSync(join(workdir, "farewell.txt"), "bye\n")
  const result = yield* timeTravel.restore(sessionId, checkpoints[1]!.seq)
  yield* Console.log(`restored: ${result.restoredFiles.join(", ")}; conversation restored: ${result.conversationRestored}`)
  yield* Console.log(`greeting.txt is now: ${JSON.stringify(readFileSync(join(workdir, "greeting.txt"), "utf8"))}`)
  yield* Console.log(`checkpoints left: ${(yield* timeTravel.listCheckpoints(sessionId)).map((c) => c.prompt).join(", ")}`)
})

// The pieces are Layers: the default file checkpointer, the workspace, the tools, time travel.
const sessions = mkdtempSync(join(tmpdir(), "time-travel-example-sessions-"))
const base = Layer.merge(FileCheckpointer.layer({ dir: sessions }), Workspace.layer(workdir))
const live = Layer.mergeAll(TimeTravel.layer, FileTools.layer()).pipe(Layer.provideMerge(base))
await Effect.runPromise(program.pipe(Effect.provide(live)))
