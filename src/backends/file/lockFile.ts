/**
 * The session lock's files, on Node's file system. Everything lives in the sessions directory
 * itself, so every process that can open the directory takes part, whatever Linux namespaces
 * (network, PID, mount, user) it runs in:
 *
 * ```
 * <dir>/.locks/<sessionId>         the lock: a new hard link to its holder's record
 * <dir>/.locks/.r-<token>          a holder's record (who, which kernel, which lease, which socket)
 * <dir>/.locks/.o-<token>          a holder's liveness socket, listening while it lives
 * <dir>/.locks/.stale-<token>-<n>  a stale lock being removed (a moment; leftovers are swept)
 * <dir>/.locks/.wanted/<sessionId>  touched by whoever waits for that lock (see `markWanted`)
 * ```
 *
 * - Taking the lock is creating its file exclusively: `link(record, lock)`, which fails if the
 *   lock exists and never shows a lock without its content (one system call). Where the file
 *   system has no hard links, the lock is created with `O_EXCL` and the record written into it.
 *   Releasing the lock is removing the file.
 * - Death: each lock service listens on a Unix socket bound to a path in the locks directory,
 *   and its record names it (path and inode). Such a socket is found through the file system, so
 *   it can be reached from any network or PID namespace. The kernel closes a dead process's
 *   sockets, SIGKILL included, and from then on connecting to the path is refused: the holder
 *   is provably dead and its lock is taken over at once. The proof is only trusted between
 *   processes of one kernel (the record names its holder's kernel; containers share their
 *   host's), through the very socket inode the holder bound (not another mount of it), and —
 *   where a full accept queue also refuses connections (macOS) — once the holder's pid is gone.
 *   Any doubt means "alive".
 * - Lease: a holder renews its lock (the file's modification time) every lease / 5 while it
 *   holds it, and a lock is never taken with less than 3/4 of a lease left. A lock not renewed
 *   for longer than its lease is stale whoever holds it: the holder was paused (SIGSTOP, a laptop
 *   asleep), its event loop stalled, or it runs on another kernel and died. That is the takeover
 *   bound wherever the socket cannot tell.
 * - A stale lock is checked once more right before it is moved aside (one rename), checked to be
 *   the very file judged stale (same inode, same modification time), and only then removed;
 *   anything else is put back.
 * - Right before writing, a holder makes sure its lease is fresh and checks the lock file is
 *   still its own; if not, it writes nothing (`CheckpointLockLostError`).
 *
 * Taking, renewing, checking and releasing are synchronous: a few system calls on small local
 * files, cheaper than the thread-pool round trips of the asynchronous API. Only judging a held
 * lock (connecting to its holder's socket) is asynchronous. Waiting is left to the caller.
 */
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import net from "node:net"
import { hostname, uptime } from "node:os"
import { join } from "node:path"
import { errnoOf as codeOf } from "../../core/causes.js"

/** The directory beside the sessions that holds their locks (session ids never start with "."). */
export const LOCKS_DIR = ".locks"

const OWNER_PREFIX = ".o-"
const RECORD_PREFIX = ".r-"
const STALE_PREFIX = ".stale-"
/** Outside the locks directory proper, so that touching a mark wakes no one watching for locks. */
const WANTED_DIR = ".wanted"
/** Leftovers of crashes are swept once this many leases old. */
const LEFTOVER_LEASES = 10
/** Unix socket paths are limited (104 bytes on macOS, 108 on Linux, terminator included). */
const MAX_SOCKET_PATH_BYTES = 103

/** What a holder writes into its lock file. */
export interface LockRecord {
  readonly v: 1
  /** The holding lock service (one per process and directory). */
  readonly owner: string
  /** File name of the holder's liveness socket in the locks directory, if it has one. */
  readonly socket?: string
  /** `<dev>:<ino>` of that socket as its holder bound it. */
  readonly socketId?: string
  /** The kernel the holder runs on: its socket only proves anything on the same one. */
  readonly kernel: string
  /** The holder renews the lock at least every leaseMs / 5. */
  readonly leaseMs: number
  readonly pid: number
  readonly host: string
}

/** A file open for renewing: its modification time is the lease. Identified by its inode. */
interface LeaseFile {
  readonly path: string
  readonly fd: number
  readonly ino: bigint
  /** `performance.now()` of the last renewal. */
  renewedAt: number
}

