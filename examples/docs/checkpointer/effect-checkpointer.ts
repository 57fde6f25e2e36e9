import { Effect, Stream } from "effect"
import { Checkpointer, MemoryCheckpointer, Session, UserMessage } from "@lite-agent/core"

const program = Effect.gen(function*() {
  const checkpointer = yield* Checkpointer
  yield* checkpointer.append("s", [new UserMessage({ content: "Fix the answer", origin: "user" })])
  const state = yield* Stream.runFold(checkpointer.read("s"), Session.emptySessionState, Session.step)
  return Session.checkpoints(state)
})
const checkpoints = await Effect.runPromise(program.pipe(Effect.provide(MemoryCheckpointer.layer))) // swap the Layer to swap the backend
for (const { seq, prompt } of checkpoints) console.log(`checkpoint ${seq}: ${prompt}`)
