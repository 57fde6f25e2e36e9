/**
 * Manifest chunks (core/manifest.ts) as the storage engine uses them: checked on the append path
 * (a capture's changes must be exactly what its manifest lists, and every chunk it names must be
 * a chunk), dropped from the record (the log keeps the chunks' hashes alone), listed again as the
 * changes on every read, and followed by the collector to the objects their entries name.
 *
 * Chunks are immutable objects, so their decoded entries are cached by hash.
 */
import { Chunk, Effect, Either } from "effect"
import type { CheckpointerDriver } from "../CheckpointerDriver.js"
import { type CheckpointerError, InvalidEventError } from "../errors.js"
import { type SessionEvent, type StoredEvent, WorkspaceCaptured } from "../events.js"
import type { ManifestChunk } from "../events/workspace.js"
import { changesOfEntries, decodeChunk, listingProblem, type ManifestEntry } from "../manifest.js"
import { sha256Hex } from "./sha256.js"

/** Decoded chunks kept (each up to 1,024 entries). */
const CACHE_CHUNKS = 512

export type ChunkEntries = Either.Either<ReadonlyArray<ManifestEntry>, string>

export interface Manifests {
  /** A stored chunk's entries, or why it cannot be read as one (missing, damaged, not a chunk). */
  readonly entries: (sha256: string) => Effect.Effect<ChunkEntries, CheckpointerError>
  /**
   * Check the captures with a manifest among `events` (about to be appended to `sessionId`) and
   * give back their indexes: the records the append stores without their changes.
   */
  readonly prepare: (sessionId: string, events: ReadonlyArray<SessionEvent>) => Effect.Effect<ReadonlySet<number>, CheckpointerError>
  /** A decoded chunk of stored events with each manifest capture's changes listed again. */
  readonly expand: (chunk: Chunk.Chunk<StoredEvent>) => Effect.Effect<Chunk.Chunk<StoredEvent>, CheckpointerError>
  /** The objects the entries of these chunks name (a chunk that cannot be read names none). */
  readonly references: (chunks: Iterable<string>) => Effect.Effect<ReadonlySet<string>, CheckpointerError>
}

/** Whether a stored record of `event` holds a manifest in place of its changes. */
const listedByManifest = (event: SessionEvent): event is WorkspaceCaptured =>
  event._tag === "WorkspaceCaptured" && event.manifest !== undefined && event.failure === undefined

export const make = (driver: CheckpointerDriver): Manifests => {
  const cache = new Map<string, ReadonlyArray<ManifestEntry>>()
  const remember = (sha256: string, entries: ReadonlyArray<ManifestEntry>) => {
    cache.set(sha256, entries)
    if (cache.size > CACHE_CHUNKS) cache.delete(cache.keys().next().value!)
  }

  const decoded = (sha256: string, data: Uint8Array): ChunkEntries => {
    if (sha256Hex(data) !== sha256) return Either.left(`manifest chunk ${sha256} is damaged: its bytes do not match its hash`)
    const entries = decodeChunk(data)
    if (entries === undefined) return Either.left(`object ${sha256} is not a manifest chunk`)
    remember(sha256, entries)
    return Either.right(entries)
  }

  const entries: Manifests["entries"] = (sha256) => {
    const cached = cache.get(sha256)
    if (cached !== undefined) {
      // Most recently used last: the one evicted is the one used longest ago.
      cache.delete(sha256)
      cache.set(sha256, cached)
      return Effect.succeed(Either.right(cached))
    }
    return Effect.map(driver.objects.read(sha256), (data) =>
      data === undefined ? Either.left(`manifest chunk ${sha256} is not in the store`) : decoded(sha256, data))
  }

  /** Every entry of a manifest in order, or the first chunk that cannot be read. */
  const manifestEntries = (manifest: ReadonlyArray<ManifestChunk>): Effect.Effect<ChunkEntries, CheckpointerError> =>
    Effect.gen(function*() {
      const all: Array<ManifestEntry> = []
      for (const chunk of manifest) {
        const found = chunk._tag === "content" ? decoded(chunk.sha256, chunk.data) : yield* entries(chunk.sha256)
        if (Either.isLeft(found)) return found
        for (const entry of found.right) all.push(entry)
      }
      return Either.right(all)
    })

  const prepare: Manifests["prepare"] = (sessionId, events) =>
    Effect.gen(function*() {
      const listed = new Set<number>()
      for (let index = 0; index < events.length; index++) {
        const event = events[index]!
        if (event._tag !== "WorkspaceCaptured" || event.manifest === undefined) continue
        const refuse = (detail: string) => new InvalidEventError({ sessionId, index, detail })
        if (event.failure !== undefined) return yield* refuse("a capture that failed saw no tree: it has no manifest")
        const found = yield* manifestEntries(event.manifest)
        if (Either.isLeft(found)) return yield* refuse(found.left)
        const problem = listingProblem(event.changes, found.right)
        if (problem !== undefined) return yield* refuse(problem)
        listed.add(index)
      }
      return listed
    })

  const expand: Manifests["expand"] = (chunk) => {
    if (!Chunk.some(chunk, ({ event }) => listedByManifest(event))) return Effect.succeed(chunk)
    return Effect.forEach(chunk, (stored) => {
      const { event } = stored
      if (!listedByManifest(event) || event.changes.length > 0) return Effect.succeed(stored)
      return Effect.map(manifestEntries(event.manifest!), (found): StoredEvent => {
        const { cause, coverage, manifest } = event
        // A chunk gone or damaged: what the capture saw is unknown, which a restore must refuse over,
        // as after a failed capture — the session itself still reads.
        const expanded = Either.isLeft(found)
          ? new WorkspaceCaptured({ cause, coverage, changes: [], failure: `its manifest cannot be read: ${found.left}` }, true)
          : new WorkspaceCaptured({ cause, coverage, changes: changesOfEntries(found.right), ...(manifest === undefined ? {} : { manifest }) }, true)
        return { ...stored, event: expanded }
      })
    }).pipe(Effect.map(Chunk.unsafeFromArray))
  }

  const references: Manifests["references"] = (chunks) =>
    Effect.gen(function*() {
      const named = new Set<string>()
      for (const sha256 of chunks) {
        const found = yield* entries(sha256)
        if (Either.isLeft(found)) continue
        for (const { state } of found.right) if (state._tag === "stored") named.add(state.sha256)
      }
      return named
    })

  return { entries, prepare, expand, references }
}
