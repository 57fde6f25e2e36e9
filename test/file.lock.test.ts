/**
 * The file backend's session lock in one process, on real files: the lock-file protocol
 * (lockFile.ts), the `SessionLock` service and its in-process mutex, the shared busy wait, and
 * the file backend's use of `ensureHeld`. Other processes and namespaces: file.namespaces.test.ts.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Deferred, Duration, Effect, Exit, Fiber, Layer, Stream } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { Busy, retryWhileBusy } from "../src/backends/internal/busy.js"
import * as LockFile from "../src/backends/file/lockFile.js"
import {
  CheckpointBusyError,
  Checkpointer,
  CheckpointLockLostError,
  ConfigurationError,
  FileCheckpointer,
  LogCodec,
  type LogCodecService,
  LogFiles,
  SessionLock,
  StorageError,
  UserMessage
} from "../src/core.js"
import { makeKeyedMutex } from "../src/backends/internal/keyedMutex.js"

const dirs: Array<string> = []
const freshDir = () => {
  const dir = fs.realpathSync(fs.mkdtempSync(join(tmpdir(), "lite-agent-lock-")))
  dirs.push(dir)
  return dir
}
afterAll(() => dirs.forEach((dir) => fs.rmSync(dir, { recursive: true, force: true })))

const locksOf = (dir: string) => join(dir, LockFile.LOCKS_DIR)
const lockPath = (dir: string, session: string) => join(locksOf(dir), session)
const entries = (dir: string) => fs.readdirSync(locksOf(dir)).sort()
const recordOf = (dir: string, session: string) =>
  JSON.parse(fs.readFileSync(lockPath(dir, session), "utf8")) as LockFile.LockRecord

/** Run `program` with a fresh Node lock service of its own (as another process would have). */
const withService = <A, E>(program: Effect.Effect<A, E, SessionLock.SessionLock>, leaseMs?: number) =>
  Effect.runPromise(program.pipe(Effect.provide(SessionLock.layerNode(leaseMs === undefined ? {} : { leaseMs })))) 

const lock = <A, E>(
  dir: string,
  session: string,
  timeoutMs: number,
  use: (held: SessionLock.HeldSessionLock) => Effect.Effect<A, E>
) => Effect.flatMap(SessionLock.SessionLock, (service) => service.withLock({ directory: dir, sessionId: session, timeoutMs }, use))

const errorOf = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.flip(effect)

const socketIdOf = (path: string) => {
  const stat = fs.lstatSync(path, { bigint: true })
  return `${stat.dev}:${stat.ino}`
}

/** A socket file at `path` whose process is gone (it exited without closing it): a dead holder's. Its id. */
const deadSocket = (path: string) => {
  execFileSync(process.execPath, ["-e", "require('net').createServer().listen(process.argv[1], () => process.exit(0))", path])
  return socketIdOf(path)
}

/** A socket this process listens on at `path`: a live holder's. Close it to end it. */
const liveSocket = (path: string) =>
  new Promise<net.Server>((resolve, reject) => {
    const server = net.createServer((connection) => connection.destroy())
    server.once("error", reject)
    server.listen(path, () => resolve(server))
  })

const closed = (server: net.Server) => new Promise<void>((resolve) => server.close(() => resolve()))

/** Plant a lock file as another holder would have left it. */
const plantLock = (
  dir: string,
  session: string,
  record: Partial<LockFile.LockRecord> | string,
  ageMs = 0
) => {
  fs.mkdirSync(locksOf(dir), { recursive: true })
  const path = lockPath(dir, session)
  fs.writeFileSync(
    path,
    typeof record === "string"
      ? record
      : JSON.stringify({ v: 1, owner: "planted", kernel: LockFile.kernelIdentity(), leaseMs: 5_000, pid: 1, host: "h", ...record })
  )
  const when = (Date.now() - ageMs) / 1000
  fs.utimesSync(path, when, when)
  return path
}

