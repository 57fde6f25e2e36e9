/**
 * Sessions whose restore a crash cut short: the restore runs in a worker process
 * (test/workers/restorer.ts) that SIGKILLs itself at a chosen point.
 */
import { expect } from "vitest"
import { sqliteCheckpointer } from "../../src/checkpoint-sqlite.js"
import { createLiteAgent, fileCheckpointer, type PromiseCheckpointer } from "../../src/index.js"
import { scripted } from "../../src/provider.js"
import { startWorker } from "./processes.js"

export type RestoreBackend = "file" | "sqlite"

/** A checkpointer on `location`: a directory (file backend) or a database file (SQLite). */
export const storeAt = (backend: RestoreBackend, location: string): PromiseCheckpointer =>
  backend === "sqlite" ? sqliteCheckpointer({ file: location }) : fileCheckpointer({ dir: location })

/**
 * Restore `sessionId` to `seq` (or undo, or redo, its last move) in a worker process that
 * SIGKILLs itself at `killAt` (`operation:N`, `before-move`, `after-move`: see the worker);
 * resolves once it is dead.
 */
export const restoreKilledAt = async (
  target: { readonly backend: RestoreBackend; readonly location: string; readonly workdir: string; readonly sessionId: string },
  seq: number | "undo" | "redo" | `fork:${string}`,
  killAt: string
) => {
  const worker = startWorker("restorer.ts", [target.backend, target.location, target.workdir, target.sessionId, String(seq), killAt])
  const { signal } = await worker.closed
  expect(signal, worker.stderr()).toBe("SIGKILL")
}

/**
 * A session of two prompts — the first writes each of `paths` as `one <path>\n`, the second
 * rewrites them as `two <path>\n` — and a restore to the second prompt killed at `killAt`.
 * Resolves to that checkpoint's seq.
 */
export const sessionWithInterruptedRestore = async (
  target: { readonly backend: RestoreBackend; readonly location: string; readonly workdir: string; readonly sessionId: string },
  paths: ReadonlyArray<string>,
  killAt: string
): Promise<number> => {
  const writes = (version: string) => ({
    toolCalls: paths.map((path) => ({ name: "write_file", input: { path, content: `${version} ${path}\n` } }))
  })
  const agent = createLiteAgent({
    model: scripted([writes("one"), { text: "wrote" }, writes("two"), { text: "rewrote" }]),
    workdir: target.workdir,
    checkpointer: storeAt(target.backend, target.location),
    sessionId: target.sessionId
  })
  let seq: number
  try {
    await agent.send("write them")
    await agent.send("rewrite them")
    seq = (await agent.listCheckpoints(target.sessionId))[1]!.seq
  } finally {
    await agent.close()
  }
  await restoreKilledAt(target, seq, killAt)
  return seq
}