/** A lock file this process holds. */
export interface HeldFile {
  readonly path: string
  /** The lock's inode: the owner's record (a hard link), or a file of its own. */
  readonly lease: LeaseFile
  /** Whether the lock has a file of its own (no hard links here), closed on release. */
  readonly own: boolean
}

/** One lock service's presence in one sessions directory. */
export interface Owner {
  readonly locksDir: string
  readonly token: string
  readonly kernel: string
  readonly leaseMs: number
  /** The record every lock file of this owner carries. */
  readonly record: Buffer
  /** The liveness socket, listening until `closeOwner`. */
  readonly socket: { readonly name: string; readonly server: net.Server } | undefined
  /** The record every lock is a hard link to; made on first use, and again if swept away. */
  template: LeaseFile | undefined
  /** Earlier templates, still open while locks held now may be links to them. */
  readonly retired: Array<LeaseFile>
  /** False once the file system refused a hard link: locks are then files of their own. */
  hardLinks: boolean
  /** Locks held now; descriptors are only closed when none is. */
  holding: number
  closed: boolean
  staleCounter: number
  /**
   * Locks whose holder was judged alive lately, by inode (a holder's locks are links to its
   * record, so one inode per holder): not judged again until `until` (`performance.now()`),
   * unless their lease runs out first.
   */
  readonly judgedLive: Map<bigint, { readonly until: number; readonly leaseMs: number }>
}

const readKernelIdentity = (): string => {
  try {
    // Linux's boot id is the kernel's: containers see their host's.
    return `linux:${fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()}`
  } catch {
    // Not Linux, or no /proc (some sandboxes): fall through.
  }
  if (process.platform === "darwin") {
    try {
      const uuid = execFileSync("sysctl", ["-n", "kern.bootsessionuuid"], { encoding: "utf8", timeout: 2_000 }).trim()
      if (uuid.length > 0) return `darwin:${uuid}`
    } catch {
      // Fall through.
    }
  }
  // Host name and boot minute: two processes may disagree (then they use the lease), never
  // two kernels agree by accident.
  return `${process.platform}:${hostname()}:${Math.floor((Date.now() / 1000 - uptime()) / 60)}`
}

let kernel: string | undefined
/** Which kernel this process runs on (computed once). */
export const kernelIdentity = (): string => (kernel ??= readKernelIdentity())

/**
 * Listen on the liveness socket. Without one (a directory path too long for a socket address,
 * a file system without sockets) others judge this owner's locks by their lease alone.
 */
const listen = (locksDir: string, token: string) =>
  new Promise<(Owner["socket"] & { readonly id: string }) | undefined>((resolve) => {
    const name = `${OWNER_PREFIX}${token}`
    const path = join(locksDir, name)
    if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) return resolve(undefined)
    // Connections are only ever probes: close them at once.
    const server = net.createServer((connection) => connection.destroy())
    server.once("error", () => resolve(undefined))
    server.listen({ path, exclusive: true }, () => {
      // Never what keeps a process alive.
      server.unref()
      try {
        const stat = fs.lstatSync(path, { bigint: true })
        resolve({ name, server, id: `${stat.dev}:${stat.ino}` })
      } catch {
        server.close()
        resolve(undefined)
      }
    })
  })

export const openOwner = async (directory: string, leaseMs: number, kernel: string): Promise<Owner> => {
  const locksDir = join(directory, LOCKS_DIR)
  fs.mkdirSync(locksDir, { recursive: true, mode: 0o700 })
  // Short, to leave room in a socket address for the directory's path.
  const token = randomBytes(6).toString("hex")
  const socket = await listen(locksDir, token)
  const record: LockRecord = {
    v: 1,
    owner: token,
    ...(socket === undefined ? {} : { socket: socket.name, socketId: socket.id }),
    kernel,
    leaseMs,
    pid: process.pid,
    host: hostname()
  }
  const owner: Owner = {
    locksDir,
    token,
    kernel,
    leaseMs,
    record: Buffer.from(JSON.stringify(record)),
    socket: socket === undefined ? undefined : { name: socket.name, server: socket.server },
    template: undefined,
    retired: [],
    hardLinks: true,
    holding: 0,
    closed: false,
    staleCounter: 0,
    judgedLive: new Map()
  }
  await sweep(owner)
  return owner
}

