import { postgresCheckpointer } from "@lite-agent/checkpoint-postgres"
import { CheckpointConflictError, StorageError, UserMessage } from "@lite-agent/core"

// Any PostgreSQL 12+ database; the tables go into a schema of their own, created on first use.
const url = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const laptop = postgresCheckpointer({ url, schema: "docs_demo" })
const server = postgresCheckpointer({ url, schema: "docs_demo" }) // another machine, the same sessions
const prompt = (content: string) => new UserMessage({ content, origin: "user" })

/** Append at `head`; when the outcome is unknown (the connection dropped), the head tells. */
const appendAt = async (sessionId: string, events: Array<UserMessage>, head: number): Promise<number> => {
  try {
    return await laptop.append(sessionId, events, head)
  } catch (err) {
    if (!(err instanceof StorageError)) throw err
    const now = await laptop.head(sessionId) // it either landed whole or not at all
    return now === head ? laptop.append(sessionId, events, head) : now
  }
}

try {
  await laptop.delete("shared")
  const knownHead = await appendAt("shared", [prompt("Refactor src/auth.ts")], 0)
  await server.append("shared", [prompt("Fix the login test")])
  try {
    await laptop.append("shared", [prompt("Now add tests")], knownHead)
  } catch (err) {
    if (!(err instanceof CheckpointConflictError)) throw err
    console.log(`conflict: expected ${err.expected}, actual ${err.actual}`)
    await appendAt("shared", [prompt("Now add tests")], err.actual)
  }
  const events = await server.read("shared")
  console.log(`head ${await server.head("shared")}:`, events.map((stored) => (stored.event as UserMessage).content))
} finally {
  await laptop.close()
  await server.close()
}
