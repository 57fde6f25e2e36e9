import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { after, describe, it } from "node:test"
import { FileCheckpointer } from "@lite-agent/sdk/core"
import { checkpointerConformance } from "@lite-agent/sdk/testing" // also re-exported by /core

// Your backend's layer goes here; this is the file backend, in a temporary directory.
const dir = mkdtempSync(join(tmpdir(), "readme-conformance-"))
after(() => rmSync(dir, { recursive: true, force: true }))

checkpointerConformance("file backend", FileCheckpointer.layer({ dir }), {
  runner: { describe, it }, // node:test here; vitest's or jest's describe/it work the same
  reopen: true, // persistent: building the layer again sees the same data
  propertyRuns: 25 // random command sequences; default 200
})
