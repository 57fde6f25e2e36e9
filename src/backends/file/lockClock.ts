/**
 * The file system's clock, which every process sharing a locks directory reads alike (the
 * protocol's lease rule: lockFile.ts). A lease's age is the time since its holder last wrote to
 * its lock file, and both ends of it are stamped by the file system: the holder renews by
 * writing to the lock file (not by setting a time of its own), and a judge learns "now" by
 * writing to a file of its own and reading back its modification time. A process whose clock
 * is wrong — ahead or behind, by hours — thus neither steals a live lock nor takes a dead
 * one for live.
 */
import * as fs from "node:fs"
import { join } from "node:path"
import { errnoOf as codeOf } from "../internal/causes.js"
import { type Owner, WANTED_DIR } from "./lockRecord.js"

/** A record is JSON: its first byte is always "{", written over itself to renew a lease. */
const RECORD_START = new Uint8Array([0x7b])
const PROBE_BYTE = new Uint8Array([0x2e])

/** Let the file system stamp `fd`'s modification time with its own now: write `bytes` at its start. */
const stamp = (fd: number, bytes: Uint8Array) => {
  fs.writeSync(fd, bytes, 0, bytes.length, 0)
}

/**
 * Renew the lease of a lock file open for writing (its content unchanged). Should the file
 * system refuse the write (a full copy-on-write file system), this process's clock stamps it.
 */
export const stampLease = (fd: number) => {
  try {
    stamp(fd, RECORD_START)
  } catch {
    const now = Date.now() / 1000
    fs.futimesSync(fd, now, now)
  }
}

/** Stamp the file at `path` (a waiter's mark), creating it if need be. Throws ENOENT without its directory. */
export const stampPath = (path: string) => {
  const fd = fs.openSync(path, fs.constants.O_WRONLY | fs.constants.O_CREAT, 0o600)
  try {
    stamp(fd, PROBE_BYTE)
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * The owner's probe: a file no one else sees, unlinked as soon as it is open (one left by a crash
 * in between is swept as an old mark). It is made beside the waiters' marks rather than among
 * the locks, so that writing to it wakes no one watching for locks.
 */
const probeOf = (owner: Owner): number => {
  if (owner.probe !== undefined) return owner.probe
  const directory = join(owner.locksDir, WANTED_DIR)
  const path = join(directory, `.clock-${owner.token}`)
  for (let tries = 1; ; tries++) {
    fs.mkdirSync(directory, { recursive: true, mode: 0o700 })
    try {
      owner.probe = fs.openSync(path, "w", 0o600)
      fs.rmSync(path, { force: true })
      try {
        // Without marks, the directory goes again (as with the last mark: `unmarkWanted`).
        fs.rmdirSync(directory)
      } catch {
        // Marks in it: someone waits.
      }
      return owner.probe
    } catch (error) {
      // A waiter took the (empty) directory down meanwhile: make it again.
      if (tries === 3 || codeOf(error) !== "ENOENT") throw error
    }
  }
}

/**
 * The file system's now, in epoch milliseconds: the modification time of the owner's probe,
 * written just now. Where the file system will not take the write, this process's clock.
 */
export const fileSystemNow = (owner: Owner): number => {
  try {
    const fd = probeOf(owner)
    stamp(fd, PROBE_BYTE)
    return Number(fs.fstatSync(fd, { bigint: true }).mtimeNs / 1_000n) / 1_000
  } catch {
    return Date.now()
  } finally {
    // Closed owners keep no descriptor open.
    if (owner.closed) closeProbe(owner)
  }
}

/** How long ago (file-system milliseconds) `stat`'s file was last written. */
export const ageOf = (owner: Owner, stat: fs.BigIntStats): number => fileSystemNow(owner) - Number(stat.mtimeNs / 1_000n) / 1_000

export const closeProbe = (owner: Owner) => {
  if (owner.probe === undefined) return
  fs.closeSync(owner.probe)
  owner.probe = undefined
}