describe("the lock file", () => {
  it("is a hard link to its holder's record while held and is removed on release; the holder's files go with the service", async () => {
    const dir = freshDir()
    const seen = await withService(lock(dir, "s", 1_000, () =>
      Effect.sync(() => ({
        record: recordOf(dir, "s"),
        entries: entries(dir),
        links: fs.statSync(lockPath(dir, "s")).nlink
      }))))
    expect(seen.record).toMatchObject({ v: 1, kernel: LockFile.kernelIdentity(), leaseMs: 5_000, pid: process.pid })
    expect(seen.record.socket).toMatch(/^\.o-[0-9a-f]{12}$/)
    const recordName = seen.record.socket!.replace(".o-", ".r-")
    expect(seen.entries).toEqual([seen.record.socket, recordName, "s"].sort())
    expect(seen.links).toBe(2)
    // Released, and the service's scope closed: nothing is left.
    expect(entries(dir)).toEqual([])
  })

  it("a directory too long for a socket address: no socket, the lock still works (a dead holder then waits out its lease)", async () => {
    const dir = join(freshDir(), "x".repeat(90))
    fs.mkdirSync(dir)
    const record = await withService(lock(dir, "s", 0, () => Effect.sync(() => recordOf(dir, "s"))))
    expect(record.socket).toBeUndefined()
    expect(record.pid).toBe(process.pid)
    plantLock(dir, "s", { owner: "gone" })
    expect(await withService(errorOf(lock(dir, "s", 100, () => Effect.void)))).toBeInstanceOf(CheckpointBusyError)
  })

  it("a locks directory that cannot be made is a StorageError, and the next lock tries again", async () => {
    const dir = freshDir()
    fs.writeFileSync(locksOf(dir), "in the way")
    const outcome = await withService(Effect.gen(function*() {
      const first = yield* errorOf(lock(dir, "s", 0, () => Effect.void))
      fs.rmSync(locksOf(dir))
      const second = yield* lock(dir, "s", 0, () => Effect.succeed("locked"))
      return { first, second }
    }))
    expect(outcome.first).toBeInstanceOf(StorageError)
    expect(outcome.first.message).toMatch(/session lock/)
    expect(outcome.second).toBe("locked")
  })

  it("a holder is proved dead only by its own socket refusing connections, on this kernel; anything else proves nothing", async () => {
    const dir = freshDir()
    const owner = await LockFile.openOwner(dir, 5_000, LockFile.kernelIdentity())
    try {
      const at = (name: string) => join(locksOf(dir), name)
      const server = await liveSocket(at(".o-live"))
      const deadId = deadSocket(at(".o-dead"))
      fs.writeFileSync(at(".o-file"), "")
      const record = (socket: string, extra: Partial<LockFile.LockRecord> = {}): LockFile.LockRecord => ({
        v: 1,
        owner: socket.slice(3),
        socket,
        socketId: deadId,
        kernel: LockFile.kernelIdentity(),
        leaseMs: 5_000,
        pid: 999_999_999,
        host: "h",
        ...extra
      })
      expect(await LockFile.holderIsDead(owner, record(".o-dead"))).toBe(true)
      expect(await LockFile.holderIsDead(owner, record(".o-live", { socketId: socketIdOf(at(".o-live")) }))).toBe(false)
      // The same path seen as another inode (another mount of the directory): no proof.
      expect(await LockFile.holderIsDead(owner, record(".o-dead", { socketId: "1:2" }))).toBe(false)
      expect(await LockFile.holderIsDead(owner, record(".o-file"))).toBe(false)
      expect(await LockFile.holderIsDead(owner, record(".o-missing"))).toBe(false)
      expect(await LockFile.holderIsDead(owner, record(".o-dead", { kernel: "linux:another-machine" }))).toBe(false)
      const { socketId: _, ...withoutId } = record(".o-dead")
      expect(await LockFile.holderIsDead(owner, withoutId)).toBe(false)
      await closed(server)
    } finally {
      LockFile.closeOwner(owner)
    }
  })

  it("a holder whose record was removed makes it again; without hard links, a lock is a file of its own", async () => {
    const dir = freshDir()
    const owner = await LockFile.openOwner(dir, 5_000, LockFile.kernelIdentity())
    try {
      const first = LockFile.create(owner, lockPath(dir, "a"))!
      expect(LockFile.create(owner, lockPath(dir, "a"))).toBeUndefined()
      // Swept away while held (an old record nobody could ask about): the held lock is unaffected…
      fs.rmSync(first.lease.path)
      expect(LockFile.stillHeld(first)).toBe(true)
      LockFile.renew(first)
      // A lock of this owner met while taking that very session is a leftover: it goes.
      expect(await LockFile.judge(owner, lockPath(dir, "a"))).toMatchObject({ _tag: "stale", why: "orphan" })
      // …and the next lock makes a new record.
      const second = LockFile.create(owner, lockPath(dir, "b"))!
      expect(second.lease.ino).not.toBe(first.lease.ino)
      expect(recordOf(dir, "b").owner).toBe(owner.token)
      LockFile.release(owner, first)
      LockFile.release(owner, second)

      owner.hardLinks = false
      const own = LockFile.create(owner, lockPath(dir, "c"))!
      expect(own.own).toBe(true)
      expect(fs.statSync(lockPath(dir, "c")).nlink).toBe(1)
      expect(recordOf(dir, "c").owner).toBe(owner.token)
      expect(LockFile.create(owner, lockPath(dir, "c"))).toBeUndefined()
      expect(LockFile.confirm(owner, own)).toBe(true)
      LockFile.release(owner, own)
      expect(entries(dir).filter((name) => !name.startsWith(".o-") && !name.startsWith(".r-"))).toEqual([])
    } finally {
      LockFile.closeOwner(owner)
    }
  })

  it("a stale lock is only removed if it is still the file judged stale; anything else is put back", async () => {
    const dir = freshDir()
    const owner = await LockFile.openOwner(dir, 5_000, LockFile.kernelIdentity())
    try {
      const path = plantLock(dir, "s", { owner: "old" }, 60_000)
      const judged = fs.statSync(path, { bigint: true })
      // Between the judgement and the removal, another waiter took it over and made a new lock.
      fs.rmSync(path)
      plantLock(dir, "s", { owner: "newer" })
      const newer = fs.statSync(path, { bigint: true })
      LockFile.removeStale(owner, path, judged)
      expect(fs.statSync(path, { bigint: true }).ino).toBe(newer.ino)
      expect(recordOf(dir, "s").owner).toBe("newer")
      // The same file, renewed since by a holder that woke up, is put back too.
      const renewed = plantLock(dir, "t", { owner: "sleeper" }, 60_000)
      const before = fs.statSync(renewed, { bigint: true })
      const now = Date.now() / 1000
      fs.utimesSync(renewed, now, now)
      LockFile.removeStale(owner, renewed, before)
      expect(recordOf(dir, "t").owner).toBe("sleeper")
      // The very file judged stale goes.
      LockFile.removeStale(owner, renewed, fs.statSync(renewed, { bigint: true }))
      expect(fs.existsSync(renewed)).toBe(false)
      expect(entries(dir).filter((name) => name.startsWith(".stale-"))).toEqual([])
    } finally {
      LockFile.closeOwner(owner)
    }
  })
})

