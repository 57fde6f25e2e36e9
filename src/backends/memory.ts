/**
 * The in-memory backend: the reference semantics of the contract. Records are kept in
 * their encoded JSON form, exactly as a persistent backend would store them, so reads
 * return fresh instances that share nothing with what was appended.
 */
import { Chunk, Clock, Effect, HashMap, Layer, Option, Ref, Stream } from "effect"
import * as Checkpointer from "../core/Checkpointer.js"
import type { ConfigurationError } from "../core/errors.js"
import type { StoredEventEncoded } from "../core/events.js"

/**
 * Reads are emitted in pages, as a persistent backend would read them: consumers fold
 * chunk by chunk, and some stream operators recurse per element of a chunk.
 */
const READ_PAGE_SIZE = 512
const pages = <A>(records: Chunk.Chunk<A>): Array<Chunk.Chunk<A>> => {
  const all = Chunk.toReadonlyArray(records)
  const result: Array<Chunk.Chunk<A>> = []
  for (let start = 0; start < all.length; start += READ_PAGE_SIZE) {
    result.push(Chunk.unsafeFromArray(all.slice(start, start + READ_PAGE_SIZE)))
  }
  return result
}

interface MemorySession {
  readonly records: Chunk.Chunk<StoredEventEncoded>
  /** Epoch ms of the last activity; strictly increasing across the store, so `list` order is exact. */
  readonly mtime: number
  /** Changed by every truncate; a deleted and re-created session starts a new one. */
  readonly generation: string
}

