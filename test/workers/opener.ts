/**
 * Opens a checkpointer on a store at the wall-clock instant `at` (so several processes open a
 * brand-new database or schema together), appends one event, and prints the outcome.
 * argv: <sqlite|postgres> <database file, or url#schema> <at epoch ms> <label>
 */
import { UserMessage } from "../../src/index.js"
import { isStoreBackend, openStore } from "../support/stores.js"

const [backend, location, at, label] = process.argv.slice(2)
if (!isStoreBackend(backend) || location === undefined) throw new Error("usage: opener.ts <backend> <location> <at> <label>")
const checkpointer = await openStore(backend, location)
while (Date.now() < Number(at)) {
  // Spin: the point is to collide with the other openers (the checkpointer opens on its first call).
}
try {
  const head = await checkpointer.append("shared", [new UserMessage({ content: `opened by ${label}`, origin: "user" })])
  console.log(JSON.stringify({ ok: true, head }))
} catch (error) {
  console.log(JSON.stringify({ ok: false, tag: (error as { _tag?: string })._tag, message: String(error) }))
} finally {
  await checkpointer.close()
}