/** Stop linking new locks to the current template (its descriptor stays open for locks held now). */
const retireTemplate = (owner: Owner) => {
  if (owner.template === undefined) return
  fs.rmSync(owner.template.path, { force: true })
  owner.retired.push(owner.template)
  owner.template = undefined
}

/** Close retired templates, and everything once the owner is closed, when no lock needs them. */
const closeIdleFiles = (owner: Owner) => {
  if (owner.holding > 0) return
  if (owner.closed) retireTemplate(owner)
  for (const file of owner.retired.splice(0)) fs.closeSync(file.fd)
}

/** No more locks will be taken; files are closed once the locks held now are released. */
export const closeOwner = (owner: Owner) => {
  owner.closed = true
  // Closing the server removes its socket file.
  owner.socket?.server.close()
  closeIdleFiles(owner)
}

type Connection = "accepted" | "refused" | "unknown"

const connect = (path: string): Promise<Connection> =>
  new Promise((resolve) => {
    const connection = net.connect({ path })
    connection.once("connect", () => {
      connection.destroy()
      resolve("accepted")
    })
    connection.once("error", (error: NodeJS.ErrnoException) =>
      // EAGAIN: Linux's answer when the accept queue is full, so someone listens.
      resolve(error.code === "ECONNREFUSED" ? "refused" : error.code === "EAGAIN" ? "accepted" : "unknown"))
  })

const socketIdAt = (path: string): string | undefined => {
  try {
    const stat = fs.lstatSync(path, { bigint: true })
    return stat.isSocket() ? `${stat.dev}:${stat.ino}` : undefined
  } catch {
    return undefined
  }
}

const pidGone = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return false
  } catch (error) {
    return codeOf(error) === "ESRCH"
  }
}

/**
 * Is the holder of `record` provably dead? Only for a holder on this kernel whose socket
 * refuses connections, through the socket inode it bound; on macOS, where a full accept queue
 * refuses too, its pid must also be gone (no PID namespaces there).
 */
export const holderIsDead = async (owner: Owner, record: LockRecord): Promise<boolean> => {
  if (record.socket === undefined || record.socketId === undefined || record.kernel !== owner.kernel) return false
  const path = join(owner.locksDir, record.socket)
  if ((await connect(path)) !== "refused") return false
  // Another mount of the directory (FUSE, some NFS set-ups) refuses connections to a live socket.
  if (socketIdAt(path) !== record.socketId) return false
  return process.platform === "linux" || pidGone(record.pid)
}

const parseRecord = (bytes: Buffer): LockRecord | undefined => {
  try {
    const value = JSON.parse(bytes.toString("utf8")) as Partial<LockRecord>
    return value.v === 1 && typeof value.owner === "string" && typeof value.kernel === "string" &&
        typeof value.leaseMs === "number" && typeof value.pid === "number"
      ? (value as LockRecord)
      : undefined
  } catch {
    // Being written right now (created, not yet filled), or damaged: judged by its age alone.
    return undefined
  }
}

/** The lock file at `path` and what it says, read through one descriptor so both belong to one file. */
const inspect = (path: string): { readonly stat: fs.BigIntStats; readonly record: LockRecord | undefined } | undefined => {
  let fd: number
  try {
    fd = fs.openSync(path, "r")
  } catch (error) {
    if (codeOf(error) === "ENOENT") return undefined
    throw error
  }
  try {
    const stat = fs.fstatSync(fd, { bigint: true })
    const buffer = Buffer.alloc(Math.min(Number(stat.size), 4096))
    const length = fs.readSync(fd, buffer, 0, buffer.length, 0)
    return { stat, record: parseRecord(buffer.subarray(0, length)) }
  } finally {
    fs.closeSync(fd)
  }
}

export type Verdict =
  | { readonly _tag: "gone" }
  | { readonly _tag: "live"; readonly stat: fs.BigIntStats; readonly leaseMs: number }
  | { readonly _tag: "stale"; readonly stat: fs.BigIntStats; readonly why: "dead" | "expired" | "orphan" }