export const makeDriver = Effect.gen(function*() {
  const sessions = yield* Ref.make(HashMap.empty<string, MemorySession>())
  const lastActivity = yield* Ref.make(0)
  // One writer at a time across the store: the memory backend is about clarity, not throughput.
  const writeLock = yield* Effect.makeSemaphore(1)

  const nextActivity = Effect.flatMap(
    Clock.currentTimeMillis,
    (now) => Ref.modify(lastActivity, (last) => {
      const mtime = Math.max(now, last + 1)
      return [mtime, mtime] as const
    })
  )
  const sessionOf = (sessionId: string) => Effect.map(Ref.get(sessions), HashMap.get(sessionId))
  const headOf = (session: Option.Option<MemorySession>) =>
    Option.match(session, { onNone: () => 0, onSome: (s) => Chunk.size(s.records) })
  // Generations are unique within the store: a counter, never reused.
  let generations = 0
  const nextGeneration = () => `g${++generations}`
  const emptySession = (): MemorySession => ({
    records: Chunk.empty(),
    mtime: 0,
    generation: nextGeneration()
  })
  const save = (sessionId: string, change: Partial<Pick<MemorySession, "records" | "generation">>) =>
    Effect.flatMap(nextActivity, (mtime) =>
      Ref.update(sessions, (all) => {
        const current = Option.getOrElse(HashMap.get(all, sessionId), emptySession)
        return HashMap.set(all, sessionId, { ...current, ...change, mtime })
      }))
  // The object store: bytes by SHA-256 (copies, so callers' buffers can change freely) and when
  // each was last stored or touched. Each call runs in one step: atomic with respect to the others.
  const objects = new Map<string, { readonly data: Uint8Array; touchedMs: number }>()
  const objectStore: Checkpointer.ObjectStore = {
    put: (added, nowMs) =>
      Effect.sync(() => {
        for (const { data, sha256 } of added) {
          const stored = objects.get(sha256)
          if (stored === undefined) objects.set(sha256, { data: data.slice(), touchedMs: nowMs })
          else stored.touchedMs = Math.max(stored.touchedMs, nowMs)
        }
      }),
    touch: (hashes, nowMs) =>
      Effect.sync(() =>
        hashes.filter((sha256) => {
          const stored = objects.get(sha256)
          if (stored !== undefined) stored.touchedMs = Math.max(stored.touchedMs, nowMs)
          return stored === undefined
        })
      ),
    read: (sha256) => Effect.sync(() => objects.get(sha256)?.data.slice()),
    sizes: (hashes) =>
      Effect.sync(() =>
        [...new Set(hashes)].flatMap((sha256) => {
          const stored = objects.get(sha256)
          return stored === undefined ? [] : [{ sha256, storedBytes: stored.data.length }]
        })
      ),
    list: Effect.sync(() => Array.from(objects, ([sha256, { data, touchedMs }]) => ({ sha256, storedBytes: data.length, touchedMs }))),
    deleteUntouched: (hashes, cutoffMs) =>
      Effect.sync(() =>
        hashes.flatMap((sha256) => {
          const stored = objects.get(sha256)
          if (stored === undefined || stored.touchedMs >= cutoffMs) return []
          objects.delete(sha256)
          return [{ sha256, storedBytes: stored.data.length }]
        })
      )
  }

  const driver: Checkpointer.CheckpointerDriver = {
    withSession: (sessionId, use) =>
      writeLock.withPermits(1)(
        Effect.flatMap(sessionOf(sessionId), (current) => {
          const records = Option.match(current, { onNone: () => Chunk.empty(), onSome: (s) => s.records })
          return use({
            head: Chunk.size(records),
            generation: Option.match(current, { onNone: () => Checkpointer.NO_GENERATION, onSome: (s) => s.generation }),
            append: (added) => save(sessionId, { records: Chunk.appendAll(records, Chunk.fromIterable(added)) }),
            truncate: (toSeq) => save(sessionId, { records: Chunk.take(records, toSeq), generation: nextGeneration() }),
            records: () => Stream.fromChunks(...pages(records)),
            firstRecordOf: (other) =>
              Effect.map(sessionOf(other), Option.match({ onNone: () => undefined, onSome: (s) => Option.getOrUndefined(Chunk.head(s.records)) })),
            remove: Ref.update(sessions, HashMap.remove(sessionId))
          })
        })
      ),
    read: (sessionId, sinceSeq) =>
      Stream.unwrap(Effect.map(sessionOf(sessionId), (current) =>
        Option.match(current, {
          onNone: () => Stream.empty,
          onSome: (s) => Stream.fromChunks(...pages(Chunk.drop(s.records, sinceSeq)))
        }))),
    readPage: (sessionId, sinceSeq, maxRecords) =>
      Effect.map(sessionOf(sessionId), (current) =>
        Option.match(current, {
          onNone: () => ({ records: [], head: 0, generation: Checkpointer.NO_GENERATION }),
          onSome: (s) => ({
            records: Chunk.toReadonlyArray(s.records).slice(sinceSeq, sinceSeq + maxRecords),
            head: Chunk.size(s.records),
            generation: s.generation
          })
        })),
    head: (sessionId) => Effect.map(sessionOf(sessionId), headOf),
    version: (sessionId) =>
      Effect.map(sessionOf(sessionId), (current) => ({
        head: headOf(current),
        generation: Option.match(current, { onNone: () => Checkpointer.NO_GENERATION, onSome: (s) => s.generation })
      })),
    list: Effect.map(Ref.get(sessions), (all) =>
      Array.from(HashMap.entries(all)).filter(([, session]) => session.mtime > 0).map(([id, session]) => ({
        id,
        mtime: new Date(session.mtime)
      }))),
    logBytes: (sessionId) =>
      Effect.map(sessionOf(sessionId), Option.match({
        onNone: () => 0,
        onSome: (s) => Chunk.reduce(s.records, 0, (total, record) => total + Buffer.byteLength(JSON.stringify(record)) + 1)
      })),
    objects: objectStore
  }
  return driver
})

/** A fresh, empty in-memory `Checkpointer` per build of the layer. */
export const layer: Layer.Layer<Checkpointer.Checkpointer> = Layer.scoped(
  Checkpointer.Checkpointer,
  Effect.flatMap(makeDriver, (driver) => Checkpointer.make(driver))
)

/** `layer` with store options: `maxStoreBytes`, a quota (see the contract). */
export const layerWith = (options: Checkpointer.StoreQuotaOptions): Layer.Layer<Checkpointer.Checkpointer, ConfigurationError> =>
  Layer.scoped(Checkpointer.Checkpointer, Effect.flatMap(makeDriver, (driver) => Checkpointer.make(driver, options)))
