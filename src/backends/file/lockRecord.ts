/**
 * The lock files' layout in the locks directory, what a holder's record says, and the shapes a
 * lock service keeps of its own presence and of the locks it holds (the protocol: lockFile.ts).
 */
import * as fs from "node:fs"
import type net from "node:net"
import { errnoOf as codeOf } from "../internal/causes.js"

/** The directory beside the sessions that holds their locks (session ids never start with "."). */
export const LOCKS_DIR = ".locks"

export const OWNER_PREFIX = ".o-"
export const RECORD_PREFIX = ".r-"
export const STALE_PREFIX = ".stale-"
/** Outside the locks directory proper, so that touching a mark wakes no one watching for locks. */
export const WANTED_DIR = ".wanted"

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
export interface LeaseFile {
  readonly path: string
  readonly fd: number
  readonly ino: bigint
  /** `monotonicNow()` of the last renewal. */
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
  /** A file this owner writes to learn the file system's time (lockClock.ts), opened on first use. */
  probe: number | undefined
  /**
   * Locks whose holder was judged alive lately, by inode (a holder's locks are links to its
   * record, so one inode per holder): not judged again until `until` (`monotonicNow()`), which
   * is never past the end of the lease they had then.
   */
  readonly judgedLive: Map<bigint, { readonly until: number }>
  /**
   * Each lock met, by path, as first seen with its current inode and modification time, and
   * since when (`monotonicNow()`): a lock seen unchanged for longer than its lease was not
   * renewed meanwhile, whatever the clocks say.
   */
  readonly seenUnchanged: Map<string, { readonly ino: bigint; readonly mtimeNs: bigint; readonly since: number }>
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
export const readLockFile = (path: string): { readonly stat: fs.BigIntStats; readonly record: LockRecord | undefined } | undefined => {
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
