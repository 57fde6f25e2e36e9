/**
 * The session lock's files, on Node's file system. Everything lives in the sessions directory
 * itself, so every process that can open the directory takes part, whatever Linux namespaces
 * (network, PID, mount, user) it runs in:
 *
 * ```
 * <dir>/.locks/<sessionId>         the lock: a new hard link to its holder's record
 * <dir>/.locks/.r-<token>          a holder's record (who, which kernel, which lease)
 * <dir>/.locks/.o-<token>          a holder's liveness socket, listening while it lives
 * <dir>/.locks/.stale-<token>-<n>  a stale lock being removed (a moment; leftovers are swept)
 * ```
 *
 * - Taking the lock is creating its file exclusively: `link(record, lock)`, which fails if the
 *   lock exists and never shows a lock without its content (one system call). Where the file
 *   system has no hard links, the lock is created with `O_EXCL` and the record written into it.
 *   Releasing the lock is removing the file.
 * - Death: each lock service listens on a Unix socket bound to a path in the locks directory,
 *   and its lock files name it. Such a socket is found through the file system, so it can be
 *   reached from any network or PID namespace. The kernel closes a dead process's sockets,
 *   SIGKILL included, and from then on connecting to the path is refused (ECONNREFUSED): the
 *   holder is provably dead and its lock is taken over at once. The proof is only trusted
 *   between processes of one kernel (the lock file names its holder's kernel; containers share
 *   their host's); any doubt means "alive".
 * - Lease: a holder renews its lock (the file's modification time) every lease / 5 while it
 *   holds it. A lock not renewed for longer than its lease is stale whoever holds it: the
 *   holder was paused (SIGSTOP, a laptop asleep), its event loop stalled, or it runs on another
 *   kernel and died. That is the takeover bound wherever the socket cannot tell.
 * - A stale lock is moved aside (one rename), checked to be the very file judged stale (same
 *   inode, same modification time), and only then removed; anything else is put back.
 * - Right before writing, a holder renews its lease and checks the lock file is still its own;
 *   if not, it writes nothing (`CheckpointLockLostError`).
 *
 * Taking, renewing, checking and releasing are synchronous: a few system calls on small local
 * files, cheaper than the thread-pool round trips of the asynchronous API. Only judging a held
 * lock (connecting to its holder's socket) is asynchronous. Waiting is left to the caller.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import net from "node:net"
import { hostname, uptime } from "node:os"
import { join } from "node:path"

/** The directory beside the sessions that holds their locks (session ids never start with "."). */
export const LOCKS_DIR = ".locks"

const OWNER_PREFIX = ".o-"
const RECORD_PREFIX = ".r-"
const STALE_PREFIX = ".stale-"
/** Leftovers of a crash in the middle of a takeover are swept once this many leases old. */
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
  /** The kernel the holder runs on: its socket only proves anything on the same one. */
  readonly kernel: string
  /** The holder renews the lock at least every leaseMs / 5. */
  readonly leaseMs: number
  readonly pid: number
  readonly host: string
}

/** A file open for renewing (its modification time is the lease); identified by its inode. */
interface LeaseFile {
  readonly path: string
  readonly fd: number
  readonly ino: bigint
}

/** A lock file this process holds. */
export interface HeldFile {
  readonly path: string
  /** The lock's inode: the owner's record (a hard link), or a file of its own. */
  readonly lease: LeaseFile
  /** Whether the lock has a file of its own (no hard links here), closed on release. */
  readonly own: boolean
  /** `performance.now()` of the last renewal. */
  renewedAt: number
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
  /** Earlier templates, still open: locks held now may be links to them. Closed with the owner. */
  readonly retired: Array<LeaseFile>
  /** False once the file system refused a hard link: locks are then files of their own. */
  hardLinks: boolean
  staleCounter: number
}

const codeOf = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error ? String(error.code) : undefined

/** Linux's boot id is the kernel's (containers see their host's); elsewhere host name and boot minute. */
export const kernelIdentity = (): string => {
  try {
    return `linux:${fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()}`
  } catch {
    return `${process.platform}:${hostname()}:${Math.floor((Date.now() / 1000 - uptime()) / 60)}`
  }
}

/**
 * Listen on the liveness socket. Without one (a directory path too long for a socket address,
 * a file system without sockets) others judge this owner's locks by their lease alone.
 */
