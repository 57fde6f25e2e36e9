/**
 * The promise facade: append, conflict handling and time travel on the log, as a plain
 * TypeScript caller uses it. Run: npx tsx examples/promise-checkpointer.ts
 */
import { CheckpointConflictError, memoryCheckpointer, UserMessage } from "@lite-agent/sdk"

const checkpointer = memoryCheckpointer()
const sessionId = "demo"

let head = await checkpointer.append(sessionId, [new UserMessage({ content: "Refactor src/auth.ts", origin: "user" })])
// Events can also be given as plain JSON in their encoded form.
head = await checkpointer.append(sessionId, [{ _tag: "AssistantMessage", content: [{ type: "text", text: "Done." }] }], head)
console.log(`head after two appends: ${head}`)

// Another writer advanced the log: our stale append is refused, never silently merged.
await checkpointer.append(sessionId, [new UserMessage({ content: "from another process", origin: "user" })])
try {
  await checkpointer.append(sessionId, [new UserMessage({ content: "stale", origin: "user" })], head)
} catch (err) {
  if (err instanceof CheckpointConflictError) {
    console.log(`conflict: expected ${err.expected}, actual ${err.actual} — re-read and retry`)
    head = err.actual
  } else {
    throw err
  }
}

for (const { seq, event } of await checkpointer.read(sessionId)) {
  console.log(`${seq} ${event._tag}`)
}
await checkpointer.truncate(sessionId, 2, head)
console.log(`after truncate: head ${await checkpointer.head(sessionId)}`)
await checkpointer.close()
