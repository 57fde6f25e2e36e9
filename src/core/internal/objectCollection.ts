/**
 * The store's objects are shared by every session, so no session may delete one: a collector
 * (`gc`) deletes the objects no session's log references. The race it must rule out is git's: a
 * writer finds an object stored and skips writing it, the collector deletes it, and the writer's
 * event then names an object that is gone.
 *
 * The protocol, written once here for every backend (a backend only stores, touches and
 * deletes, each atomically with respect to the others):
 *
 * - A writer stores or touches every object its batch references (`put`, `touch`: the object's
 *   touched time becomes now) and logs the batch within `TOUCH_VALID_MS` of that; a batch that
 *   took longer (a huge capture) touches its objects again first.
 * - The collector takes `cutoff = now - grace` (grace >= `MIN_GRACE_MS`) *before* it reads any
 *   log, and deletes an object only if no log it read references it and its touched time is
 *   still before the cutoff at the moment of the delete (`deleteUntouched`).
 *
 * Why nothing referenced is lost: if the collector deletes an object after a writer touched it,
 * that touch was before the cutoff, so the writer's batch was logged before `cutoff +
 * TOUCH_VALID_MS`, well before the collector started reading logs — and so was read, and the
 * object was not a candidate. If the delete came first, the writer's touch finds the object
 * missing: it stores the bytes again, or (a reference without bytes) the append is refused as
 * naming an object the store does not hold. Clocks of writers and collector may differ by up to
 * `MIN_GRACE_MS - TOUCH_VALID_MS` without harm.
 */
import { Clock, Effect, Schema } from "effect"
import type { CheckpointerDriver, SnapshotBlob } from "../CheckpointerDriver.js"
import { type CheckpointerError, InvalidEventError } from "../errors.js"
import { decodeOptions, expecting } from "./options.js"
import type { Manifests } from "./manifests.js"
import { recordReferences } from "./prunedReferences.js"
import type { QuotaUsage, StoreQuota } from "./storeQuota.js"

/** How long a writer's touch protects an object: its batch is logged within this of the touch. */
export const TOUCH_VALID_MS = 60_000
/** The shortest grace a collection accepts (see the module's comment). */
export const MIN_GRACE_MS = 5 * 60_000
/** How long an unreferenced object stays after it was last stored or touched, unless `gc` is told otherwise. */
export const DEFAULT_GRACE_MS = 60 * 60_000

/** Objects deleted per call of the backend: bounds one statement or one burst of renames. */
const DELETE_BATCH = 1000

export const GcOptions = Schema.Struct({
  /**
   * Keep unreferenced objects stored or touched less than this long ago (ms, at least 5 minutes;
   * default one hour): a writer in another process may be about to reference them.
   */
  graceMs: Schema.optional(
    expecting(Schema.Number.pipe(Schema.int(), Schema.greaterThanOrEqualTo(MIN_GRACE_MS)), `an integer of milliseconds >= ${MIN_GRACE_MS}`)
  )
})
export interface GcOptions {
  /**
   * Keep unreferenced objects stored or touched less than this long ago (ms, at least 5 minutes;
   * default one hour): a writer in another process may be about to reference them.
   */
  readonly graceMs?: number | undefined
}

/** What a collection found and did. */
export interface GcReport {
  /** Sessions whose logs were read. */
  readonly sessions: number
  /** Objects stored when it looked. */
  readonly objects: number
  /** Objects some log references. */
  readonly referenced: number
  /** Unreferenced objects kept because they were stored or touched within the grace period. */
  readonly recent: number
  /** Objects deleted, and the bytes they took as stored. */
  readonly deleted: number
  readonly freedBytes: number
}

/**
 * The writer's half: store `blobs`, touch the objects `references` names, and run `log` (the
 * append of the records) while those touches are valid. A reference the store does not hold
 * fails with `missing` (the index of an event naming it) before anything is logged.
 */
