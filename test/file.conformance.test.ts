import { randomBytes } from "node:crypto"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, it } from "vitest"
import { aes256gcmCodec, FileCheckpointer, gzipCodec, jsonCodec } from "../src/core.js"
import { checkpointerConformance } from "../src/testing.js"

const codecs = { json: jsonCodec, gzip: gzipCodec(), "aes-256-gcm": aes256gcmCodec(randomBytes(32)) }

for (const [name, codec] of Object.entries(codecs)) {
  for (const synchronous of name === "json" ? (["normal", "full"] as const) : (["normal"] as const)) {
    const dir = mkdtempSync(join(tmpdir(), `lite-agent-conformance-${name}-`))
    checkpointerConformance(
      `file (${name} codec, synchronous ${synchronous})`,
      FileCheckpointer.layer({ dir, codec, synchronous }),
      { runner: { describe, it }, reopen: true }
    )
  }
}
