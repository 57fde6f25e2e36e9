/**
 * The command as the entry of a V8 startup snapshot. Loading the command — Effect, the agent,
 * the stores, the parser — is most of its start-up; a process started from a snapshot of this
 * entry (bin/lite-agent, when one was built for its node: snapshotCache.ts) begins with all of it
 * loaded. Built by `node --build-snapshot` from its bundle, dist/cli/snapshot.cjs (scripts/build.mjs).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { startupSnapshot } from "node:v8"
import { Effect, Layer, Stream } from "effect"
import { LiteAgent } from "../agent/LiteAgent.js"
import * as FileCheckpointer from "../backends/file/FileCheckpointer.js"
import { jsonText } from "../core/encoding.js"
import { runCli } from "./run.js"
import { parseOptions } from "./args.js"
import { MAIN_OPTIONS } from "./help.js"
import { agentLayer, modelProvider } from "./setup.js"

/** Set by the bundle's banner: while the snapshot is built only built-in modules can be required; from it, packages too. */
declare const __liteAgentUseRequire: ((require: NodeRequire) => void) | undefined

/**
 * One turn of the agent in a scratch directory — a scripted model that writes, edits and reads a
 * file, on the file store — so what the first turn of every start would build (schema decoders,
 * the event codec's tables, the functions' bytecode) is built once, into the snapshot. What must
 * differ per process is kept out of it: the session has a fixed id (node hands out
 * `randomUUID`s from a batch it made earlier, which the snapshot would freeze), the file store's
 * lock knows its kernel per process (lockLiveness.ts), and the workspace is captured for the
 * file tools only (with a whole-workdir capture here, processes started from the snapshot exited
 * while a slow model had yet to answer; not pinned down further). test/package.test.ts checks
 * that starts from the snapshot make sessions of their own and wait for a slow model.
 */
const warmUp = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "lite-agent-snapshot-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  mkdirSync(join(dir, "work"))
  const turns = join(dir, "turns.json")
  writeFileSync(turns, JSON.stringify([
    {
      toolCalls: [
        { name: "write_file", input: { path: "notes.txt", content: "one\n" } },
        { name: "edit_file", input: { path: "notes.txt", old_string: "one", new_string: "two" } },
        { name: "read_file", input: { path: "notes.txt" } }
      ]
    },
    { text: "done" }
  ]))
  const args = yield* parseOptions("lite-agent", MAIN_OPTIONS, ["-p", "warm up", "--model", `scripted:${turns}`, "--permission-mode", "acceptEdits"])
  const layer = agentLayer({
    workdir: join(dir, "work"),
    model: yield* modelProvider(args.model ?? "anthropic"),
    modelName: undefined,
    maxSteps: undefined,
    sessionId: "snapshot-warm-up",
    capture: "tools",
    checkpointer: undefined,
    permissions: { permissionMode: args.permissionMode ?? "default" }
  }, FileCheckpointer.layer({ dir: join(dir, "sessions"), lockLeaseMs: 500 }))
  yield* Effect.flatMap(LiteAgent, (agent) => Stream.runForEach(agent.run(args.print ?? ""), (event) => Effect.sync(() => jsonText(event)))).pipe(
    Effect.provide(Layer.orDie(layer))
  )
}).pipe(Effect.scoped)

/**
 * Run `effect`, then wait out every timer it set. Node keeps a timer list, and when the next list
 * is due, after the list's last timer is cleared, until that time comes: a snapshot taken
 * earlier carries that due time, on this process's clock, and a started process would then
 * never schedule a timer due later than it (the file store's lock heartbeat, cleared when the
 * warm-up closes it, did exactly that: a model call slower than a second never woke up).
 */
const runWaitingOutTimers = async (effect: Effect.Effect<void, unknown>) => {
  let longestMs = 0
  const originals = { setTimeout: globalThis.setTimeout, setInterval: globalThis.setInterval }
  const noting = <F extends (handler: () => void, ms?: number) => unknown>(original: F) =>
    ((handler: () => void, ms?: number, ...rest: Array<unknown>) => {
      longestMs = Math.max(longestMs, Number(ms) || 1)
      return (original as (...args: Array<unknown>) => unknown)(handler, ms, ...rest)
    }) as unknown as F
  globalThis.setTimeout = noting(originals.setTimeout)
  globalThis.setInterval = noting(originals.setInterval)
  try {
    await Effect.runPromise(effect)
  } finally {
    globalThis.setTimeout = originals.setTimeout
    globalThis.setInterval = originals.setInterval
  }
  await new Promise((resolve) => setTimeout(resolve, longestMs + 20))
}

// A failed warm-up fails the build: the command then starts without a snapshot, as it would without one.
runWaitingOutTimers(warmUp).catch((error: unknown) => {
  process.stderr.write(`lite-agent: the snapshot's warm-up failed: ${String(error)}\n`)
  process.exit(1)
})

// The process started from the snapshot gets `node <dist/cli/main.js> <args…>` as its argv.
startupSnapshot.setDeserializeMainFunction(() => {
  // Packages loaded on demand (better-sqlite3, pg) resolve from the installed package.
  __liteAgentUseRequire?.(createRequire(resolve(process.argv[1]!)))
  runCli(process.argv.slice(2))
})
