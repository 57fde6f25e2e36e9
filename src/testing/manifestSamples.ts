/** Manifest captures for the conformance suite: a tree of files listed by its chunks, sharing what another capture wrote. */
import { WorkspaceCaptured } from "../core/events.js"
import { sha256Hex } from "../core/internal/sha256.js"
import { chunkEntries, encodeChunk, type ManifestEntry } from "../core/manifest.js"

/**
 * A session's first capture of `files` listed by a manifest: chunks among `known` (hashes another
 * capture wrote) as references, the rest with their bytes; files whose hash is in `stored` (another
 * capture stored them) as references, the rest with their bytes.
 */
export const manifestCapture = (
  files: ReadonlyArray<{ readonly path: string; readonly data: Uint8Array }>,
  known: ReadonlyArray<string>,
  stored: ReadonlySet<string> = new Set()
) => {
  const entries: Array<ManifestEntry> = files.map(({ data, path }) => ({
    path,
    state: { _tag: "stored", sha256: sha256Hex(data), size: data.length, mode: 0o644 },
    stat: { size: data.length, mtimeMs: 1, ctimeMs: 2, ino: 3, hashedAtMs: 4 }
  }))
  const chunks = chunkEntries(entries).map(encodeChunk)
  const shared = new Set(known)
  const event = new WorkspaceCaptured({
    cause: { _tag: "checkpoint" },
    coverage: "c",
    changes: files.map(({ data, path }) => ({
      path,
      firstSeen: true,
      state: stored.has(sha256Hex(data))
        ? { _tag: "stored", sha256: sha256Hex(data), size: data.length, mode: 0o644 }
        : { _tag: "content", data, mode: 0o644, size: data.length, sha256: sha256Hex(data) }
    })),
    manifest: chunks.map((data) => {
      const sha256 = sha256Hex(data)
      return shared.has(sha256) ? { _tag: "stored", sha256, size: data.length, mode: 0 } : { _tag: "content", data, mode: 0, size: data.length, sha256 }
    })
  })
  return { event, chunks: chunks.map(sha256Hex) }
}