/**
 * Whether the lock file at `path`, which the caller does not hold, may be taken over now. The
 * caller holds the in-process mutex of the session, so a lock naming this very owner is a
 * leftover (a release that failed), not a lock in use.
 */
export const judge = async (owner: Owner, path: string): Promise<Verdict> => {
  const found = inspect(path)
  if (found === undefined) return { _tag: "gone" }
  const { record, stat } = found
  if (record?.owner === owner.token) return { _tag: "stale", stat, why: "orphan" }
  // A holder that asked for a longer lease gets it.
  const leaseMs = Math.max(owner.leaseMs, record?.leaseMs ?? 0)
  if (Date.now() - Number(stat.mtimeNs / 1_000_000n) > leaseMs) return { _tag: "stale", stat, why: "expired" }
  if (record !== undefined && (await holderIsDead(owner, record))) return { _tag: "stale", stat, why: "dead" }
  return { _tag: "live", stat, leaseMs }
}

const sameFile = (a: fs.BigIntStats, b: fs.BigIntStats) => a.ino === b.ino && a.dev === b.dev && a.mtimeNs === b.mtimeNs

/**
 * Remove the lock file at `path` if it is still the one judged stale (`judged`): check it once
 * more, move it aside in one rename, compare, then delete it — or put it back when it turns out
 * to be another (a newer lock, or the same one renewed since by a holder that woke up).
 */
export const removeStale = (owner: Owner, path: string, judged: fs.BigIntStats) => {
  // Judging may have taken a round trip to the holder's socket: is the lock still that file?
  // (Checked in the same synchronous step as the rename below.)
  try {
    if (!sameFile(fs.lstatSync(path, { bigint: true }), judged)) return
  } catch (error) {
    if (codeOf(error) === "ENOENT") return
    throw error
  }
  const aside = join(owner.locksDir, `${STALE_PREFIX}${owner.token}-${owner.staleCounter++}`)
  try {
    fs.renameSync(path, aside)
  } catch (error) {
    if (codeOf(error) === "ENOENT") return
    throw error
  }
  let same = false
  try {
    same = sameFile(fs.statSync(aside, { bigint: true }), judged)
  } catch {
    // Swept away meanwhile: nothing to put back.
  }
  if (!same) {
    try {
      fs.linkSync(aside, path)
    } catch {
      // Someone created a new lock meanwhile; the file moved aside lost its lock, and its
      // holder finds out before its next write.
    }
  }
  fs.rmSync(aside, { force: true })
}

/** How long a holder judged alive is not asked again (its lease is still checked): bounds how late a dead one is noticed. */
const LIVE_RECHECK_MS = 100

/** Whether the lock at `path` is one whose holder was judged alive lately, and its lease has not run out since. */
const judgedLiveLately = (owner: Owner, path: string): boolean => {
  if (owner.judgedLive.size === 0) return false
  let stat: fs.BigIntStats
  try {
    stat = fs.lstatSync(path, { bigint: true })
  } catch {
    return false
  }
  const judged = owner.judgedLive.get(stat.ino)
  if (judged === undefined) return false
  if (performance.now() >= judged.until) {
    owner.judgedLive.delete(stat.ino)
    return false
  }
  return Date.now() - Number(stat.mtimeNs / 1_000_000n) <= judged.leaseMs
}

/**
 * A lock file met while taking the lock: remove it if it is stale. True when it is gone (so
 * creating the lock again makes sense), false while its holder keeps it.
 */
export const clearIfStale = async (owner: Owner, path: string): Promise<boolean> => {
  if (judgedLiveLately(owner, path)) return false
  const verdict = await judge(owner, path)
  if (verdict._tag === "live") {
    // One entry per holder met; many holders at once (rare) start the memory afresh.
    if (owner.judgedLive.size >= 64) owner.judgedLive.clear()
    owner.judgedLive.set(verdict.stat.ino, { until: performance.now() + LIVE_RECHECK_MS, leaseMs: verdict.leaseMs })
    return false
  }
  if (verdict._tag === "stale") removeStale(owner, path, verdict.stat)
  return true
}

/** Create `path` exclusively with the owner's record in it, open for renewing. Throws EEXIST. */
const createWithRecord = (owner: Owner, path: string): LeaseFile => {
  const fd = fs.openSync(path, "wx", 0o600)
  try {
    fs.writeSync(fd, owner.record)
    return { path, fd, ino: fs.fstatSync(fd, { bigint: true }).ino, renewedAt: performance.now() }
  } catch (error) {
    fs.rmSync(path, { force: true })
    fs.closeSync(fd)
    throw error
  }
}

