/**
 * A per-session mutex that holds across fibers of one process and across processes of one
 * machine.
 *
 * Across processes it is a listening Unix socket in Linux's abstract namespace: binding a
 * name is atomic, a second bind fails with EADDRINUSE, and the kernel releases the name the
 * moment the holder dies — SIGKILL included — so there is no lease to expire, no stale file
 * to judge and no way to take a live holder's lock. A waiter polls with jittered back-off
 * capped at `MAX_POLL_MS`, so it gets a dead holder's lock within that bound of the death.
 *
 * Elsewhere (macOS, BSD) the socket is a file in the OS temp directory; a holder killed
 * with SIGKILL leaves the file behind, and a waiter removes it once connecting to it is
 * refused. Removing a stale socket file and binding are two steps there, so two waiters
 * racing for a dead holder's lock can, rarely, both win; Linux has no such window.
 *
 * Network file systems are out of scope: the lock is local to one machine (and to one
 * network namespace on Linux).
 */
import { createHash } from "node:crypto"
import { mkdirSync, unlinkSync } from "node:fs"
import net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Duration, Effect, Random } from "effect"
import { CheckpointBusyError, StorageError } from "../../core/errors.js"

/** Longest pause between two attempts to take a held lock. */
export const MAX_POLL_MS = 25

const useAbstractNamespace = process.platform === "linux"

/** Where the lock for (`realDir`, `sessionId`) lives. Stable for every process on the machine. */
export const lockAddress = (realDir: string, sessionId: string): string => {
  const digest = createHash("sha256").update(realDir).update("\0").update(sessionId).digest("hex").slice(0, 32)
  if (useAbstractNamespace) return `\0lite-agent/session-lock/${digest}`
  // Socket paths are limited to 104 bytes on macOS: keep the name short and the directory shallow.
  const dir = join(process.platform === "win32" ? tmpdir() : "/tmp", "lite-agent-locks")
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  return join(dir, `${digest}.sock`)
}

type Attempt = { readonly _tag: "acquired"; readonly server: net.Server } | { readonly _tag: "held" }

const tryBind = (address: string): Promise<Attempt> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "EADDRINUSE") resolve({ _tag: "held" })
      else reject(error)
    })
    // `exclusive`: never share the handle with cluster workers.
    server.listen({ path: address, exclusive: true }, () => {
      server.unref()
      resolve({ _tag: "acquired", server })
    })
  })

/** Socket-file platforms only: is a process still listening on `address`? */
const isListening = (address: string): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = net.connect({ path: address })
    socket.once("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.once("error", (error: NodeJS.ErrnoException) =>
      resolve(error.code !== "ECONNREFUSED" && error.code !== "ENOENT"))
  })

const attempt = async (address: string): Promise<Attempt> => {
  const first = await tryBind(address)
  if (first._tag === "acquired" || useAbstractNamespace) return first
  if (await isListening(address)) return first
  try {
    unlinkSync(address)
  } catch {
    // Someone else removed it first; either way, try again.
  }
  return tryBind(address)
}

const release = (server: net.Server) => Effect.async<void>((resume) => {
  server.close(() => resume(Effect.void))
})

/**
 * Run `use` holding the cross-process lock at `address`, waiting up to `timeoutMs` for it.
 * Callers serialise their own fibers first (a semaphore), so polling here only ever
 * waits for other processes. Waiting can be interrupted; a bind in flight cannot, so an
 * interrupted waiter never leaves a lock behind.
 */
export const withProcessLock = <A, E, R>(
  address: string,
  sessionId: string,
  timeoutMs: number,
  use: Effect.Effect<A, E, R>
): Effect.Effect<A, E | CheckpointBusyError | StorageError, R> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const started = Date.now()
      let pauseMs = 1
      let server: net.Server | undefined
      while (server === undefined) {
        const result = yield* Effect.tryPromise({
          try: () => attempt(address),
          catch: (cause) =>
            new StorageError({ operation: "lock", detail: `cannot take the session lock: ${String(cause)}`, cause })
        })
        if (result._tag === "acquired") {
          server = result.server
          break
        }
        const waited = Date.now() - started
        if (waited >= timeoutMs) {
          return yield* new CheckpointBusyError({
            sessionId,
            waitedMs: waited,
            detail: "another process holds the session lock"
          })
        }
        const jitter = yield* Random.nextRange(0.5, 1)
        yield* restore(Effect.sleep(Duration.millis(Math.min(pauseMs * jitter, timeoutMs - waited))))
        pauseMs = Math.min(pauseMs * 2, MAX_POLL_MS)
      }
      const held = server
      return yield* restore(use).pipe(Effect.ensuring(release(held)))
    })
  )
