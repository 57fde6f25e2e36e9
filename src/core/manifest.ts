/**
 * A workspace manifest: the state of a whole tree (path → what it held, and the stat data it was
 * hashed with) as content-addressed chunks in the store's objects, like git's tree objects. A
 * session's first capture of a tree the store has captured before names the chunks it shares
 * with that capture and writes only the chunks that differ: its log records a few hashes instead
 * of every path, and a new process's first walk trusts the stat data that travels with them.
 *
 * Chunk boundaries follow the paths (content-defined, like a rolling hash): an entry whose path
 * hashes to 0 mod `CHUNK_TARGET_ENTRIES` ends its chunk, so a changed, added or removed path
 * rewrites one chunk, not every one after it. Pure: encoding, decoding and the checks.
 */
import type { CapturedPath, CapturedState } from "./events/workspace.js"
import { type KnownPathState, knownStateOf, sameKnownState } from "./sessionState.js"
import { isFields, isFileMode, isNonEmptyString, isString } from "./internal/eventChecks.js"

/** The stat data a file was hashed with (see workspaceScan.ts): equal stat data, outside the racy window, means the same bytes. */
export interface ManifestStat {
  readonly size: number
  readonly mtimeMs: number
  readonly ctimeMs: number
  readonly ino: number
  /** When the bytes were read (the racily-clean rule compares the mtime with it). */
  readonly hashedAtMs: number
}

export interface ManifestEntry {
  readonly path: string
  readonly state: KnownPathState
  /** Files only, and only when the capture knew it. */
  readonly stat?: ManifestStat | undefined
}

export const MANIFEST_CHUNK_FORMAT = "lite-agent/manifest-chunk"
export const MANIFEST_CHUNK_VERSION = 1
/** Entries per chunk on average; a chunk ends early at a path hashing to 0 mod this. */
export const CHUNK_TARGET_ENTRIES = 128
/** A chunk ends here whatever its paths hash to. */
export const CHUNK_MAX_ENTRIES = 1024

/** FNV-1a over the path's UTF-16 code units: stable, cheap, and all a boundary needs. */
const pathHash = (path: string): number => {
  let hash = 0x811c9dc5
  for (let index = 0; index < path.length; index++) {
    hash ^= path.charCodeAt(index)
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash
}

/** The entries cut into chunks at their content-defined boundaries. */
export const chunkEntries = (entries: ReadonlyArray<ManifestEntry>): Array<ReadonlyArray<ManifestEntry>> => {
  const chunks: Array<ReadonlyArray<ManifestEntry>> = []
  let current: Array<ManifestEntry> = []
  for (const entry of entries) {
    current.push(entry)
    if (current.length >= CHUNK_MAX_ENTRIES || pathHash(entry.path) % CHUNK_TARGET_ENTRIES === 0) {
      chunks.push(current)
      current = []
    }
  }
  if (current.length > 0) chunks.push(current)
  return chunks
}

type StatTuple = readonly [number, number, number, number, number]

/** A chunk's bytes: JSON, one entry per line so that a codec's compression finds the repeats. */
export const encodeChunk = (entries: ReadonlyArray<ManifestEntry>): Uint8Array => {
  const lines = entries.map((entry) => {
    const stat: StatTuple | undefined = entry.stat === undefined
      ? undefined
      : [entry.stat.size, entry.stat.mtimeMs, entry.stat.ctimeMs, entry.stat.ino, entry.stat.hashedAtMs]
    return JSON.stringify(stat === undefined ? [entry.path, entry.state] : [entry.path, entry.state, stat])
  })
  const header = JSON.stringify({ format: MANIFEST_CHUNK_FORMAT, version: MANIFEST_CHUNK_VERSION })
  return new TextEncoder().encode([header, ...lines].join("\n"))
}

const isFiniteNumber = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)

