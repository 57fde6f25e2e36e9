/**
 * Judging a lock someone else holds, and removing it once stale (the protocol's lease and
 * stale-lock rules: lockFile.ts).
 */
import * as fs from "node:fs"
import { join } from "node:path"
import { errnoOf as codeOf } from "../internal/causes.js"
import { monotonicNow } from "../internal/monotonic.js"
import { ageOf } from "./lockClock.js"
import { holderIsDead } from "./lockLiveness.js"
import { type Owner, readLockFile, STALE_PREFIX } from "./lockRecord.js"

/** How long a holder judged alive is not asked again (its lease is still checked): bounds how late a dead one is noticed. */
const LIVE_RECHECK_MS = 100

export type Verdict =
  | { readonly _tag: "gone" }
  | { readonly _tag: "live"; readonly stat: fs.BigIntStats; readonly leaseMs: number; readonly ageMs: number }
  | { readonly _tag: "stale"; readonly stat: fs.BigIntStats; readonly why: "dead" | "expired" | "orphan" }

/**
 * How long this owner has seen the lock at `path` unchanged (not renewed), on its monotonic
 * clock: a bound that holds even when the file system's clock was set back after the lock's
 * last renewal (its modification time then lies ahead of the file system's now).
 */
const unchangedFor = (owner: Owner, path: string, stat: fs.BigIntStats): number => {
  const now = monotonicNow()
  const seen = owner.seenUnchanged.get(path)
  if (seen !== undefined && seen.ino === stat.ino && seen.mtimeNs === stat.mtimeNs) return now - seen.since
  // Many locks met at once (rare) start the memory afresh.
  if (owner.seenUnchanged.size >= 256) owner.seenUnchanged.clear()
  owner.seenUnchanged.set(path, { ino: stat.ino, mtimeNs: stat.mtimeNs, since: now })
  return 0
}

/**
 * Whether the lock file at `path`, which the caller does not hold, may be taken over now. The
 * caller holds the in-process mutex of the session, so a lock naming this very owner is a
 * leftover (a release that failed), not a lock in use.
 */
export const judge = async (owner: Owner, path: string): Promise<Verdict> => {
  const found = readLockFile(path)
  if (found === undefined) {
    owner.seenUnchanged.delete(path)
    return { _tag: "gone" }
  }
  const { record, stat } = found
  if (record?.owner === owner.token) return { _tag: "stale", stat, why: "orphan" }
  // A holder that asked for a longer lease gets it.
  const leaseMs = Math.max(owner.leaseMs, record?.leaseMs ?? 0)
  // On the file system's clock, which stamped the renewal too (lockClock.ts).
  const ageMs = Math.max(ageOf(owner, stat), unchangedFor(owner, path, stat))
  if (ageMs > leaseMs) return { _tag: "stale", stat, why: "expired" }
  if (record !== undefined && (await holderIsDead(owner, record))) return { _tag: "stale", stat, why: "dead" }
  return { _tag: "live", stat, leaseMs, ageMs }
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

/** Whether the lock at `path` is one whose holder was judged alive lately, with time left on its lease then. */
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
  if (monotonicNow() < judged.until) return true
  owner.judgedLive.delete(stat.ino)
  return false
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
    const leaseLeftMs = verdict.leaseMs - verdict.ageMs
    owner.judgedLive.set(verdict.stat.ino, { until: monotonicNow() + Math.min(LIVE_RECHECK_MS, leaseLeftMs) })
    return false
  }
  if (verdict._tag === "stale") removeStale(owner, path, verdict.stat)
  return true
}