/** Renew a lease: the file's modification time is what waiters judge. */
const renewLease = (lease: LeaseFile) => {
  const now = Date.now() / 1000
  fs.futimesSync(lease.fd, now, now)
  lease.renewedAt = performance.now()
}

/** Renew a lease unless it was renewed in the last quarter of a lease. */
const keepFresh = (owner: Owner, lease: LeaseFile) => {
  if (performance.now() - lease.renewedAt > owner.leaseMs / 4) renewLease(lease)
}

const templateOf = (owner: Owner): LeaseFile => {
  if (owner.template === undefined) {
    // Tokens are random: no earlier file can have this name.
    owner.template = createWithRecord(owner, join(owner.locksDir, `${RECORD_PREFIX}${owner.token}`))
  }
  return owner.template
}

const noHardLinks = (code: string | undefined) =>
  code === "EPERM" || code === "ENOTSUP" || code === "EOPNOTSUPP" || code === "ENOSYS"

/** Create the lock file exclusively; `undefined` when it exists. */
export const create = (owner: Owner, path: string, retried = false): HeldFile | undefined => {
  if (owner.closed) throw new Error("the lock service is closed")
  try {
    let held: HeldFile
    if (owner.hardLinks) {
      const template = templateOf(owner)
      // A link keeps the record's modification time: a new lock must not look old.
      keepFresh(owner, template)
      fs.linkSync(template.path, path)
      held = { path, lease: template, own: false }
    } else {
      held = { path, lease: createWithRecord(owner, path), own: true }
    }
    owner.holding++
    return held
  } catch (error) {
    const code = codeOf(error)
    if (code === "EEXIST") return undefined
    if (retried) throw error
    if (owner.hardLinks && noHardLinks(code)) {
      owner.hardLinks = false
      retireTemplate(owner)
    } else if (code === "ENOENT") {
      // The locks directory, or this owner's record in it, was removed: make them again.
      retireTemplate(owner)
      fs.mkdirSync(owner.locksDir, { recursive: true, mode: 0o700 })
    } else {
      throw error
    }
    return create(owner, path, true)
  }
}

/** Where waiters' marks are (see `markWanted`). */
const wantedDir = (owner: Owner) => join(owner.locksDir, WANTED_DIR)

/**
 * Say that someone waits for the lock of `sessionId`: its `.wanted/` mark's modification time.
 * A holder that has kept the lock a while looks at it (`wantedSince`) and gives way. Never fails.
 */
export const markWanted = (owner: Owner, sessionId: string) => {
  const directory = wantedDir(owner)
  const path = join(directory, sessionId)
  // Another waiter taking its mark down may remove the directory between our two steps: a few
  // tries. A mark that cannot be made only costs this waiter its turn sooner; it never fails.
  for (let tries = 0; tries < 3; tries++) {
    try {
      const now = new Date()
      fs.utimesSync(path, now, now)
      return
    } catch (error) {
      if (codeOf(error) !== "ENOENT") return
    }
    try {
      fs.mkdirSync(directory, { recursive: true, mode: 0o700 })
      fs.writeFileSync(path, "", { mode: 0o600, flag: "a" })
      return
    } catch {
      // Removed again meanwhile: try again.
    }
  }
}

/** A waiter that got the lock, or gave up, takes its mark down (others still waiting put it back at their next try). Never fails. */
export const unmarkWanted = (owner: Owner, sessionId: string) => {
  const directory = wantedDir(owner)
  try {
    fs.rmSync(join(directory, sessionId), { force: true })
    // The last mark takes the directory with it (a waiter that finds it gone makes it again).
    fs.rmdirSync(directory)
  } catch {
    // Not empty: others wait. Left behind otherwise, it is swept once old.
  }
}

/** When someone last said it waits for the lock of `sessionId` (epoch ms), or undefined. */
export const wantedSince = (owner: Owner, sessionId: string): number | undefined =>
  fs.statSync(join(wantedDir(owner), sessionId), { throwIfNoEntry: false })?.mtimeMs

