/**
 * The file backend's per-session lock, as a service: the backend takes it from its context,
 * so tests and unusual deployments can swap it.
 *
 * - `layerNode` (the default): fibers of one process queue on an in-process mutex, and
 *   processes exclude each other through lock files in the sessions directory (lockFile.ts),
 *   which hold across containers, sandboxes and every Linux namespace, and on macOS.
 * - `layerInProcess`: the in-process mutex alone, for a directory no other process writes.
 *
 * A holder calls `ensureHeld` right before each write; it fails with `CheckpointLockLostError`
 * when the lock is no longer its own, so a writer that was paused past its lease writes nothing.
 *
 * `layerNode` hands a lock file on to the next holder of its process until the next turn of the
 * event loop (with what the last holder `leave`s, as `inherited`), wakes waiters when a lock
 * file is removed, and makes processes take turns: one that has kept a lock `TURN_MS` while
 * another waits lets it go.
 */
import { join } from "node:path"
import * as fs from "node:fs"
import { Context, Duration, Effect, Exit, Layer, Schema, Scope } from "effect"
import { messageOf } from "../internal/causes.js"
import { makeKeyedMutex } from "../internal/keyedMutex.js"
import { decodeOptions, numberAtLeast } from "../../core/internal/options.js"
import { CheckpointBusyError, CheckpointLockLostError, ConfigurationError, StorageError } from "../../core/errors.js"
import { Busy, retryWhileBusy } from "../internal/busy.js"
import { type DirectoryChanges, watchDirectory } from "../internal/directoryChanges.js"
import { monotonicNow } from "../internal/monotonic.js"
import * as LockFile from "./lockFile.js"
import { makeTurns, type Tenure } from "./lockTurns.js"
import type { OpenLog } from "./openLogs.js"

export interface SessionLockTarget {
  /** The sessions directory (its real path: every process must name it alike). */
  readonly directory: string
  readonly sessionId: string
  /** How long to wait for another process before `CheckpointBusyError`. */
  readonly timeoutMs: number
}

/**
 * A lock held, by a holder that may leave a `Baton` to the next one. The file backend's baton is
 * its open log (openLogs.ts): handed over with the lock, it is reused without a look at the file.
 */
export interface HeldSessionLock<Baton = OpenLog> {
  /** Succeeds while the lock is still this holder's; run it right before every write. */
  readonly ensureHeld: Effect.Effect<void, CheckpointLockLostError | StorageError>
  /**
   * What the previous holder left with `leave`, when this process has kept the lock since
   * without a break (so no one else can have written meanwhile); otherwise `undefined`.
   * Optional: a lock service without it never vouches for continuity.
   */
  readonly inherited?: Baton | undefined
  /** Leave `baton` to the next holder, should this process keep the lock for it. */
  readonly leave?: (baton: Baton) => void
}

