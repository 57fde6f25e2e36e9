import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { sqliteCheckpointer } from "@lite-agent/checkpoint-sqlite"
import { CheckpointConflictError, UserMessage } from "@lite-agent/core"

const dir = mkdtempSync(join(tmpdir(), "docs-sqlite-"))
const checkpointer = sqliteCheckpointer({ file: join(dir, "sessions.db") }) // or ":memory:"
const otherProcess = sqliteCheckpointer({ file: join(dir, "sessions.db") }) // the same database, as another process sees it
const prompt = (content: string) => new UserMessage({ content, origin: "user" })

try {
  const knownHead = await checkpointer.append("shared", [prompt("Refactor src/auth.ts")])
  await otherProcess.append("shared", [prompt("Fix the login test")])
  try {
    await checkpointer.append("shared", [prompt("Now add tests")], knownHead)
  } catch (err) {
    if (!(err instanceof CheckpointConflictError)) throw err
    // Another process advanced the log: re-read, fold, retry at the real head.
    console.log(`conflict: expected ${err.expected}, actual ${err.actual}`)
    await checkpointer.append("shared", [prompt("Now add tests")], err.actual)
  }
  console.log(`head ${await checkpointer.head("shared")}`)
} finally {
  await checkpointer.close()
  await otherProcess.close()
  rmSync(dir, { recursive: true, force: true })
}