export const storeThenLog = <A>(
  driver: CheckpointerDriver,
  blobs: ReadonlyArray<SnapshotBlob>,
  references: ReadonlyMap<string, number>,
  missing: (sha256: string, index: number) => InvalidEventError,
  log: Effect.Effect<A, CheckpointerError>
): Effect.Effect<A, CheckpointerError> => {
  if (blobs.length === 0 && references.size === 0) return log
  const referenced = [...references.keys()]
  const touchAll = (all: boolean) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.gen(function*() {
        if (blobs.length > 0) {
          // Stored once; touched again when a batch outlived its first touches.
          if (all) yield* driver.objects.put(blobs, now)
          else {
            const lost = yield* driver.objects.touch(blobs.map((blob) => blob.sha256), now)
            if (lost.length > 0) yield* driver.objects.put(blobs.filter((blob) => lost.includes(blob.sha256)), now)
          }
        }
        const absent = referenced.length === 0 ? [] : yield* driver.objects.touch(referenced, now)
        if (absent.length > 0) return yield* missing(absent[0]!, references.get(absent[0]!) ?? 0)
        return now
      }))
  const logWhileValid = (touchedAt: number): Effect.Effect<A, CheckpointerError> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) =>
      now - touchedAt < TOUCH_VALID_MS ? log : Effect.flatMap(touchAll(false), logWhileValid))
  return Effect.flatMap(touchAll(true), logWhileValid)
}

/**
 * The objects a session's own records reference, but for those only pruned branches do
 * (prunedReferences.ts): those they name, and those the entries of the manifest chunks they name
 * name (a manifest capture's changes are not in its record).
 */
const logReferences = (driver: CheckpointerDriver, manifests: Manifests, sessionId: string): Effect.Effect<ReadonlySet<string>, CheckpointerError> =>
  Effect.flatMap(recordReferences(sessionId, driver.read(sessionId, 0)), ({ counted, manifestChunks }) => {
    const chunks = [...manifestChunks].filter((sha256) => counted.has(sha256))
    return chunks.length === 0
      ? Effect.succeed(counted)
      : Effect.map(manifests.references(chunks), (named) => new Set([...counted, ...named]))
  })

/** The collector's half: see the module's comment. */
export const collect = (driver: CheckpointerDriver, manifests: Manifests, options: GcOptions | undefined): Effect.Effect<GcReport, CheckpointerError> =>
  Effect.gen(function*() {
    const decoded = decodeOptions(GcOptions, options, "gc options")
    if (decoded._tag === "Left") return yield* decoded.left
    const graceMs = decoded.right.graceMs ?? DEFAULT_GRACE_MS
    // Before any log is read: a batch logged after its session's log was read was touched after this.
    const cutoff = (yield* Clock.currentTimeMillis) - graceMs
    const sessions = yield* driver.list
    const referenced = new Set<string>()
    for (const { id } of sessions) {
      // A session's own records: a fork's shared events are its source's, read as the source.
      for (const sha256 of yield* logReferences(driver, manifests, id)) referenced.add(sha256)
    }
    const stored = yield* driver.objects.list
    const unreferenced = stored.filter((object) => !referenced.has(object.sha256))
    const candidates = unreferenced.filter((object) => object.touchedMs < cutoff).map((object) => object.sha256)
    let deleted = 0
    let freedBytes = 0
    for (let start = 0; start === 0 || start < candidates.length; start += DELETE_BATCH) {
      // Called even with no candidate: the backend clears leftovers of crashed writes and deletes too.
      for (const gone of yield* driver.objects.deleteUntouched(candidates.slice(start, start + DELETE_BATCH), cutoff)) {
        deleted++
        freedBytes += gone.storedBytes
      }
    }
    return {
      sessions: sessions.length,
      objects: stored.length,
      referenced: stored.length - unreferenced.length,
      recent: unreferenced.length - candidates.length,
      deleted,
      freedBytes
    }
  })

/** A number of objects and the bytes they take as stored. */
export interface ObjectBytes {
  readonly objects: number
  readonly bytes: number
}