const listen = (locksDir: string, token: string) =>
  new Promise<Owner["socket"]>((resolve) => {
    const name = `${OWNER_PREFIX}${token}`
    const path = join(locksDir, name)
    if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) return resolve(undefined)
    // Connections are only ever probes: close them at once.
    const server = net.createServer((connection) => connection.destroy())
    server.once("error", () => resolve(undefined))
    server.listen({ path, exclusive: true }, () => {
      // Never what keeps a process alive.
      server.unref()
      resolve({ name, server })
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
    ...(socket === undefined ? {} : { socket: socket.name }),
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
    socket,
    template: undefined,
    retired: [],
    hardLinks: true,
    staleCounter: 0
  }
  await sweep(owner)
  return owner
}

/** Once every lock of the owner is released. */
export const closeOwner = (owner: Owner) => {
  retireTemplate(owner)
  for (const file of owner.retired.splice(0)) fs.closeSync(file.fd)
  // Closing the server removes its socket file.
  owner.socket?.server.close()
}

export type Liveness = "alive" | "dead" | "unknown"

/** Is a process listening on the socket at `path`? A refused connection is the kernel saying no. */
export const probe = (path: string): Promise<Liveness> =>
  new Promise((resolve) => {
    const connection = net.connect({ path })
    connection.once("connect", () => {
      connection.destroy()
      resolve("alive")
    })
    connection.once("error", (error: NodeJS.ErrnoException) => {
      if (error.code !== "ECONNREFUSED") return resolve(error.code === "EAGAIN" ? "alive" : "unknown")
      // Linux refuses connections to any file that is not a socket, too: that proves nothing.
      try {
        resolve(fs.lstatSync(path).isSocket() ? "dead" : "unknown")
      } catch {
        resolve("unknown")
      }
    })
  })

const parseRecord = (bytes: Buffer): LockRecord | undefined => {
  try {
    const value = JSON.parse(bytes.toString("utf8")) as Partial<LockRecord>
    return value.v === 1 && typeof value.owner === "string" && typeof value.kernel === "string" &&
        typeof value.leaseMs === "number"
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
  | { readonly _tag: "live"; readonly record: LockRecord | undefined }
  | { readonly _tag: "stale"; readonly stat: fs.BigIntStats; readonly why: "dead" | "expired" }

/** Whether the lock file at `path`, held by someone else, may be taken over now. */
export const judge = async (owner: Owner, path: string): Promise<Verdict> => {
  const found = inspect(path)
  if (found === undefined) return { _tag: "gone" }
  const { record, stat } = found
  // A holder that asked for a longer lease gets it.
  const leaseMs = Math.max(owner.leaseMs, record?.leaseMs ?? 0)
  if (Date.now() - Number(stat.mtimeNs / 1_000_000n) > leaseMs) return { _tag: "stale", stat, why: "expired" }
  if (
    record?.socket !== undefined && record.kernel === owner.kernel &&
    (await probe(join(owner.locksDir, record.socket))) === "dead"
  ) {
    return { _tag: "stale", stat, why: "dead" }
  }
  return { _tag: "live", record }
}

/**
 * Remove the lock file at `path` if it is still the one judged stale (`judged`): move it aside
 * in one rename, compare, then delete it — or put it back when it turns out to be another
 * (a newer lock, or the same one renewed since by a holder that woke up).
 */
export const removeStale = (owner: Owner, path: string, judged: fs.BigIntStats) => {
  const aside = join(owner.locksDir, `${STALE_PREFIX}${owner.token}-${owner.staleCounter++}`)
  try {
    fs.renameSync(path, aside)
  } catch (error) {
    if (codeOf(error) === "ENOENT") return
    throw error
  }
  let same = false
  try {
    const moved = fs.statSync(aside, { bigint: true })
    same = moved.ino === judged.ino && moved.dev === judged.dev && moved.mtimeNs === judged.mtimeNs
  } finally {
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
}

/** Create `path` exclusively with the owner's record in it, open for renewing. Throws EEXIST. */
const createWithRecord = (owner: Owner, path: string): LeaseFile => {
  const fd = fs.openSync(path, "wx", 0o600)
  try {
    fs.writeSync(fd, owner.record)
    return { path, fd, ino: fs.fstatSync(fd, { bigint: true }).ino }
  } catch (error) {
    fs.rmSync(path, { force: true })
    fs.closeSync(fd)
    throw error
  }
}

/** Stop linking new locks to the current template (its descriptor stays open for locks held now). */
const retireTemplate = (owner: Owner) => {
  if (owner.template === undefined) return
  fs.rmSync(owner.template.path, { force: true })
  owner.retired.push(owner.template)
  owner.template = undefined
}

const templateOf = (owner: Owner): LeaseFile => {
  if (owner.template === undefined) {
    const path = join(owner.locksDir, `${RECORD_PREFIX}${owner.token}`)
    // A template left by an earlier service of this token cannot exist: tokens are random.
    owner.template = createWithRecord(owner, path)
  }
  return owner.template
}

const noHardLinks = (code: string | undefined) => code === "EPERM" || code === "ENOTSUP" || code === "EOPNOTSUPP" || code === "ENOSYS"

/** Create the lock file exclusively; `undefined` when it exists. */
export const create = (owner: Owner, path: string, retried = false): HeldFile | undefined => {
  try {
    if (!owner.hardLinks) return { path, lease: createWithRecord(owner, path), own: true, renewedAt: performance.now() }
    const template = templateOf(owner)
    fs.linkSync(template.path, path)
    return { path, lease: template, own: false, renewedAt: performance.now() }
  } catch (error) {
    const code = codeOf(error)
    if (code === "EEXIST") return undefined
    if (retried) throw error
    if (owner.hardLinks && noHardLinks(code)) {
      owner.hardLinks = false
      retireTemplate(owner)
    } else {
      // The locks directory, or this owner's record in it, was removed: make them again.
      retireTemplate(owner)
      fs.mkdirSync(owner.locksDir, { recursive: true, mode: 0o700 })
    }
    return create(owner, path, true)
  }
}

/**
 * A lock file met while taking the lock: remove it if it is stale. True when it is gone (so
 * creating the lock again makes sense), false while its holder keeps it.
 */
export const clearIfStale = async (owner: Owner, path: string): Promise<boolean> => {
  const verdict = await judge(owner, path)
  if (verdict._tag === "live") return false
  if (verdict._tag === "stale") removeStale(owner, path, verdict.stat)
  return true
}

/** Renew the lease: the file's modification time is what waiters judge. */
export const renew = (held: HeldFile) => {
  const now = Date.now() / 1000
  fs.futimesSync(held.lease.fd, now, now)
  held.renewedAt = performance.now()
}

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
  if (performance.now() - held.renewedAt > owner.leaseMs / 4) renew(held)
  return stillHeld(held)
}

/** Remove the lock file if it is still this holder's, and close it. Never fails. */
export const release = (held: HeldFile) => {
  try {
    if (stillHeld(held)) fs.unlinkSync(held.path)
  } catch {
    // Left behind, it expires with its lease.
  } finally {
    if (held.own) fs.closeSync(held.lease.fd)
  }
}

/**
 * Clean up after processes that died: the liveness sockets (unless a lock still names them) and
 * records of dead owners, and files left by a crash in the middle of a takeover. Locks are
 * never removed here: a dead owner's lock is taken over by the next writer that needs it.
 */
export const sweep = async (owner: Owner) => {
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
  const liveness = new Map<string, Liveness>()
  for (const name of names) {
    if (name.startsWith(OWNER_PREFIX)) liveness.set(name.slice(OWNER_PREFIX.length), await probe(join(owner.locksDir, name)))
  }
  const oldEnough = Date.now() - LEFTOVER_LEASES * owner.leaseMs
  const remove = (path: string) => fs.rmSync(path, { force: true })
  for (const name of names) {
    const path = join(owner.locksDir, name)
    try {
      if (name.startsWith(OWNER_PREFIX)) {
        if (liveness.get(name.slice(OWNER_PREFIX.length)) === "dead" && !named.has(name)) remove(path)
      } else if (name.startsWith(RECORD_PREFIX)) {
        // Removing a record frees no lock (a lock is a name of its own); a live owner whose record
        // is gone makes it again. Without a socket to ask, only an old record goes.
        const state = liveness.get(name.slice(RECORD_PREFIX.length)) ?? "unknown"
        if (state === "dead" || (state === "unknown" && fs.statSync(path).mtimeMs < oldEnough)) remove(path)
      } else if (name.startsWith(STALE_PREFIX)) {
        if (fs.statSync(path).mtimeMs < oldEnough) remove(path)
      }
    } catch {
      // Gone already, or not ours to judge.
    }
  }
}
