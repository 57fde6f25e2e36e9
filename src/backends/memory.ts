/**
 * The in-memory backend: the reference semantics of the contract. Records are kept in
 * their encoded JSON form, exactly as a persistent backend would store them, so reads
 * return fresh instances that share nothing with what was appended.
 */
import { Chunk, Clock, Effect, HashMap, Layer, Option, Ref, Stream } from "effect"
import * as Checkpointer from "../core/Checkpointer.js"
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
  /** The snapshot store: blob bytes by SHA-256 (copies, so callers' buffers can change freely). */
  readonly blobs: HashMap.HashMap<string, Uint8Array>
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
    blobs: HashMap.empty(),
    mtime: 0,
    generation: nextGeneration()
  })
  const save = (sessionId: string, change: Partial<Pick<MemorySession, "records" | "generation">>) =>
    Effect.flatMap(nextActivity, (mtime) =>
      Ref.update(sessions, (all) => {
        const current = Option.getOrElse(HashMap.get(all, sessionId), emptySession)
        return HashMap.set(all, sessionId, { ...current, ...change, mtime })
      }))
  const blobsOf = (sessionId: string) =>
    Effect.map(sessionOf(sessionId), Option.match({ onNone: () => HashMap.empty<string, Uint8Array>(), onSome: (s) => s.blobs }))

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
            // Blobs alone do not make a session exist (nor count as activity): only the log does.
            putBlobs: (added) =>
              Ref.update(sessions, (all) => {
                const session = Option.getOrElse(HashMap.get(all, sessionId), emptySession)
                let blobs = session.blobs
                for (const blob of added) if (!HashMap.has(blobs, blob.sha256)) blobs = HashMap.set(blobs, blob.sha256, blob.data.slice())
                return HashMap.set(all, sessionId, { ...session, blobs })
              }),
            missingBlobs: (hashes) =>
              Effect.map(blobsOf(sessionId), (blobs) => hashes.filter((sha256) => !HashMap.has(blobs, sha256))),
            deleteBlobs: (hashes) =>
              Ref.update(sessions, (all) =>
                Option.match(HashMap.get(all, sessionId), {
                  onNone: () => all,
                  onSome: (session) =>
                    HashMap.set(all, sessionId, { ...session, blobs: HashMap.removeMany(session.blobs, hashes) })
                })),
            records: () => Stream.fromChunks(...pages(records)),
            storedBlobs: driver.listBlobs(sessionId),
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
    readBlob: (sessionId, sha256) =>
      Effect.map(blobsOf(sessionId), (blobs) => Option.getOrUndefined(Option.map(HashMap.get(blobs, sha256), (data) => data.slice()))),
    listBlobs: (sessionId) =>
      Effect.map(blobsOf(sessionId), (blobs) =>
        Array.from(HashMap.entries(blobs), ([sha256, data]) => ({ sha256, storedBytes: data.length })))
  }
  return driver
})

/** A fresh, empty in-memory `Checkpointer` per build of the layer. */
export const layer: Layer.Layer<Checkpointer.Checkpointer> = Layer.scoped(
  Checkpointer.Checkpointer,
  Effect.flatMap(makeDriver, Checkpointer.make)
)
