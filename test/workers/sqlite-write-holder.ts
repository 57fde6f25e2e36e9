/**
 * Worker for test/sqlite.availability.test.ts: holds SQLite's write lock on a database — a
 * `BEGIN IMMEDIATE` transaction with an uncommitted row in it — until stdin closes, as
 * another process in the middle of a long write would.
 *
 *   node --import tsx test/workers/sqlite-write-holder.ts <database file>
 *
 * Prints "locked" once the lock is held; on stdin's end, rolls back and exits.
 */
import Database from "better-sqlite3"

const [file] = process.argv.slice(2)
if (file === undefined) throw new Error("usage: sqlite-write-holder.ts <database file>")
const db = new Database(file)
db.exec("BEGIN IMMEDIATE")
db.prepare("INSERT INTO lite_agent_sessions (id, head, mtime, generation) VALUES ('uncommitted', 1, 0, 1)").run()
process.stdout.write("locked\n")
process.stdin.resume()
process.stdin.on("end", () => {
  db.exec("ROLLBACK")
  db.close()
  process.exit(0)
})
