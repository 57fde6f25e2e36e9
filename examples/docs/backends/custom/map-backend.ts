import { describe, it } from "node:test"
import { Effect, Layer, Stream } from "effect"
import { Checkpointer, type CheckpointerDriver, makeCheckpointer, NO_GENERATION } from "@lite-agent/core"
import { checkpointerConformance } from "@lite-agent/sdk/testing"

/** One session as this store keeps it: each record as JSON text, as a real store would, and its blobs. */
interface MapSession {
  readonly lines: Array<string>
  readonly blobs: Map<string, Uint8Array>
  /** Changed by every truncate; a session deleted and created again gets a new one. */
  generation: string
  /** The last append or truncate (ms); 0 while it holds only blobs, which alone make no session. */
  mtime: number
}

const makeMapDriver = Effect.gen(function*() {
  const sessions = new Map<string, MapSession>()
  const writer = yield* Effect.makeSemaphore(1) // the write exclusion: one writer at a time, store-wide
  let generations = 0
  let lastActivity = 0
  // Strictly increasing, so that list() orders sessions exactly even within one millisecond.
  const activity = () => (lastActivity = Math.max(Date.now(), lastActivity + 1))
  const existing = (id: string) => {
    const session = sessions.get(id)
    return session !== undefined && session.mtime > 0 ? session : undefined
  }
  const opened = (id: string): MapSession => {
    const session = sessions.get(id) ?? { lines: [], blobs: new Map(), generation: `g${++generations}`, mtime: 0 }
    sessions.set(id, session)
    return session
  }
  const records = (id: string, from: number, to?: number) =>
    (existing(id)?.lines.slice(from, to) ?? []).map((line): unknown => JSON.parse(line))
  const blobs = (id: string) => [...(sessions.get(id)?.blobs ?? [])].map(([sha256, data]) => ({ sha256, storedBytes: data.length }))

  const driver: CheckpointerDriver = {
    withSession: (id, use) =>
      writer.withPermits(1)(Effect.suspend(() => {
        const session = opened(id)
        return use({
          head: session.lines.length,
          generation: existing(id) === undefined ? NO_GENERATION : session.generation,
          append: (added) =>
            Effect.sync(() => {
              session.lines.push(...added.map((record) => JSON.stringify(record)))
              session.mtime = activity()
            }),
          truncate: (toSeq) =>
            Effect.sync(() => {
              session.lines.length = toSeq
              session.generation = `g${++generations}`
              session.mtime = activity()
            }),
          putBlobs: (added) =>
            Effect.sync(() => {
              for (const { data, sha256 } of added) if (!session.blobs.has(sha256)) session.blobs.set(sha256, data.slice())
            }),
          missingBlobs: (hashes) => Effect.sync(() => hashes.filter((sha256) => !session.blobs.has(sha256))),
          deleteBlobs: (hashes) => Effect.sync(() => hashes.forEach((sha256) => session.blobs.delete(sha256))),
          storedBlobs: Effect.sync(() => blobs(id)),
          records: () => Stream.suspend(() => Stream.fromIterable(records(id, 0))),
          firstRecordOf: (other) => Effect.sync(() => records(other, 0, 1)[0]),
          remove: Effect.sync(() => void sessions.delete(id))
        })
      })),
    read: (id, sinceSeq) => Stream.suspend(() => Stream.fromIterable(records(id, sinceSeq))),
    readPage: (id, sinceSeq, maxRecords) =>
      Effect.sync(() => {
        const session = existing(id)
        return session === undefined
          ? { records: [], head: 0, generation: NO_GENERATION }
          : { records: records(id, sinceSeq, sinceSeq + maxRecords), head: session.lines.length, generation: session.generation }
      }),
    head: (id) => Effect.sync(() => existing(id)?.lines.length ?? 0),
    version: (id) =>
      Effect.sync(() => {
        const session = existing(id)
        return { head: session?.lines.length ?? 0, generation: session?.generation ?? NO_GENERATION }
      }),
    list: Effect.sync(() =>
      [...sessions].filter(([, session]) => session.mtime > 0).map(([id, session]) => ({ id, mtime: new Date(session.mtime) }))
    ),
    readBlob: (id, sha256) => Effect.sync(() => sessions.get(id)?.blobs.get(sha256)?.slice()),
    listBlobs: (id) => Effect.sync(() => blobs(id)),
    logBytes: (id) => Effect.sync(() => (existing(id)?.lines ?? []).reduce((total, line) => total + Buffer.byteLength(line) + 1, 0))
    // No `watch`: nothing outside this process writes the store, and followers poll every followPollMs (1000 ms).
  }
  return driver
})

/** The whole Checkpointer service over the driver: a fresh, empty store per build of the layer. */
const MapCheckpointerLayer = Layer.scoped(Checkpointer, Effect.flatMap(makeMapDriver, makeCheckpointer))

// The suite every backend passes, registered with node:test: `npx tsx <this file>` runs it.
checkpointerConformance("map backend", MapCheckpointerLayer, {
  runner: { describe, it }, // vitest's or jest's describe/it work the same
  propertyRuns: 25 // random command sequences; default 200
})