describe("taking a lock someone else holds", () => {
  it("another holder alive: the waiter gets CheckpointBusyError after its timeout, and the lock once released", async () => {
    const dir = freshDir()
    const released = await withService(Effect.gen(function*() {
      const holding = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(lock(dir, "s", 1_000, () => Deferred.succeed(holding, undefined).pipe(Effect.zipRight(Deferred.await(release)))))
      yield* Deferred.await(holding)
      // A second service is another holder, exactly as another process would be.
      const busy = yield* Effect.promise(() => withService(errorOf(lock(dir, "s", 200, () => Effect.void))))
      expect(busy).toBeInstanceOf(CheckpointBusyError)
      expect(busy).toMatchObject({ sessionId: "s", detail: "another process holds the session lock" })
      expect((busy as CheckpointBusyError).waitedMs).toBeGreaterThanOrEqual(200)
      const waiter = Effect.runPromise(lock(dir, "s", 5_000, () => Effect.sync(() => recordOf(dir, "s").pid)).pipe(
        Effect.provide(SessionLock.layerNode())
      ))
      yield* Effect.sleep("100 millis")
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      return yield* Effect.promise(() => waiter)
    }))
    expect(released).toBe(process.pid)
  })

  it("a dead holder on this kernel (its socket refuses connections) loses its lock at once, however fresh", async () => {
    const dir = freshDir()
    fs.mkdirSync(locksOf(dir))
    const socketId = deadSocket(join(locksOf(dir), ".o-gone"))
    plantLock(dir, "s", { owner: "gone", socket: ".o-gone", socketId })
    const owner = await withService(lock(dir, "s", 0, () => Effect.sync(() => recordOf(dir, "s").owner)))
    expect(owner).not.toBe("gone")
  })

  it("a holder on another kernel is judged by its lease alone: a refused connection there proves nothing", async () => {
    const dir = freshDir()
    fs.mkdirSync(locksOf(dir))
    const socketId = deadSocket(join(locksOf(dir), ".o-far"))
    const path = plantLock(dir, "s", { owner: "far", socket: ".o-far", socketId, kernel: "linux:another-machine" })
    const busy = await withService(errorOf(lock(dir, "s", 300, () => Effect.void)))
    expect(busy).toBeInstanceOf(CheckpointBusyError)
    // Once it has not been renewed for longer than its lease, it is stale.
    const past = (Date.now() - 5_100) / 1000
    fs.utimesSync(path, past, past)
    expect(await withService(lock(dir, "s", 0, () => Effect.succeed("taken")))).toBe("taken")
  })

  it("a lock stamped ahead of the file system's now (renewed before the clock was set back an hour) is stale once seen unrenewed for its lease", async () => {
    const dir = freshDir()
    fs.mkdirSync(locksOf(dir))
    const socketId = deadSocket(join(locksOf(dir), ".o-far"))
    // On another kernel, so its socket proves nothing: only its lease (200 ms) can tell.
    plantLock(dir, "s", { owner: "far", socket: ".o-far", socketId, kernel: "linux:another-machine", leaseMs: 200 }, -3_600_000)
    expect(await withService(lock(dir, "s", 10_000, () => Effect.succeed("taken")), 200)).toBe("taken")
  })

  it("a lock file being written (or damaged) is judged by its age alone", async () => {
    const dir = freshDir()
    const path = plantLock(dir, "s", "")
    expect(await withService(errorOf(lock(dir, "s", 100, () => Effect.void)))).toBeInstanceOf(CheckpointBusyError)
    plantLock(dir, "s", "{not json", 5_100)
    expect(await withService(lock(dir, "s", 0, () => Effect.sync(() => recordOf(dir, "s").pid)))).toBe(process.pid)
    expect(fs.existsSync(path)).toBe(false)
  })

  it("a live holder's lock is taken once it has not been renewed for its lease; a holder that asked for a longer one gets it", async () => {
    const dir = freshDir()
    fs.mkdirSync(locksOf(dir))
    const server = await liveSocket(join(locksOf(dir), ".o-paused"))
    const socketId = socketIdOf(join(locksOf(dir), ".o-paused"))
    try {
      // Alive (its socket answers), but silent for 6 s of its 60 s lease: still held.
      plantLock(dir, "s", { owner: "paused", socket: ".o-paused", socketId, leaseMs: 60_000 }, 6_000)
      expect(await withService(errorOf(lock(dir, "s", 100, () => Effect.void)))).toBeInstanceOf(CheckpointBusyError)
      // Alive and fresh: held.
      plantLock(dir, "s", { owner: "paused", socket: ".o-paused", socketId })
      expect(await withService(errorOf(lock(dir, "s", 100, () => Effect.void)))).toBeInstanceOf(CheckpointBusyError)
      // Silent for longer than its 5 s lease (paused, or its event loop stalled): taken over.
      plantLock(dir, "s", { owner: "paused", socket: ".o-paused", socketId }, 5_100)
      expect(await withService(lock(dir, "s", 0, () => Effect.succeed("taken")))).toBe("taken")
    } finally {
      await closed(server)
    }
  })

  it("a lock taken after a long idle spell is fresh: the holder's record was not renewed meanwhile, its new lock still is", async () => {
    const dir = freshDir()
    const leaseMs = 200
    const outcome = await withService(Effect.gen(function*() {
      yield* lock(dir, "first", 0, () => Effect.void)
      // Idle for more than two leases: nothing held, nothing renewed.
      yield* Effect.sleep("500 millis")
      return yield* lock(dir, "s", 0, (held) =>
        Effect.gen(function*() {
          const waited = yield* Effect.promise(() => withService(errorOf(lock(dir, "s", 150, () => Effect.void)), leaseMs))
          yield* held.ensureHeld
          return { waited, age: Date.now() - fs.statSync(lockPath(dir, "s")).mtimeMs }
        }))
    }), leaseMs)
    expect(outcome.waited).toBeInstanceOf(CheckpointBusyError)
    expect(outcome.age).toBeLessThan(leaseMs)
  })

  it("a holder renews its lock while it holds it, so a hold longer than the lease is not taken over", async () => {
    const dir = freshDir()
    const leaseMs = 200
    const outcome = await withService(Effect.gen(function*() {
      const holding = yield* Deferred.make<number>()
      const holder = yield* Effect.fork(lock(dir, "s", 1_000, () =>
        Effect.sync(() => fs.statSync(lockPath(dir, "s")).mtimeMs).pipe(
          Effect.flatMap((mtime) => Deferred.succeed(holding, mtime)),
          Effect.zipRight(Effect.sleep("900 millis")),
          Effect.as(fs.statSync(lockPath(dir, "s")).mtimeMs)
        )))
      const firstMtime = yield* Deferred.await(holding)
      // Another holder with the same short lease tries for 700 ms: more than three leases.
      const waited = yield* Effect.promise(() => withService(errorOf(lock(dir, "s", 700, () => Effect.void)), leaseMs))
      const lastMtime = yield* Effect.sync(() => fs.statSync(lockPath(dir, "s")).mtimeMs)
      yield* Fiber.join(holder)
      return { waited, renewedBy: lastMtime - firstMtime }
    }), leaseMs)
    expect(outcome.waited).toBeInstanceOf(CheckpointBusyError)
    expect(outcome.renewedBy).toBeGreaterThan(0)
  })
})

