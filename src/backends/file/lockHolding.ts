/**
 * Creating, renewing, confirming and releasing a lock file this process holds (the protocol:
 * lockFile.ts). Every lock of an owner is a hard link to its record (the template), so a lock
 * never shows without its content; without hard links, a lock is a file of its own.
 */
import * as fs from "node:fs"
import { join } from "node:path"
import { errnoOf as codeOf } from "../internal/causes.js"
import { monotonicNow } from "../internal/monotonic.js"
import { stampLease } from "./lockClock.js"
import { type HeldFile, type LeaseFile, type Owner, RECORD_PREFIX } from "./lockRecord.js"

/** Create `path` exclusively with the owner's record in it, open for renewing. Throws EEXIST. */
const createWithRecord = (owner: Owner, path: string): LeaseFile => {
  const fd = fs.openSync(path, "wx", 0o600)
  try {
    fs.writeSync(fd, owner.record)
    return { path, fd, ino: fs.fstatSync(fd, { bigint: true }).ino, renewedAt: monotonicNow() }
  } catch (error) {
    fs.rmSync(path, { force: true })
    fs.closeSync(fd)
    throw error
  }
}

/** Renew a lease: the file's modification time, as the file system stamps it, is what waiters judge. */
const renewLease = (lease: LeaseFile) => {
  stampLease(lease.fd)
  lease.renewedAt = monotonicNow()
}

/** Renew a lease unless it was renewed in the last quarter of a lease. */
const keepFresh = (owner: Owner, lease: LeaseFile) => {
  if (monotonicNow() - lease.renewedAt > owner.leaseMs / 4) renewLease(lease)
}

const templateOf = (owner: Owner): LeaseFile => {
  if (owner.template === undefined) {
    // Tokens are random: no earlier file can have this name.
    owner.template = createWithRecord(owner, join(owner.locksDir, `${RECORD_PREFIX}${owner.token}`))
  }
  return owner.template
}

/** Stop linking new locks to the current template (its descriptor stays open for locks held now). */
const retireTemplate = (owner: Owner) => {
  if (owner.template === undefined) return
  fs.rmSync(owner.template.path, { force: true })
  owner.retired.push(owner.template)
  owner.template = undefined
}

/** Close retired templates, and everything once the owner is closed, when no lock needs them. */
export const closeIdleFiles = (owner: Owner) => {
  if (owner.holding > 0) return
  if (owner.closed) retireTemplate(owner)
  for (const file of owner.retired.splice(0)) fs.closeSync(file.fd)
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

/** Whether the held lock's lease was renewed less than `ms` ago. */
export const renewedWithin = (held: HeldFile, ms: number): boolean => monotonicNow() - held.lease.renewedAt < ms

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
