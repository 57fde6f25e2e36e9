import { randomBytes } from "node:crypto"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, it } from "vitest"
import { aes256gcmCodec, FileCheckpointer, gzipCodec } from "../src/core.js"
import { checkpointerConformance } from "../src/testing.js"

// The file backend with the codecs that transform each record (the default, json, in file.conformance.test.ts).
// Every example runs with each codec; the random sequences, which json runs 200 times, a quarter
// as often (the codec only changes how each record and object is written).
const codecs = { gzip: gzipCodec(), "aes-256-gcm": aes256gcmCodec(randomBytes(32)) }

for (const [name, codec] of Object.entries(codecs)) {
  const dir = mkdtempSync(join(tmpdir(), `lite-agent-conformance-${name}-`))
  checkpointerConformance(
    `file (${name} codec, synchronous normal)`,
    FileCheckpointer.layer({ dir, codec, synchronous: "normal" }),
    { runner: { describe, it }, reopen: true, propertyRuns: 50 }
  )
}