describe("holders of one process in a row", () => {
  it("share one lock file, with what the last one left, until the next turn of the event loop", async () => {
    const dir = freshDir()
    // The batons are numbers: a lock service of the test's own, not the file backend's.
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const service = yield* SessionLock.makeNode<number>()
      const lockHere = <A, E>(timeoutMs: number, use: (held: SessionLock.HeldSessionLock<number>) => Effect.Effect<A, E>) =>
        service.withLock({ directory: dir, sessionId: "s", timeoutMs }, use)
      const inherited: Array<number | undefined> = []
      const hold = (baton: number) =>
        lockHere(1_000, (held) =>
          Effect.sync(() => {
            inherited.push(held.inherited)
            held.leave?.(baton)
          }))
      const nextTurn = Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      yield* hold(0)
      // Kept for the next holder of this process, for the rest of this turn.
      expect(fs.existsSync(lockPath(dir, "s"))).toBe(true)
      yield* nextTurn
      expect(fs.existsSync(lockPath(dir, "s"))).toBe(false)
      inherited.length = 0
      for (let n = 0; n < 100; n++) yield* hold(n)
      // The first takes the lock anew; each next one inherits from the last.
      expect(inherited).toEqual([undefined, ...Array.from({ length: 99 }, (_, n) => n)])
      yield* nextTurn
      yield* hold(100)
      expect(inherited.at(-1)).toBeUndefined()
      // A lock file handed on is still checked before every write: one taken over meanwhile
      // (against the protocol: its lease was fresh) stops the write, and is then let go.
      fs.renameSync(lockPath(dir, "s"), `${lockPath(dir, "s")}.taken`)
      plantLock(dir, "s", { owner: "usurper" })
      const lost = yield* Effect.flip(lockHere(0, (held) => held.ensureHeld))
      expect(lost).toBeInstanceOf(CheckpointLockLostError)
      const next = yield* Effect.flip(lockHere(0, (held) => Effect.succeed(held.inherited)))
      expect(next).toBeInstanceOf(CheckpointBusyError)
      expect(recordOf(dir, "s").owner).toBe("usurper")
      fs.rmSync(lockPath(dir, "s"))
      fs.rmSync(`${lockPath(dir, "s")}.taken`)
    })))
    expect(entries(dir)).toEqual([])
  })
})