/** What one session holds in the store. */
export interface SessionUsage {
  readonly id: string
  /** Bytes its log takes as stored. */
  readonly logBytes: number
  /** The objects its own events reference (a fork's shared events count for its source). */
  readonly referenced: ObjectBytes
  /** Of those, the ones other sessions reference too. */
  readonly shared: ObjectBytes
  /** Of those, the ones no other session references: what deleting it frees (at the next `gc` past the grace period), with its log. */
  readonly own: ObjectBytes
  /** With `du({ branches: true })`: its live branches, the current one included (see branchUsage.ts). */
  readonly branches?: ReadonlyArray<BranchUsage>
}

/** What one live branch of a session holds: by its tip (the current branch by the current leaf). */
export interface BranchUsage {
  readonly tip: number
  readonly current: boolean
  readonly label?: string
  /** The objects its nodes, from the root to its tip, reference. */
  readonly referenced: ObjectBytes
  /** Of those, the ones nothing else in the store references (no other branch, event or session): what pruning it frees. */
  readonly own: ObjectBytes
}

/** What a store holds: every session's share, and what no session references. */
export interface StoreUsage {
  /** Most bytes of its own first. */
  readonly sessions: ReadonlyArray<SessionUsage>
  /** Bytes every log takes. */
  readonly logBytes: number
  /** Every stored object. */
  readonly objects: ObjectBytes
  /** The objects some session references. */
  readonly referenced: ObjectBytes
  /** The objects no session references: what `gc` deletes once they are past the grace period. */
  readonly unreferenced: ObjectBytes
  /** The store's quota and whether it is reached; absent without one. */
  readonly quota?: QuotaUsage
}

const noBytes: ObjectBytes = { objects: 0, bytes: 0 }
const adding = (total: ObjectBytes, bytes: number): ObjectBytes => ({ objects: total.objects + 1, bytes: total.bytes + bytes })

/** Every session's references and every object, read once: what the store holds and who holds it. */
export const usage = (driver: CheckpointerDriver, manifests: Manifests, quota: StoreQuota): Effect.Effect<StoreUsage, CheckpointerError> =>
  Effect.gen(function*() {
    const sessions = yield* driver.list
    const referencing: Array<{ readonly id: string; readonly logBytes: number; readonly hashes: ReadonlySet<string> }> = []
    const holders = new Map<string, number>()
    for (const { id } of sessions) {
      const hashes = yield* logReferences(driver, manifests, id)
      for (const sha256 of hashes) holders.set(sha256, (holders.get(sha256) ?? 0) + 1)
      referencing.push({ id, logBytes: yield* driver.logBytes(id), hashes })
    }
    const stored = new Map((yield* driver.objects.list).map((object) => [object.sha256, object.storedBytes]))
    let objects = noBytes
    let referenced = noBytes
    let unreferenced = noBytes
    for (const [sha256, bytes] of stored) {
      objects = adding(objects, bytes)
      if (holders.has(sha256)) referenced = adding(referenced, bytes)
      else unreferenced = adding(unreferenced, bytes)
    }
    const perSession = referencing.map(({ hashes, id, logBytes }): SessionUsage => {
      let all = noBytes
      let shared = noBytes
      let own = noBytes
      for (const sha256 of hashes) {
        const bytes = stored.get(sha256)
        if (bytes === undefined) continue
        all = adding(all, bytes)
        if (holders.get(sha256)! > 1) shared = adding(shared, bytes)
        else own = adding(own, bytes)
      }
      return { id, logBytes, referenced: all, shared, own }
    })
    perSession.sort((a, b) => b.own.bytes + b.logBytes - (a.own.bytes + a.logBytes) || (a.id < b.id ? -1 : 1))
    const logBytes = perSession.reduce((total, session) => total + session.logBytes, 0)
    const quotaUsage = quota.usage(objects.bytes + logBytes)
    return { sessions: perSession, logBytes, objects, referenced, unreferenced, ...(quotaUsage === undefined ? {} : { quota: quotaUsage }) }
  })