/** Whether the held lock's lease was renewed less than `ms` ago. */
export const renewedWithin = (held: HeldFile, ms: number): boolean => performance.now() - held.lease.renewedAt < ms

/** Renew the lease of a held lock (for the heartbeat). */
export const renew = (held: HeldFile) => renewLease(held.lease)

/** Is the lock file at the holder's path still the one it created? */
export const stillHeld = (held: HeldFile): boolean => {
  try {
    return fs.statSync(held.path, { bigint: true }).ino === held.lease.ino
  } catch (error) {
    if (codeOf(error) === "ENOENT") return false
    throw error
  }
}

/**
 * Right before a write: renew the lease if a quarter of it has passed (so no waiter can judge
 * it expired for most of a lease), then check the lock file is still this holder's.
 */
export const confirm = (owner: Owner, held: HeldFile): boolean => {
  keepFresh(owner, held.lease)
  return stillHeld(held)
}

/** Remove the lock file if it is still this holder's. Never fails. */
export const release = (owner: Owner, held: HeldFile) => {
  try {
    if (stillHeld(held)) fs.unlinkSync(held.path)
  } catch {
    // Left behind, it expires with its lease (or this owner clears it as its own leftover).
  }
  owner.holding--
  try {
    if (held.own) fs.closeSync(held.lease.fd)
    closeIdleFiles(owner)
  } catch {
    // Closing never matters to the lock.
  }
}


/**
 * Clean up after processes that died: the records of dead owners and their sockets (unless a
 * lock still names them, for a fast takeover), and files left by crashes. Locks themselves are
 * never removed here: a dead owner's lock is taken over by the next writer that needs it.
 * Removing something of a live owner can only cost it its fast takeover, never its lock.
 */
export const sweep = async (owner: Owner, now = Date.now()) => {
  const ageOf = (path: string) => now - fs.lstatSync(path).ctimeMs
  let names: Array<string>
  try {
    names = fs.readdirSync(owner.locksDir)
  } catch {
    return
  }
  const named = new Set<string>()
  for (const name of names) {
    if (name.startsWith(".")) continue
    try {
      const socket = inspect(join(owner.locksDir, name))?.record?.socket
      if (socket !== undefined) named.add(socket)
    } catch {
      // Unreadable: leave everything it might name alone.
      return
    }
  }
  const old = LEFTOVER_LEASES * owner.leaseMs
  const remove = (name: string) => fs.rmSync(join(owner.locksDir, name), { force: true })
  const present = new Set(names)
  const tokens = new Set(
    names.filter((name) => name.startsWith(OWNER_PREFIX) || name.startsWith(RECORD_PREFIX)).map((name) => name.slice(3))
  )
  tokens.delete(owner.token)
  for (const token of tokens) {
    const recordName = `${RECORD_PREFIX}${token}`
    const socketName = `${OWNER_PREFIX}${token}`
    try {
      const record = present.has(recordName) ? inspect(join(owner.locksDir, recordName))?.record : undefined
      if (record !== undefined && record.owner === token) {
        if (!(await holderIsDead(owner, record))) continue
        remove(recordName)
        if (!named.has(socketName)) remove(socketName)
      } else if (present.has(socketName) && !named.has(socketName)) {
        // A socket with no record: its owner never took a lock, or its record was swept.
        if (ageOf(join(owner.locksDir, socketName)) > old && (await connect(join(owner.locksDir, socketName))) === "refused") {
          remove(socketName)
        }
      } else if (record === undefined && present.has(recordName) && ageOf(join(owner.locksDir, recordName)) > old) {
        remove(recordName)
      }
    } catch {
      // Gone already, or not ours to judge.
    }
  }
  // Marks of waiters that died waiting.
  if (present.has(WANTED_DIR)) {
    try {
      const marks = wantedDir(owner)
      for (const name of fs.readdirSync(marks)) {
        if (ageOf(join(marks, name)) > old) remove(join(WANTED_DIR, name))
      }
    } catch {
      // Gone already.
    }
  }
  for (const name of names) {
    try {
      // A rename sets the change time: a file moved aside just now is not old.
      if (name.startsWith(STALE_PREFIX) && ageOf(join(owner.locksDir, name)) > old) remove(name)
    } catch {
      // Gone already.
    }
  }
}
