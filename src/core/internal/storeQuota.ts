/**
 * The store's quota (`maxStoreBytes`). It bounds what the store holds — every object and every
 * log, as `du` counts them — without ever deleting anything or refusing an append: the writers
 * that store file contents (workspace captures, the file tools' snapshots) ask for the room left
 * before they store new content, and past the quota record the paths as not covered, saying why.
 * `gc`, `pruneBranches` and deleting sessions free room; raising the quota gives more.
 *
 * Measuring reads every object's size and every log's: it is done at most every
 * `MEASURE_EVERY_MS`, and what this checkpointer stores meanwhile is added to the last figure
 * (all of it, even content the store held already: the figure errs on the full side). Other
 * processes' writes show at the next measure, so processes writing at once may pass the quota
 * by what they store within that time.
 */
import { Clock, Effect, Schema } from "effect"
import type { CheckpointerDriver } from "../CheckpointerDriver.js"
import type { CheckpointerError } from "../errors.js"
import { NonNegativeInteger } from "./options.js"

/** How long a measure of the store stands (plus this checkpointer's own writes since). */
export const MEASURE_EVERY_MS = 5_000

/** The options every backend takes for its store's quota. */
export const storeQuotaFields = {
  /**
   * Bytes the store (objects and logs) may hold before captures and file snapshots stop storing
   * new content: past it, changed files are recorded as not covered, with the reason. Nothing
   * is ever deleted for it. Default: no quota.
   */
  maxStoreBytes: Schema.optional(NonNegativeInteger)
}
export const StoreQuotaOptions = Schema.Struct(storeQuotaFields)
export interface StoreQuotaOptions extends Schema.Schema.Type<typeof StoreQuotaOptions> {}

/** The room a store's quota leaves, as a writer about to store new content sees it. */
export interface StoreRoom {
  readonly maxStoreBytes: number
  /** What the store holds (objects and logs), as last measured plus what this checkpointer stored since. */
  readonly storeBytes: number
  /** What new content may still take: `maxStoreBytes - storeBytes`, at least 0. */
  readonly roomBytes: number
  /** Those of the hashes asked about that the store holds already: referencing them takes no room. */
  readonly stored: ReadonlySet<string>
}

/** The quota in `du`'s report. */
export interface QuotaUsage {
  readonly maxStoreBytes: number
  /** The store's objects and logs, as `du` counted them. */
  readonly storeBytes: number
  /** True when `storeBytes` reached `maxStoreBytes`: captures and file snapshots store no new content. */
  readonly reached: boolean
}

/** Why a path's new content was not stored: the words a restore and the turn report give. */
export const quotaReason = (room: StoreRoom): string =>
  `the store reached its quota (maxStoreBytes ${room.maxStoreBytes}, holding ${room.storeBytes} bytes): ` +
  "no new content is stored until gc, pruning or deleting sessions frees room, or the quota is raised"

export interface StoreQuota {
  /** The driver `make` works through: its object writes are counted. The driver itself without a quota. */
  readonly driver: CheckpointerDriver
  /** The room left, and which of `hashes` the store holds; undefined without a quota. */
  readonly room: (hashes: ReadonlyArray<string>) => Effect.Effect<StoreRoom | undefined, CheckpointerError>
  /** What a `du` that counted `storeBytes` says of the quota; undefined without one. */
  readonly usage: (storeBytes: number) => QuotaUsage | undefined
  /** Measure afresh at the next ask: a collection freed room. */
  readonly forget: () => void
}

export const make = (driver: CheckpointerDriver, maxStoreBytes: number | undefined): StoreQuota => {
  if (maxStoreBytes === undefined) {
    return { driver, room: () => Effect.succeed(undefined), usage: () => undefined, forget: () => {} }
  }
  let measured: { readonly atMs: number; bytes: number } | undefined
  const counting: CheckpointerDriver = {
    ...driver,
    objects: {
      ...driver.objects,
      put: (objects, nowMs) =>
        Effect.tap(driver.objects.put(objects, nowMs), () => {
          if (measured !== undefined) for (const object of objects) measured.bytes += object.data.length
        })
    }
  }
  const measure = Effect.gen(function*() {
    const objects = yield* driver.objects.list
    let bytes = 0
    for (const object of objects) bytes += object.storedBytes
    for (const session of yield* driver.list) bytes += yield* driver.logBytes(session.id)
    return bytes
  })
  const storeBytes = Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    if (measured !== undefined && now - measured.atMs < MEASURE_EVERY_MS && now >= measured.atMs) return measured.bytes
    const bytes = yield* measure
    measured = { atMs: now, bytes }
    return bytes
  })
  return {
    driver: counting,
    room: (hashes) =>
      Effect.gen(function*() {
        const bytes = yield* storeBytes
        const stored = hashes.length === 0 ? [] : yield* driver.objects.sizes(hashes)
        return {
          maxStoreBytes,
          storeBytes: bytes,
          roomBytes: Math.max(0, maxStoreBytes - bytes),
          stored: new Set(stored.map((object) => object.sha256))
        }
      }),
    usage: (bytes) => ({ maxStoreBytes, storeBytes: bytes, reached: bytes >= maxStoreBytes }),
    forget: () => {
      measured = undefined
    }
  }
}
