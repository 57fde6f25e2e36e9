#!/usr/bin/env node
/**
 * The `lite-agent` command's entry. `--help` and `--version` are answered from help.ts,
 * which imports nothing; anything else loads the command (run.ts) — the agent, the stores, the
 * parser — and, within it, what only one command needs (the server, a provider) when that command
 * runs. The installed command usually skips this file's loading altogether: bin/lite-agent starts
 * node from a snapshot of the loaded command (snapshot.ts), which this file builds when missing.
 */
import { dirname } from "node:path"
import { fileURLToPath } from "node:url"
import { answeredHelpOrVersion } from "./help.js"
import { buildSnapshotInBackground, snapshotBlob } from "./snapshotCache.js"

const args = process.argv.slice(2)
if (!answeredHelpOrVersion(args)) {
  // Started without a snapshot: build one for the next start (bin/lite-agent uses it).
  const distCli = dirname(fileURLToPath(import.meta.url))
  const blob = snapshotBlob(distCli)
  if (blob !== undefined) buildSnapshotInBackground(distCli, blob)
  ;(await import("./run.js")).runCli(args)
}
