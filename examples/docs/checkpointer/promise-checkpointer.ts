import { CheckpointConflictError, memoryCheckpointer, UserMessage } from "@lite-agent/sdk"

const checkpointer = memoryCheckpointer()
const head = await checkpointer.append("demo", [new UserMessage({ content: "Refactor src/auth.ts", origin: "user" })])
try {
  // Events may also be given in their encoded JSON form.
  await checkpointer.append("demo", [{ _tag: "UserMessage", content: "stale", origin: "user" }], head - 1)
} catch (err) {
  if (!(err instanceof CheckpointConflictError)) throw err
  console.log(`conflict in ${err.sessionId}: expected ${err.expected}, actual ${err.actual}; re-read and retry`)
}
for await (const { seq, event } of checkpointer.readIterable("demo")) console.log(seq, event._tag)
await checkpointer.close()
