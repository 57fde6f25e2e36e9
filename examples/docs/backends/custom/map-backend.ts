import { describe, it } from "node:test"
import { Effect, Layer, Stream } from "effect"
import { Checkpointer, type CheckpointerDriver, makeCheckpointer, NO_GENERATION } from "@lite-agent/core"
import { checkpointerConformance } from "@lite-agent/sdk/testing"

/** One session as this store keeps it: each record as JSON text, as a real store would. */
interface MapSession {
  readonly lines: Array<string>
  /** Changed by every truncate; a session deleted and created again gets a new one. */
  generation: string
  /** The last append or truncate (ms); 0 while it holds nothing yet. */
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
    const session = sessions.get(id) ?? { lines: [], generation: `g${++generations}`, mtime: 0 }
    sessions.set(id, session)
    return session
  }
  const records = (id: string, from: number, to?: number) =>
    (existing(id)?.lines.slice(from, to) ?? []).map((line): unknown => JSON.parse(line))
  // The objects, shared by every session: bytes by hash and when each was last stored or touched.
  // Each call below runs in one synchronous step, so it is atomic with respect to the others.
  const objects = new Map<string, { readonly data: Uint8Array; touchedMs: number }>()
  const touchOne = (sha256: string, nowMs: number) => {
    const object = objects.get(sha256)
    if (object !== undefined) object.touchedMs = Math.max(object.touchedMs, nowMs)
    return object !== undefined
  }

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
    objects: {
      put: (added, nowMs) =>
        Effect.sync(() => {
          for (const { data, sha256 } of added) if (!touchOne(sha256, nowMs)) objects.set(sha256, { data: data.slice(), touchedMs: nowMs })
        }),
      touch: (hashes, nowMs) => Effect.sync(() => hashes.filter((sha256) => !touchOne(sha256, nowMs))),
      read: (sha256) => Effect.sync(() => objects.get(sha256)?.data.slice()),
      sizes: (hashes) =>
        Effect.sync(() => [...new Set(hashes)].flatMap((sha256) => {
          const object = objects.get(sha256)
          return object === undefined ? [] : [{ sha256, storedBytes: object.data.length }]
        })),
      list: Effect.sync(() => [...objects].map(([sha256, { data, touchedMs }]) => ({ sha256, storedBytes: data.length, touchedMs }))),
      deleteUntouched: (hashes, cutoffMs) =>
        Effect.sync(() => hashes.flatMap((sha256) => {
          const object = objects.get(sha256)
          if (object === undefined || object.touchedMs >= cutoffMs) return []
          objects.delete(sha256)
          return [{ sha256, storedBytes: object.data.length }]
        }))
    },
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
