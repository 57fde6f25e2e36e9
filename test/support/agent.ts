/**
 * Helpers for the agent tests: checkpointers per backend through the facade, a fresh workdir,
 * and the text a scripted model was shown.
 */
import type { Prompt } from "@effect/ai"
import { mkdtempSync, realpathSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach } from "vitest"
import { fileCheckpointer, memoryCheckpointer, type PromiseCheckpointer, type StoredEvent } from "../../src/index.js"
import { sqliteCheckpointer } from "../../src/checkpoint-sqlite.js"
import type { Backend } from "./agentSim.js"

/** Returns `track`: what a test passes to it is closed after that test, the last opened first. */
export const closeAfterEach = () => {
  const opened: Array<{ close(): Promise<void> }> = []
  afterEach(async () => {
    for (const thing of opened.splice(0).reverse()) await thing.close()
  })
  return <T extends { close(): Promise<void> }>(thing: T): T => {
    opened.push(thing)
    return thing
  }
}

export const tempDir = (label: string) => realpathSync(mkdtempSync(join(tmpdir(), `lite-agent-${label}-`)))

export const promiseCheckpointer = (backend: Backend): PromiseCheckpointer => {
  switch (backend) {
    case "memory":
      return memoryCheckpointer()
    case "file":
      return fileCheckpointer({ dir: tempDir("agent-log") })
    case "sqlite":
      return sqliteCheckpointer({ file: join(tempDir("agent-db"), "sessions.db") })
  }
}

/** Everything a model call showed the model, one line per part, e.g. `user: hello`, `tool(bash): ok`. */
export const promptLines = (prompt: Prompt.Prompt): Array<string> =>
  prompt.content.flatMap((message) =>
    message.role === "system"
      ? [`system: ${message.content}`]
      : message.content.flatMap((part) => {
        switch (part.type) {
          case "text":
            return [`${message.role}: ${part.text}`]
          case "tool-call":
            return [`${message.role} calls ${part.name}(${JSON.stringify(part.params)})`]
          case "tool-result":
            return [`tool(${part.name})${part.isFailure ? " failed" : ""}: ${String(part.result)}`]
          default:
            return []
        }
      })
  )

/** Poll `check` until it holds (real time; for background work). */
/** A file store's session log, read by a checkpointer of its own: `sessionId`, or the most recent session. */
export const readFileLog = async (dir: string, sessionId?: string): Promise<Array<StoredEvent>> => {
  const checkpointer = fileCheckpointer({ dir })
  try {
    return await checkpointer.read(sessionId ?? (await checkpointer.list())[0]!.id)
  } finally {
    await checkpointer.close()
  }
}

export const eventually = async (check: () => Promise<boolean> | boolean, timeoutMs = 20_000) => {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("condition not reached in time")
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
