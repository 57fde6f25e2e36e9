/**
 * Opens a SQLite checkpointer on `file` at the wall-clock instant `at` (so several processes
 * open a brand-new database together), appends one event, and prints the outcome.
 * argv: <file> <at epoch ms> <label>
 */
import { sqliteCheckpointer } from "../../src/checkpoint-sqlite.js"
import { UserMessage } from "../../src/index.js"

const [file, at, label] = process.argv.slice(2)
while (Date.now() < Number(at)) {
  // Spin: the point is to collide with the other openers.
}
const checkpointer = sqliteCheckpointer({ file: file! })
try {
  const head = await checkpointer.append("shared", [new UserMessage({ content: `opened by ${label}`, origin: "user" })])
  console.log(JSON.stringify({ ok: true, head }))
} catch (error) {
  console.log(JSON.stringify({ ok: false, tag: (error as { _tag?: string })._tag, message: String(error) }))
} finally {
  await checkpointer.close()
}
