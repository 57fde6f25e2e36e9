/**
 * Waiters' marks (`.wanted/<sessionId>`: someone waits, so a holder that has kept the lock a
 * while gives way) and the sweep of what dead processes left in the locks directory (the
 * protocol: lockFile.ts).
 */
import * as fs from "node:fs"
import { join } from "node:path"
import { errnoOf as codeOf } from "../internal/causes.js"
import { ageOf as fileAgeOf, fileSystemNow, stampPath } from "./lockClock.js"
import { connect, holderIsDead } from "./lockLiveness.js"
import { type Owner, OWNER_PREFIX, readLockFile, RECORD_PREFIX, STALE_PREFIX, WANTED_DIR } from "./lockRecord.js"

/** Leftovers of crashes are swept once this many leases old. */
const LEFTOVER_LEASES = 10

const wantedDir = (owner: Owner) => join(owner.locksDir, WANTED_DIR)

/**
 * Say that someone waits for the lock of `sessionId`: its `.wanted/` mark's modification time,
 * stamped by the file system. A holder that has kept the lock a while looks at it (`wantedAge`)
 * and gives way. Never fails.
 */
export const markWanted = (owner: Owner, sessionId: string) => {
  const directory = wantedDir(owner)
  const path = join(directory, sessionId)
  // Another waiter taking its mark down may remove the directory between our two steps: a few
  // tries. A mark that cannot be made only costs this waiter its turn sooner; it never fails.
  for (let tries = 0; tries < 3; tries++) {
    try {
      stampPath(path)
      return
    } catch (error) {
      if (codeOf(error) !== "ENOENT") return
    }
    try {
      fs.mkdirSync(directory, { recursive: true, mode: 0o700 })
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

/** How long ago (on the file system's clock) someone last said it waits for the lock of `sessionId`, or undefined. */
export const wantedAge = (owner: Owner, sessionId: string): number | undefined => {
  const stat = fs.statSync(join(wantedDir(owner), sessionId), { bigint: true, throwIfNoEntry: false })
  return stat === undefined ? undefined : fileAgeOf(owner, stat)
}

/**
 * Clean up after processes that died: the records of dead owners and their sockets (unless a
 * lock still names them, for a fast takeover), and files left by crashes. Locks themselves are
 * never removed here: a dead owner's lock is taken over by the next writer that needs it.
 * Removing something of a live owner can only cost it its fast takeover, never its lock.
 */
export const sweep = async (owner: Owner, now?: number) => {
  // The file system's now, asked only when there is something to date.
  const ageOf = (path: string) => (now ??= fileSystemNow(owner)) - fs.lstatSync(path).ctimeMs
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
      const socket = readLockFile(join(owner.locksDir, name))?.record?.socket
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
      const record = present.has(recordName) ? readLockFile(join(owner.locksDir, recordName))?.record : undefined
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