describe("taking turns with other processes", () => {
  it("a process that keeps taking a lock gives way, after TURN_MS, to one that waits for it", async () => {
    const dir = freshDir()
    const outcome = await withService(Effect.gen(function*() {
      let others = 0
      let mine = 0
      const nextTurn = Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
      // This service takes the lock again and again, each hold right after the last.
      const keepTaking = Effect.gen(function*() {
        while (others === 0 && mine < 100_000) {
          yield* lock(dir, "s", 5_000, () => Effect.sync(() => mine++))
          yield* nextTurn
        }
      })
      const taker = yield* Effect.fork(keepTaking)
      yield* Effect.sleep("20 millis")
      // Another lock service (as another process would be) waits for the same lock. Its wait is
      // far longer than any turn, so that only starvation (not a slow machine) could make it fail.
      yield* lock(dir, "s", 30_000, () => Effect.sync(() => others++)).pipe(Effect.provide(SessionLock.layerNode()))
      yield* Fiber.join(taker)
      return { others, mine }
    }))
    // The waiter got the lock while the taker still wanted it: the taker stopped because of it,
    // not because it gave up taking.
    expect(outcome.others).toBe(1)
    expect(outcome.mine).toBeGreaterThan(10)
    expect(outcome.mine).toBeLessThan(100_000)
    expect(entries(dir)).toEqual([])
  })
})

describe("interruption", () => {
  it("a waiter interrupted leaves no lock behind; a holder interrupted releases its lock", async () => {
    const dir = freshDir()
    await withService(Effect.gen(function*() {
      const holding = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(lock(dir, "s", 1_000, () => Deferred.succeed(holding, undefined).pipe(Effect.zipRight(Effect.never))))
      yield* Deferred.await(holding)
      const heldBy = recordOf(dir, "s").owner
      const waiter = yield* Effect.fork(
        lock(dir, "s", 10_000, () => Effect.void).pipe(Effect.provide(SessionLock.layerNode()))
      )
      yield* Effect.sleep("150 millis")
      yield* Fiber.interrupt(waiter)
      expect(recordOf(dir, "s").owner).toBe(heldBy)
      yield* Fiber.interrupt(holder)
      expect(fs.existsSync(lockPath(dir, "s"))).toBe(false)
    }))
    expect(entries(dir)).toEqual([])
  })
})