export interface SessionLockService<Baton = OpenLog> {
  /** Run `use` holding the lock of one session; released when `use` ends, however it ends. */
  readonly withLock: <A, E, R>(
    target: SessionLockTarget,
    use: (held: HeldSessionLock<Baton>) => Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | CheckpointBusyError | StorageError, R>
}

export class SessionLock extends Context.Tag("@lite-agent/backends/file/SessionLock")<SessionLock, SessionLockService>() {}

// ---------------------------------------------------------------------------------------
// In-process exclusion (src/core/keyedMutex.ts)
// ---------------------------------------------------------------------------------------

const keyOf = (target: SessionLockTarget) => `${target.directory}\0${target.sessionId}`

/** For a sessions directory that no other process writes: fibers exclude each other, nothing more. */
export const makeInProcess = <Baton = OpenLog>(): SessionLockService<Baton> => {
  const mutex = makeKeyedMutex()
  const alwaysHeld: HeldSessionLock<Baton> = { ensureHeld: Effect.void }
  return { withLock: (target, use) => mutex.withKey(keyOf(target), Effect.suspend(() => use(alwaysHeld))) }
}

export const layerInProcess: Layer.Layer<SessionLock> = Layer.sync(SessionLock, makeInProcess)

// ---------------------------------------------------------------------------------------
// Across processes: lock files (see lockFile.ts for the protocol)
// ---------------------------------------------------------------------------------------


export const DEFAULT_LEASE_MS = 5_000
/**
 * Longest pause between two attempts to take a held lock. Waiters are woken when the lock file
 * is removed, so this only bounds the wait where the file system sends no events; every timer
 * wake-up costs CPU the holder could use.
 */
export const MAX_POLL_MS = 25
export { TURN_MS } from "./lockTurns.js"
/** A `.wanted/` mark younger than this says someone waits (waiters renew it at every attempt). */
const WANTED_FRESH_MS = 2 * MAX_POLL_MS

const storageError = (operation: string) => (cause: unknown) =>
  new StorageError({ operation, detail: `session lock: ${messageOf(cause)}`, cause })

/** The shortest lease accepted. */
export const MIN_LEASE_MS = 100

export const NodeSessionLockOptions = Schema.Struct({
  /**
   * How long a holder that stops renewing its lock keeps it. A dead holder on the same kernel
   * (any container or namespace of this machine) loses its lock at once; the lease bounds the
   * wait for a holder that is paused or that runs on another kernel. Default 5000; at least 100.
   */
  leaseMs: Schema.optional(numberAtLeast(MIN_LEASE_MS))
})
export interface NodeSessionLockOptions extends Schema.Schema.Type<typeof NodeSessionLockOptions> {}

const resolveLease = (input: NodeSessionLockOptions): Effect.Effect<number, ConfigurationError> =>
  Effect.map(decodeOptions(NodeSessionLockOptions, input, "session lock options"), (options) => options.leaseMs ?? DEFAULT_LEASE_MS)

const lostLock = (sessionId: string, leaseMs: number) =>
  new CheckpointLockLostError({
    sessionId,
    detail: `another process took the lock over after this one had not renewed it for ${leaseMs} ms ` +
      "(the process was paused, or its event loop stalled)"
  })

/** A lock file handed on to the next holder of this process (see `releaseSoon`). */
interface HandedOn<Baton> {
  readonly owner: LockFile.Owner
  readonly file: LockFile.HeldFile
  /** What its last holder left for the next one. */
  readonly baton: Baton | undefined
}

/** The lock-file service; its liveness sockets are closed when the scope closes. */
export const makeNode = <Baton = OpenLog>(options: NodeSessionLockOptions = {}) =>
  Effect.gen(function*() {
    const leaseMs = yield* resolveLease(options)
    const kernel = LockFile.kernelIdentity()
    const owners = new Map<string, LockFile.Owner>()
    const scope = yield* Effect.scope
    /** Each locks directory's changes: a waiter wakes when the lock it waits for is removed. */
    const lockChanges = new Map<LockFile.Owner, DirectoryChanges>()
    const held = new Set<LockFile.HeldFile>()
    const releaseFile = (owner: LockFile.Owner, file: LockFile.HeldFile) => {
      held.delete(file)
      LockFile.release(owner, file)
    }
    /**
     * Lock files kept a moment, by key, for the next fiber of this process that needs the same
     * session: a holder that ends hands its lock file on rather than removing it, and it is
     * released at the next turn of the event loop unless someone here took it up meanwhile
     * (appends issued together then share one lock file instead of each creating it anew).
     */
    const handedOn = new Map<string, HandedOn<Baton>>()
    const releaseSoon = (key: string, kept: HandedOn<Baton>) => {
      handedOn.set(key, kept)
      setImmediate(() => {
        if (handedOn.get(key) !== kept) return
        handedOn.delete(key)
        releaseFile(kept.owner, kept.file)
        tenureOf(key).releasedAt = monotonicNow()
      })
    }

    // Taking turns with other processes that wait for a lock this one keeps taking.
    const { shouldGiveWay, taken, tenureOf } = makeTurns(WANTED_FRESH_MS)
    const mutex = makeKeyedMutex()

    // One timer renews every lock this service holds. Unref'd: it never keeps a process alive.
    const heartbeat = setInterval(() => {
      for (const file of held) {
        try {
          LockFile.renew(file)
        } catch {
          // A renewal that fails leaves the lease to run out; the next ensureHeld reports it.
        }
      }
    }, leaseMs / 5)
    heartbeat.unref()
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        clearInterval(heartbeat)
        for (const kept of handedOn.values()) releaseFile(kept.owner, kept.file)
        handedOn.clear()
        for (const owner of owners.values()) LockFile.closeOwner(owner)
        owners.clear()
      })
    )

    // This service's presence (lock record, liveness socket) in each directory it locks in, set
    // up on first use, one directory at a time. A failure is not remembered: the next lock tries again.
    const opening = yield* Effect.makeSemaphore(1)
    const open = (directory: string) =>
      Effect.suspend(() => {
        const ready = owners.get(directory)
        if (ready !== undefined) return Effect.succeed(ready)
        // Uninterruptible: a socket opened for nobody would listen until the process ends.
        return Effect.uninterruptible(Effect.tryPromise({
          try: () => LockFile.openOwner(directory, leaseMs, kernel),
          catch: storageError("open locks directory")
        })).pipe(
          Effect.tap((owner) =>
            Effect.map(Scope.extend(watchDirectory(owner.locksDir), scope), (changes) => {
              owners.set(directory, owner)
              lockChanges.set(owner, changes)
            })
          )
        )
      })
    const ownerOf = (directory: string) =>
      Effect.suspend(() => {
        const owner = owners.get(directory)
        return owner === undefined ? opening.withPermits(1)(open(directory)) : Effect.succeed(owner)
      })

    /** The lock file handed on for `key`, if it is still this process's; `undefined` otherwise (then released). */
    const takeHandedOn = (key: string) => {
      const kept = handedOn.get(key)
      if (kept === undefined) return undefined
      handedOn.delete(key)
      let still = false
      try {
        // A lease renewed less than half a lease ago cannot have been judged expired (nor can a
        // live holder be judged dead): then it is still ours without a look at the file.
        still = LockFile.renewedWithin(kept.file, leaseMs / 2) || LockFile.confirm(kept.owner, kept.file)
      } catch {
        // Judged below as lost: the lock is taken the usual way.
      }
      if (still) return kept
      releaseFile(kept.owner, kept.file)
      return undefined
    }

    /**
     * Take the lock file of `target` (waiting while another process holds it); `onCreated` is
     * called in the same synchronous step that creates it, so it can always be released.
     */
    const take = (owner: LockFile.Owner, target: SessionLockTarget, tenure: Tenure, onCreated: (file: LockFile.HeldFile) => void) => {
      const path = join(owner.locksDir, target.sessionId)
      const create = Effect.try({
        try: () => {
          const file = LockFile.create(owner, path)
          if (file !== undefined) onCreated(file)
          return file
        },
        catch: storageError("lock")
      })
      let waited = false
      // Create the lock; if someone has it, judge their lock, and if it was stale, create again.
      // Still held: say so, for a holder that has had it a while to give way.
      const attempt = Effect.flatMap(create, (file) =>
        file !== undefined
          ? Effect.succeed(file)
          : Effect.tryPromise({ try: () => LockFile.clearIfStale(owner, path), catch: storageError("lock") }).pipe(
            Effect.flatMap((cleared) => (cleared ? create : Effect.succeed(undefined))),
            Effect.flatMap((again) =>
              again === undefined
                ? Effect.suspend(() => {
                  waited = true
                  LockFile.markWanted(owner, target.sessionId)
                  return Effect.fail(new Busy({ detail: "another process holds the session lock" }))
                })
                : Effect.succeed(again)
            )
          ))
      const away = tenure.awayUntil - monotonicNow()
      const changes = lockChanges.get(owner)
      // Woken when the lock file is removed (not when it is made, or renewed).
      const released = changes?.next((name) => name === target.sessionId && !fs.existsSync(path))
      return Effect.zipRight(
        // Having just given way, leave the waiters their chance first.
        away > 0 ? Effect.sleep(Duration.millis(away)) : Effect.void,
        retryWhileBusy(attempt, { timeoutMs: target.timeoutMs, maxPauseMs: MAX_POLL_MS, sessionId: target.sessionId, wakeUp: released })
      ).pipe(
        // Got it, gave up or was interrupted: a waiter no more (others waiting put the sign back).
        Effect.ensuring(Effect.sync(() => {
          if (waited) LockFile.unmarkWanted(owner, target.sessionId)
        }))
      )
    }

    /** Run `use` holding the lock of `target` (the caller holds the in-process mutex of its key). */
    const locked = <A, E, R>(
      owner: LockFile.Owner,
      target: SessionLockTarget,
      use: (lock: HeldSessionLock<Baton>) => Effect.Effect<A, E, R>
    ): Effect.Effect<A, E | CheckpointBusyError | StorageError, R> => {
      const key = keyOf(target)
      const kept = takeHandedOn(key)
      const tenure = tenureOf(key)
      // Released (or handed on) on every exit, interruption included, so a taken lock can never be left behind.
      let acquired: LockFile.HeldFile | undefined = kept?.file
      let baton: Baton | undefined
      // Set once `ensureHeld` found the lock file taken over: nothing of it is handed on.
      let lost = false
      let counted = false
      const holding = (file: LockFile.HeldFile) => {
        held.add(file)
        tenure.holding++
        counted = true
        taken(tenure, kept !== undefined)
        const ensureHeld = Effect.suspend((): Effect.Effect<void, CheckpointLockLostError | StorageError> => {
          try {
            if (LockFile.confirm(owner, file)) return Effect.void
            lost = true
            return Effect.fail(lostLock(target.sessionId, leaseMs))
          } catch (cause) {
            return Effect.fail(storageError("lock")(cause))
          }
        })
        return use({
          ensureHeld,
          inherited: kept?.baton,
          leave: (left) => {
            baton = left
          }
        })
      }
      const letGo = (exit: Exit.Exit<unknown, unknown>) =>
        Effect.sync(() => {
          if (counted) tenure.holding--
          if (acquired === undefined) return
          // An interrupted holder lets go at once: whoever interrupted it may be waiting for the lock.
          const handOn = !lost && !owner.closed && !Exit.isInterrupted(exit) &&
            !shouldGiveWay(() => LockFile.wantedAge(owner, target.sessionId), tenure)
          if (handOn) {
            releaseSoon(key, { owner, file: acquired, baton })
          } else {
            releaseFile(owner, acquired)
            tenure.releasedAt = monotonicNow()
          }
        })
      const run = kept !== undefined
        ? holding(kept.file)
        : Effect.flatMap(take(owner, target, tenure, (file) => (acquired = file)), holding)
      return Effect.onExit(run, letGo)
    }

    const withLock: SessionLockService<Baton>["withLock"] = (target, use) =>
      mutex.withKey(
        keyOf(target),
        Effect.suspend(() => {
          const owner = owners.get(target.directory)
          return owner !== undefined ? locked(owner, target, use) : Effect.flatMap(ownerOf(target.directory), (opened) => locked(opened, target, use))
        })
      )

    return { withLock } satisfies SessionLockService<Baton>
  })

/** The default: lock files in the sessions directory, held across processes, containers and namespaces. */
export const layerNode = (options: NodeSessionLockOptions = {}): Layer.Layer<SessionLock, ConfigurationError> =>
  Layer.scoped(SessionLock, makeNode(options))
