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
 * <dir>/.locks/.wanted/.clock-<token>  a lock service's clock probe, unlinked once open (see Lease)
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
 * - Lease: a holder renews its lock every lease / 5 while it holds it, by writing to it (so the
 *   file system stamps its modification time), and a lock is never taken with less than 3/4 of
 *   a lease left. Its age is judged against the file system's now, the time stamped on a probe
 *   file the judge writes to: no process's own clock enters a lease (lockClock.ts); a lock the
 *   judge has seen unchanged for longer than a lease (on its monotonic clock) is expired too,
 *   should the file system's clock have been set back since its last renewal. A lock not renewed
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
 *
 * This module opens and closes an owner (one lock service's presence in a directory) and is the
 * protocol's one entry point; its parts:
 * - lockRecord.ts: the layout above, the record, and the shapes of owners and held locks;
 * - lockLiveness.ts: the liveness socket, "is the holder dead?", which kernel this is;
 * - lockClock.ts: the file system's clock, which stamps leases and measures their age;
 * - lockTakeover.ts: judging a lock someone else holds, removing a stale one;
 * - lockHolding.ts: creating, renewing, confirming and releasing a lock this process holds;
 * - lockWaitersAndSweep.ts: waiters' `.wanted/` marks, and the sweep of crash leftovers.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { hostname } from "node:os"
import { join } from "node:path"
import { closeProbe } from "./lockClock.js"
import { closeIdleFiles } from "./lockHolding.js"
import { listenForLiveness } from "./lockLiveness.js"
import { LOCKS_DIR, type LockRecord, type Owner } from "./lockRecord.js"
import { sweep } from "./lockWaitersAndSweep.js"

export { LOCKS_DIR, type HeldFile, type LockRecord, type Owner } from "./lockRecord.js"
export { holderIsDead, kernelIdentity } from "./lockLiveness.js"
export { clearIfStale, judge, removeStale, type Verdict } from "./lockTakeover.js"
export { confirm, create, release, renew, renewedWithin, stillHeld } from "./lockHolding.js"
export { markWanted, sweep, unmarkWanted, wantedAge } from "./lockWaitersAndSweep.js"

export const openOwner = async (directory: string, leaseMs: number, kernel: string): Promise<Owner> => {
  const locksDir = join(directory, LOCKS_DIR)
  fs.mkdirSync(locksDir, { recursive: true, mode: 0o700 })
  // Short, to leave room in a socket address for the directory's path.
  const token = randomBytes(6).toString("hex")
  const socket = await listenForLiveness(locksDir, token)
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
    probe: undefined,
    judgedLive: new Map(),
    seenUnchanged: new Map()
  }
  await sweep(owner)
  return owner
}

/** No more locks will be taken; files are closed once the locks held now are released. */
export const closeOwner = (owner: Owner) => {
  owner.closed = true
  // Closing the server removes its socket file.
  owner.socket?.server.close()
  closeProbe(owner)
  closeIdleFiles(owner)
}
