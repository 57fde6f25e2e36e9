import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, it } from "vitest"
import { FileCheckpointer, jsonCodec } from "../src/core.js"
import { checkpointerConformance } from "../src/testing.js"

// The default codec at both durability levels; the other codecs in file.codecs.conformance.test.ts.
// Flushing changes no rule the random sequences look at: "full" runs every example and a quarter
// of the random runs.
for (const synchronous of ["normal", "full"] as const) {
  const dir = mkdtempSync(join(tmpdir(), `lite-agent-conformance-json-`))
  checkpointerConformance(
    `file (json codec, synchronous ${synchronous})`,
    FileCheckpointer.layer({ dir, codec: jsonCodec, synchronous }),
    { runner: { describe, it }, reopen: true, ...(synchronous === "full" ? { propertyRuns: 50 } : {}) }
  )
}
