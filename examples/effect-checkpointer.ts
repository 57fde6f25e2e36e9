/**
 * The Effect API: the Checkpointer is a service; the backend is a Layer; a session is a
 * pure fold of its log. Run: npx tsx examples/effect-checkpointer.ts
 */
import { createHash } from "node:crypto"
import { Console, Effect, Stream } from "effect"
import {
  AssistantMessage,
  Checkpointer,
  FileChange,
  FileSnapshot,
  MemoryCheckpointer,
  Session,
  ToolResult,
  UserMessage
} from "@lite-agent/sdk/core"

const program = Effect.gen(function*() {
  const checkpointer = yield* Checkpointer
  const id = "effect-demo"
  const data = new TextEncoder().encode("export const answer = 41\n")
  yield* checkpointer.append(id, [
    new UserMessage({ content: "Fix the answer in src/answer.ts", origin: "user" }),
    new AssistantMessage({
      content: [{ type: "tool_use", id: "t1", name: "edit_file", input: { path: "src/answer.ts" } }]
    }),
    new FileSnapshot({
      toolUseId: "t1",
      path: "src/answer.ts",
      state: {
        _tag: "content",
        data,
        mode: 0o644,
        size: data.length,
        sha256: createHash("sha256").update(data).digest("hex")
      }
    }),
    new FileChange({ toolUseId: "t1", path: "src/answer.ts", operation: "edit" }),
    new ToolResult({ toolUseId: "t1", toolName: "edit_file", content: "edited", isError: false }),
    new UserMessage({ content: "Now add a test", origin: "user" })
  ])
  // Fold the streamed log into the session state, then project it.
  const state = yield* Stream.runFold(checkpointer.read(id), Session.emptySessionState, Session.step)
  yield* Console.log(`head ${state.head}, ${Session.conversation(state).entries.length} messages`)
  for (const checkpoint of Session.checkpoints(state)) {
    yield* Console.log(
      `checkpoint ${checkpoint.seq} "${checkpoint.prompt}" files=[${checkpoint.files.join(", ")}]`
    )
  }
})

// Swapping the backend is swapping this Layer.
await Effect.runPromise(program.pipe(Effect.provide(MemoryCheckpointer.layer)))