describe("a lock lost before a write", () => {
  /** Take the lock over under the holder's feet, as another process would after its lease. */
  const takeOver = (dir: string, session: string) => {
    const path = lockPath(dir, session)
    fs.renameSync(path, `${path}.taken`)
    plantLock(dir, session, { owner: "usurper" })
  }

  it("ensureHeld fails with CheckpointLockLostError once the lock file is not the holder's any more", async () => {
    const dir = freshDir()
    const error = await withService(lock(dir, "s", 1_000, (held) =>
      held.ensureHeld.pipe(
        Effect.zipRight(Effect.sync(() => takeOver(dir, "s"))),
        Effect.zipRight(Effect.flip(held.ensureHeld))
      )))
    expect(error).toBeInstanceOf(CheckpointLockLostError)
    expect(error.message).toMatch(/session "s": the session lock was lost before writing, nothing was written/)
    // The holder's release leaves the usurper's lock alone.
    expect(recordOf(dir, "s").owner).toBe("usurper")
  })

  /** The JSON codec, except that encoding lets `during` run first (the lock is held then). */
  const codecRunning = (during: () => void): LogCodecService => ({
    name: "json",
    encode: (records) => Effect.sync(during).pipe(Effect.as(records.map((record) => record.payload))),
    decode: (records) => Effect.succeed(records.map((record) => record.payload))
  })

  it("the file backend writes nothing when its lock was taken over while it encoded: append, first append, truncate, delete", async () => {
    const dir = freshDir()
    let steal: string | undefined
    const layer = FileCheckpointer.layerWithoutDependencies({ dir }).pipe(
      Layer.provide(Layer.succeed(LogCodec.LogCodec, codecRunning(() => {
        if (steal !== undefined) takeOver(dir, steal)
      }))),
      Layer.provide(LogFiles.layerNode),
      Layer.provide(SessionLock.layerNode())
    )
    const message = (text: string) => new UserMessage({ content: text })
    const program = Effect.gen(function*() {
      const c = yield* Checkpointer
      yield* c.append("s", [message("one"), message("two")])
      const logBefore = fs.readFileSync(join(dir, "s", "log"))

      steal = "s"
      const appendError = yield* Effect.flip(c.append("s", [message("three")]))
      steal = "fresh"
      const firstAppendError = yield* Effect.flip(c.append("fresh", [message("new")]))
      steal = undefined
      // The usurper's locks stay: the losers released nothing of theirs.
      const usurped = [recordOf(dir, "s").owner, recordOf(dir, "fresh").owner]
      return { appendError, firstAppendError, logBefore, usurped, head: yield* c.head("s"), fresh: yield* c.head("fresh") }
    })
    const result = await Effect.runPromise(program.pipe(Effect.provide(layer)))
    expect(result.usurped).toEqual(["usurper", "usurper"])
    expect(result.appendError).toBeInstanceOf(CheckpointLockLostError)
    expect(result.firstAppendError).toBeInstanceOf(CheckpointLockLostError)
    expect(fs.readFileSync(join(dir, "s", "log"))).toEqual(result.logBefore)
    expect(result.head).toBe(2)
    expect(result.fresh).toBe(0)
    expect(fs.existsSync(join(dir, "fresh"))).toBe(false)
  })

  it("every write of the file backend asks the lock first: a lock that is always lost stops append, truncate and delete", async () => {
    const dir = freshDir()
    const message = (text: string) => new UserMessage({ content: text })
    const base = FileCheckpointer.layer({ dir })
    await Effect.runPromise(Effect.flatMap(Checkpointer, (c) => c.append("s", [message("one"), message("two")])).pipe(Effect.provide(base)))
    const logBefore = fs.readFileSync(join(dir, "s", "log"))

    let asked = 0
    const alwaysLost = Layer.succeed(SessionLock.SessionLock, {
      withLock: (target, use) =>
        use({
          ensureHeld: Effect.suspend(() => {
            asked++
            return Effect.fail(new CheckpointLockLostError({ sessionId: target.sessionId, detail: "test" }))
          })
        })
    })
    const layer = FileCheckpointer.layerWithoutDependencies({ dir }).pipe(
      Layer.provide(LogCodec.layerJson),
      Layer.provide(LogFiles.layerNode),
      Layer.provide(alwaysLost)
    )
    const errors = await Effect.runPromise(Effect.gen(function*() {
      const c = yield* Checkpointer
      return [
        yield* Effect.flip(c.append("s", [message("three")])),
        yield* Effect.flip(c.append("new", [message("first")])),
        yield* Effect.flip(c.truncate("s", 1)),
        yield* Effect.flip(c.delete("s"))
      ]
    }).pipe(Effect.provide(layer)))
    for (const error of errors) expect(error).toBeInstanceOf(CheckpointLockLostError)
    expect(asked).toBe(4)
    expect(fs.readFileSync(join(dir, "s", "log"))).toEqual(logBefore)

    const stored = await Effect.runPromise(
      Effect.flatMap(Checkpointer, (c) => Stream.runCollect(c.read("s"))).pipe(Effect.provide(base))
    )
    expect(stored.length).toBe(2)

    // A torn tail is not cut by a writer whose lock is lost (the new holder may have written after it).
    const torn = Buffer.concat([logBefore, Buffer.from("deadbeef\t3\t3\t{\"ts\":1,")])
    fs.writeFileSync(join(dir, "s", "log"), torn)
    const tornError = await Effect.runPromise(
      Effect.flip(Effect.flatMap(Checkpointer, (c) => c.append("s", [message("three")]))).pipe(Effect.provide(layer))
    )
    expect(tornError).toBeInstanceOf(CheckpointLockLostError)
    expect(fs.readFileSync(join(dir, "s", "log"))).toEqual(torn)
    expect(fs.readdirSync(join(dir, "s"))).toEqual(["log"])
    // With its lock, the same append cuts the tail (keeping it aside) and lands.
    const head = await Effect.runPromise(Effect.flatMap(Checkpointer, (c) => c.append("s", [message("three")])).pipe(Effect.provide(base)))
    expect(head).toBe(3)
    expect(fs.readdirSync(join(dir, "s")).filter((name) => name.startsWith("torn-")).length).toBe(1)
    expect(fs.existsSync(join(dir, "new"))).toBe(false)
  })
})

