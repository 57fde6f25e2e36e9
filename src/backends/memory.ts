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
  /** Epoch ms of the last activity; strictly increasing across the store, so `list` order is exact. */
  readonly mtime: number
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
  const save = (sessionId: string, records: Chunk.Chunk<StoredEventEncoded>) =>
    Effect.flatMap(nextActivity, (mtime) => Ref.update(sessions, HashMap.set(sessionId, { records, mtime })))

  const driver: Checkpointer.CheckpointerDriver = {
    withSession: (sessionId, use) =>
      writeLock.withPermits(1)(
        Effect.flatMap(sessionOf(sessionId), (current) => {
          const records = Option.match(current, { onNone: () => Chunk.empty(), onSome: (s) => s.records })
          return use({
            head: Chunk.size(records),
            append: (added) => save(sessionId, Chunk.appendAll(records, Chunk.fromIterable(added))),
            truncate: (toSeq) => save(sessionId, Chunk.take(records, toSeq))
          })
        })
      ),
    read: (sessionId, sinceSeq) =>
      Stream.unwrap(Effect.map(sessionOf(sessionId), (current) =>
        Option.match(current, {
          onNone: () => Stream.empty,
          onSome: (s) => Stream.fromChunks(...pages(Chunk.drop(s.records, sinceSeq)))
        }))),
    head: (sessionId) => Effect.map(sessionOf(sessionId), headOf),
    list: Effect.map(Ref.get(sessions), (all) =>
      Array.from(HashMap.entries(all), ([id, session]) => ({ id, mtime: new Date(session.mtime) }))),
    delete: (sessionId) => writeLock.withPermits(1)(Ref.update(sessions, HashMap.remove(sessionId)))
  }
  return driver
})

/** A fresh, empty in-memory `Checkpointer` per build of the layer. */
export const layer: Layer.Layer<Checkpointer.Checkpointer> = Layer.scoped(
  Checkpointer.Checkpointer,
  Effect.flatMap(makeDriver, Checkpointer.make)
)
