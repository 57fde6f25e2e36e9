/**
 * Worker for the process tests: takes the session lock of one session of a file checkpointer
 * directory — the very lock `fileCheckpointer` mutations take (the default `SessionLock`) — and
 * holds it until the process dies.
 *
 *   node --import tsx test/workers/lock-holder.ts <dir> <session> [leaseMs]
 *
 * Prints "locked" from inside the lock, once it is held.
 */
import { realpathSync } from "node:fs"
import { Cause, Effect, Exit } from "effect"
import { SessionLock } from "../../src/backends/file/SessionLock.js"
import * as SessionLocks from "../../src/backends/file/SessionLock.js"

const [dir, session, lease] = process.argv.slice(2)
if (dir === undefined || session === undefined) throw new Error("usage: lock-holder.ts <dir> <session> [leaseMs]")

const fiber = Effect.runFork(
  Effect.flatMap(SessionLock, (lock) =>
    // The backend locks under the real path of its directory; do the same.
    lock.withLock(
      { directory: realpathSync(dir), sessionId: session, timeoutMs: 10_000 },
      () => Effect.sync(() => process.stdout.write("locked\n")).pipe(Effect.zipRight(Effect.never))
    )).pipe(Effect.provide(SessionLocks.layerNode(lease === undefined ? {} : { leaseMs: Number(lease) })))
)
fiber.addObserver((exit) => {
  process.stderr.write(`lock-holder ended: ${Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "?"}\n`)
  process.exit(1)
})