const entryState = (value: unknown): KnownPathState | undefined => {
  if (!isFields(value)) return undefined
  switch (value["_tag"]) {
    case "stored": {
      const { mode, sha256, size } = value
      return isString(sha256) && /^[0-9a-f]{64}$/.test(sha256) && Number.isSafeInteger(size) && (size as number) >= 0 && isFileMode(mode)
        ? { _tag: "stored", sha256, size: size as number, mode }
        : undefined
    }
    case "link":
      return isNonEmptyString(value["target"]) ? { _tag: "link", target: value["target"] } : undefined
    case "directory":
      return isFileMode(value["mode"]) ? { _tag: "directory", mode: value["mode"] } : undefined
    case "unavailable": {
      const { reason, size } = value
      if (!isString(reason) || (size !== undefined && !(Number.isSafeInteger(size) && (size as number) >= 0))) return undefined
      return size === undefined ? { _tag: "unavailable", reason } : { _tag: "unavailable", reason, size: size as number }
    }
    default:
      return undefined
  }
}

/** A chunk's entries, or undefined when the bytes are not a manifest chunk this version reads. */
export const decodeChunk = (bytes: Uint8Array): ReadonlyArray<ManifestEntry> | undefined => {
  const lines = new TextDecoder("utf-8", { fatal: false }).decode(bytes).split("\n")
  try {
    const header: unknown = JSON.parse(lines[0]!)
    if (!isFields(header) || header["format"] !== MANIFEST_CHUNK_FORMAT || header["version"] !== MANIFEST_CHUNK_VERSION) return undefined
    const entries: Array<ManifestEntry> = []
    for (let index = 1; index < lines.length; index++) {
      const line: unknown = JSON.parse(lines[index]!)
      if (!Array.isArray(line) || line.length < 2 || line.length > 3 || !isNonEmptyString(line[0])) return undefined
      const state = entryState(line[1])
      if (state === undefined) return undefined
      const stat: unknown = line[2]
      if (stat === undefined) {
        entries.push({ path: line[0], state })
        continue
      }
      if (!Array.isArray(stat) || stat.length !== 5 || !stat.every(isFiniteNumber)) return undefined
      const [size, mtimeMs, ctimeMs, ino, hashedAtMs] = stat as unknown as StatTuple
      entries.push({ path: line[0], state, stat: { size, mtimeMs, ctimeMs, ino, hashedAtMs } })
    }
    return entries
  } catch {
    return undefined
  }
}

/** A manifest entry's state of a captured state (a file's bytes as their stored reference); undefined for `missing`. */
export const entryStateOf = (state: CapturedState): KnownPathState | undefined => knownStateOf(state)

/**
 * What is wrong with a capture that a manifest lists: its changes must be the manifest's
 * entries, path for path, in order, each seen for the first time, in the same state (the log
 * keeps the manifest alone, and a read lists its entries again as the changes).
 */
export const listingProblem = (changes: ReadonlyArray<CapturedPath>, entries: ReadonlyArray<ManifestEntry>): string | undefined => {
  if (changes.length !== entries.length) {
    return `its manifest lists ${entries.length} paths and its changes ${changes.length}: a capture with a manifest lists every path it names`
  }
  const paths = new Set<string>()
  for (let index = 0; index < changes.length; index++) {
    const change = changes[index]!
    const entry = entries[index]!
    if (change.path !== entry.path) return `change ${index} is ${JSON.stringify(change.path)} and the manifest's entry ${index} ${JSON.stringify(entry.path)}`
    if (paths.has(entry.path)) return `its manifest lists ${JSON.stringify(entry.path)} twice`
    paths.add(entry.path)
    if (change.firstSeen !== true) return `${JSON.stringify(change.path)} is not first seen: a manifest lists a tree seen for the first time`
    if (!sameKnownState(knownStateOf(change.state), entry.state)) {
      return `${JSON.stringify(change.path)} is ${change.state._tag} in its changes and ${entry.state._tag} in its manifest, or not the same ${entry.state._tag}`
    }
  }
  return undefined
}

/** The changes a manifest lists, as a read gives them back. */
export const changesOfEntries = (entries: ReadonlyArray<ManifestEntry>): Array<CapturedPath> =>
  entries.map((entry) => ({ path: entry.path, state: entry.state, firstSeen: true }))
