/**
 * Worker for test/file.processes.test.ts: takes the cross-process lock of one session of
 * a file checkpointer directory — the very lock `fileCheckpointer` appends take — and
 * holds it until the process dies.
 *
 *   node --import tsx test/workers/lock-holder.ts <dir> <session>
 *
 * Prints "locked" from inside the lock, once it is held.
 */
import { realpathSync } from "node:fs"
import { Cause, Effect, Exit } from "effect"
import { lockAddress, withProcessLock } from "../../src/backends/file/lock.js"

const [dir, session] = process.argv.slice(2)
if (dir === undefined || session === undefined) throw new Error("usage: lock-holder.ts <dir> <session>")

// The facade derives the address from the real path of its directory; do the same.
const realDir = realpathSync(dir)

const fiber = Effect.runFork(
  withProcessLock(
    lockAddress(realDir, session),
    session,
    10_000,
    Effect.sync(() => process.stdout.write("locked\n")).pipe(Effect.zipRight(Effect.never))
  )
)
fiber.addObserver((exit) => {
  process.stderr.write(`lock-holder ended: ${Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "?"}\n`)
  process.exit(1)
})
// The lock's server is unref'd; keep the process alive until it is killed.
setInterval(() => {}, 1 << 30)
