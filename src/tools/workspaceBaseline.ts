/**
 * What the store already knows of a workspace: the manifest (core/manifest.ts) of the newest
 * first capture of the same tree — the same real workdir, the same coverage settings — among the
 * store's most recently active sessions. A session's first capture starts from it: the stat data
 * it carries spares hashing every file whose stat data is unchanged, the objects it names are not
 * stored again, and the chunks it shares are named, not written.
 *
 * Only an optimisation: a baseline that cannot be found or read is none, and the capture walks
 * and hashes the tree as before.
 */
import { realpathSync } from "node:fs"
import { Effect, Either, Option, Stream } from "effect"
import type { CheckpointerService } from "../core/Checkpointer.js"
import type { WorkspaceCaptured } from "../core/events.js"
import { decodeChunk, type ManifestEntry } from "../core/manifest.js"

/** Sessions looked at, most recently active first. */
const SESSIONS_LOOKED_AT = 8
/** Events of each read for its workdir and first capture (metadata, a prompt, the capture come first). */
const EVENTS_LOOKED_AT = 16

export interface Baseline {
  /** Each path the manifest lists. */
  readonly entries: ReadonlyMap<string, ManifestEntry>
  /** Its chunks' hashes: a capture names these rather than write them again. */
  readonly chunks: ReadonlySet<string>
  /** The file objects it names (stored in the store when it was found). */
  readonly objects: ReadonlySet<string>
}

export const baselineOf = (entries: ReadonlyArray<ManifestEntry>, chunks: Iterable<string>): Baseline => {
  const objects = new Set<string>()
  for (const entry of entries) if (entry.state._tag === "stored") objects.add(entry.state.sha256)
  return { entries: new Map(entries.map((entry) => [entry.path, entry])), chunks: new Set(chunks), objects }
}

const realPath = (path: string): string | undefined => {
  try {
    return realpathSync(path)
  } catch {
    return undefined
  }
}

/** The first capture with a manifest of `coverage` in a session over `root`, if its first events hold one. */
const firstManifestCapture = (checkpointer: CheckpointerService, sessionId: string, root: string, coverage: string) =>
  Effect.map(Stream.runCollect(Stream.take(checkpointer.read(sessionId), EVENTS_LOOKED_AT)), (events) => {
    let workdir: string | undefined
    for (const { event } of events) {
      if (event._tag === "SessionMetadata" && event.workdir !== undefined) workdir = event.workdir
      if (event._tag === "WorkspaceCaptured") {
        const capture: WorkspaceCaptured = event
        if (capture.manifest === undefined || capture.coverage !== coverage || workdir === undefined) return undefined
        return realPath(workdir) === root ? capture : undefined
      }
    }
    return undefined
  })

/** The chunks' entries read from the store, or undefined when one cannot be read. */
const manifestEntries = (checkpointer: CheckpointerService, sessionId: string, capture: WorkspaceCaptured) =>
  Effect.gen(function*() {
    const entries: Array<ManifestEntry> = []
    for (const chunk of capture.manifest ?? []) {
      const data = yield* Effect.either(checkpointer.readSnapshot(sessionId, chunk.sha256))
      const decoded = Either.isRight(data) ? decodeChunk(data.right) : undefined
      if (decoded === undefined) return undefined
      for (const entry of decoded) entries.push(entry)
    }
    return baselineOf(entries, (capture.manifest ?? []).map((chunk) => chunk.sha256))
  })

/** The newest baseline of `root` (a real path) under `coverage` among the store's recent sessions other than `sessionId`. */
export const findBaseline = (
  checkpointer: CheckpointerService,
  sessionId: string,
  root: string,
  coverage: string
): Effect.Effect<Baseline | undefined> =>
  Effect.gen(function*() {
    const sessions = (yield* checkpointer.list()).filter((session) => session.id !== sessionId).slice(0, SESSIONS_LOOKED_AT)
    for (const session of sessions) {
      const capture = yield* Effect.option(firstManifestCapture(checkpointer, session.id, root, coverage))
      const found = Option.getOrUndefined(capture)
      if (found === undefined) continue
      const baseline = yield* Effect.option(manifestEntries(checkpointer, session.id, found))
      if (Option.isSome(baseline) && baseline.value !== undefined) return baseline.value
    }
    return undefined
  }).pipe(Effect.orElseSucceed(() => undefined))