describe("clean-up after dead processes", () => {
  it("a new owner sweeps dead holders' records and unnamed sockets at once, and what it cannot ask about once old", async () => {
    const dir = freshDir()
    const locks = locksOf(dir)
    const at = (name: string) => join(locks, name)
    fs.mkdirSync(locks)
    const kernel = LockFile.kernelIdentity()
    const recordFor = (token: string, extra: Partial<LockFile.LockRecord> = {}) =>
      JSON.stringify({ v: 1, owner: token, socket: `.o-${token}`, kernel, leaseMs: 5_000, pid: 999_999_999, host: "h", ...extra })
    // Dead, on this kernel: record and socket go, unless a lock still names the socket.
    fs.writeFileSync(at(".r-deadfree"), recordFor("deadfree", { socketId: deadSocket(at(".o-deadfree")) }))
    fs.writeFileSync(at(".r-deadnamed"), recordFor("deadnamed", { socketId: deadSocket(at(".o-deadnamed")) }))
    plantLock(dir, "held", { owner: "deadnamed", socket: ".o-deadnamed" })
    // Alive, or on another kernel: kept, however old.
    const server = await liveSocket(at(".o-alive"))
    fs.writeFileSync(at(".r-alive"), recordFor("alive", { socketId: socketIdOf(at(".o-alive")) }))
    fs.writeFileSync(at(".r-far"), recordFor("far", { kernel: "linux:elsewhere", socketId: deadSocket(at(".o-far")) }))
    // Nothing to ask: kept until old.
    fs.writeFileSync(at(".r-garbled"), "{not json")
    deadSocket(at(".o-lonely"))
    fs.writeFileSync(at(".stale-leftover-0"), "")
    try {
      const owner = await LockFile.openOwner(dir, 5_000, kernel)
      try {
        const mine = [`.o-${owner.token}`]
        const kept = [".o-alive", ".r-alive", ".o-deadnamed", ".o-far", ".r-far", ".r-garbled", ".o-lonely", ".stale-leftover-0", "held"]
        expect(entries(dir)).toEqual([...kept, ...mine].sort())
        // An hour later (10 leases is 50 s), the leftovers nobody can vouch for are old enough.
        await LockFile.sweep(owner, Date.now() + 3_600_000)
        expect(entries(dir)).toEqual([".o-alive", ".r-alive", ".o-deadnamed", ".o-far", ".r-far", "held", ...mine].sort())
      } finally {
        LockFile.closeOwner(owner)
      }
    } finally {
      await closed(server)
    }
  })
})

