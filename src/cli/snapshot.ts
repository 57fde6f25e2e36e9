/**
 * The command as the entry of a V8 startup snapshot. Loading the command — Effect, the agent,
 * the stores, the parser — is most of its start-up; a process started from a snapshot of this
 * entry (bin/lite-agent, when one was built for its node: snapshotCache.ts) begins with all of it
 * loaded. Built by `node --build-snapshot` from its bundle, dist/cli/snapshot.cjs (scripts/build.mjs).
 */
import { createRequire } from "node:module"
import { resolve } from "node:path"
import { startupSnapshot } from "node:v8"
import { runCli } from "./run.js"

/** Set by the bundle's banner: while the snapshot is built only built-in modules can be required; from it, packages too. */
declare const __liteAgentUseRequire: ((require: NodeRequire) => void) | undefined

// The process started from the snapshot gets `node <dist/cli/main.js> <args…>` as its argv.
startupSnapshot.setDeserializeMainFunction(() => {
  // Packages loaded on demand (better-sqlite3, pg) resolve from the installed package.
  __liteAgentUseRequire?.(createRequire(resolve(process.argv[1]!)))
  runCli(process.argv.slice(2))
})
