import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, it } from "vitest"
import { SqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { checkpointerConformance } from "../src/testing.js"

const file = join(mkdtempSync(join(tmpdir(), "lite-agent-sqlite-")), "sessions.db")
checkpointerConformance("sqlite (file, synchronous normal)", SqliteCheckpointer.layer({ file }), {
  runner: { describe, it },
  reopen: true
})
// The same engine without a file: every example, a quarter of the random runs.
checkpointerConformance("sqlite (:memory:)", SqliteCheckpointer.layer({ file: ":memory:" }), { runner: { describe, it }, propertyRuns: 50 })