describe("the in-process mutex", () => {
  it("serialises one key, runs different keys side by side, and forgets a key once idle (also after failures and interruptions)", async () => {
    const mutex = makeKeyedMutex()
    const log: Array<string> = []
    const step = (key: string, label: string) =>
      mutex.withKey(key, Effect.sync(() => log.push(`${label}+`)).pipe(
        Effect.zipRight(Effect.sleep("20 millis")),
        Effect.zipRight(Effect.sync(() => log.push(`${label}-`)))
      ))
    await Effect.runPromise(Effect.all([step("a", "a1"), step("a", "a2"), step("b", "b1")], { concurrency: "unbounded" }))
    expect(log.indexOf("a1-")).toBeLessThan(log.indexOf("a2+"))
    expect(log.indexOf("b1+")).toBeLessThan(log.indexOf("a1-"))
    expect(mutex.activeKeys()).toBe(0)

    await Effect.runPromise(Effect.either(mutex.withKey("c", Effect.fail("boom"))))
    const fiber = Effect.runFork(mutex.withKey("d", Effect.never))
    const waiting = Effect.runFork(mutex.withKey("d", Effect.void))
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(mutex.activeKeys()).toBe(1)
    await Effect.runPromise(Fiber.interrupt(waiting))
    await Effect.runPromise(Fiber.interrupt(fiber))
    expect(mutex.activeKeys()).toBe(0)
  })

  it("keeps one holder at a time while holders and waiters are interrupted at random moments, then forgets the key", async () => {
    const mutex = makeKeyedMutex()
    let inside = 0
    let most = 0
    let completed = 0
    const hold = (ms: number) =>
      mutex.withKey("k", Effect.sync(() => (most = Math.max(most, ++inside))).pipe(
        Effect.zipRight(ms === 0 ? Effect.yieldNow() : Effect.sleep(Duration.millis(ms))),
        Effect.ensuring(Effect.sync(() => inside--)),
        Effect.zipRight(Effect.sync(() => completed++))
      ))
    await Effect.runPromise(Effect.gen(function*() {
      const fibers = []
      for (let n = 0; n < 300; n++) fibers.push(yield* Effect.fork(hold(n % 3)))
      // Interrupt a third of them, some while they wait, some while they hold, some as they are handed the key.
      for (let n = 0; n < fibers.length; n += 3) {
        yield* n % 2 === 0 ? Effect.yieldNow() : Effect.sleep(Duration.millis(1))
        yield* Fiber.interrupt(fibers[n]!)
      }
      yield* Fiber.joinAll(fibers.filter((_, n) => n % 3 !== 0))
      // What was handed to an interrupted waiter went on to the next: everyone else got in.
      expect(mutex.activeKeys()).toBe(0)
    }))
    expect(most).toBe(1)
    expect(completed).toBeGreaterThanOrEqual(200)
  })

  it("a waiter interrupted just as it is handed the key hands it on", async () => {
    const mutex = makeKeyedMutex()
    const outcome = await Effect.runPromise(Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const handed = yield* Deferred.make<Fiber.RuntimeFiber<string>>()
      // The holder lets go, then at once (before the first waiter has run) interrupts it.
      const holder = yield* Effect.fork(
        mutex.withKey("k", Deferred.await(gate)).pipe(
          Effect.zipRight(Effect.flatMap(Deferred.await(handed), (first) => Fiber.interrupt(first)))
        )
      )
      yield* Effect.yieldNow()
      const first = yield* Effect.fork(mutex.withKey("k", Effect.succeed("first")))
      const second = yield* Effect.fork(mutex.withKey("k", Effect.succeed("second")))
      yield* Effect.yieldNow()
      yield* Deferred.succeed(handed, first)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(holder)
      const firstExit = yield* Fiber.await(first)
      const secondResult = yield* Fiber.join(second).pipe(Effect.timeout("1 second"), Effect.either)
      return { firstExit, secondResult, active: mutex.activeKeys() }
    }))
    expect(Exit.isInterrupted(outcome.firstExit)).toBe(true)
    expect(outcome.secondResult).toMatchObject({ _tag: "Right", right: "second" })
    expect(outcome.active).toBe(0)
  })

  it("layerInProcess excludes the fibers of one process and always holds", async () => {
    let inside = 0
    let most = 0
    await Effect.runPromise(Effect.flatMap(SessionLock.SessionLock, (service) =>
      Effect.all(
        Array.from({ length: 5 }, () =>
          service.withLock({ directory: "/nowhere", sessionId: "s", timeoutMs: 0 }, (held) =>
            held.ensureHeld.pipe(
              Effect.zipRight(Effect.sync(() => (most = Math.max(most, ++inside)))),
              Effect.zipRight(Effect.sleep("5 millis")),
              Effect.zipRight(Effect.sync(() => inside--))
            ))),
        { concurrency: "unbounded" }
      )).pipe(Effect.provide(SessionLock.layerInProcess)))
    expect(most).toBe(1)
  })
})

describe("options and the shared busy wait", () => {
  it("a lease below 100 ms, or not a number, is a ConfigurationError", async () => {
    for (const leaseMs of [99, -1, Number.NaN, "5000" as unknown as number]) {
      const exit = await Effect.runPromiseExit(Effect.provide(SessionLock.SessionLock, SessionLock.layerNode({ leaseMs })))
      expect(Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : exit).toBeInstanceOf(ConfigurationError)
    }
  })

  it("retryWhileBusy retries only Busy, up to its timeout, and reports how long it waited", async () => {
    let calls = 0
    const freesAfter = (n: number) =>
      Effect.suspend(() => (++calls < n ? Effect.fail(new Busy({ detail: "held" })) : Effect.succeed(calls)))
    expect(await Effect.runPromise(retryWhileBusy(freesAfter(4), { timeoutMs: 1_000, maxPauseMs: 5 }))).toBe(4)

    const started = Date.now()
    const busy = await Effect.runPromise(Effect.flip(
      retryWhileBusy(Effect.fail(new Busy({ detail: "always held" })), { timeoutMs: 150, maxPauseMs: 25, sessionId: "s" })
    ))
    expect(busy).toBeInstanceOf(CheckpointBusyError)
    expect(busy).toMatchObject({ sessionId: "s", detail: "always held" })
    expect(busy.waitedMs).toBeGreaterThanOrEqual(150)
    expect(Date.now() - started).toBeLessThan(150 + 1_000)

    calls = 0
    const other = await Effect.runPromise(Effect.flip(retryWhileBusy(
      Effect.suspend((): Effect.Effect<never, Busy | StorageError> =>
        ++calls === 1 ? Effect.fail(new Busy({ detail: "held" })) : Effect.fail(new StorageError({ operation: "x", detail: "disk" }))
      ),
      { timeoutMs: 1_000, maxPauseMs: 5 }
    )))
    expect(other).toBeInstanceOf(StorageError)
    expect(calls).toBe(2)

    const once = await Effect.runPromise(Effect.flip(retryWhileBusy(Effect.fail(new Busy({ detail: "held" })), { timeoutMs: 0, maxPauseMs: 25 })))
    expect(once.waitedMs).toBeLessThan(25)
  })
})
