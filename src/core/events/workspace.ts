/**
 * What a workspace capture saw: the covered paths under the workdir that changed since the
 * session's previous capture, each with what it holds now, and who changed them.
 */
import { Schema } from "effect"
import { isFields, isFileMode, isNonEmptyString, isString, snapshotState } from "../internal/eventChecks.js"
import { EventClass } from "../internal/eventKind.js"
import { FileMode, SnapshotContent, SnapshotMissing, SnapshotStored, SnapshotUnavailable } from "./parts.js"

/** A symbolic link, recorded as the target it names (never followed). */
export const LinkState = Schema.TaggedStruct("link", { target: Schema.NonEmptyString })
export type LinkState = typeof LinkState.Type
/** A directory and its permission bits. */
export const DirectoryState = Schema.TaggedStruct("directory", { mode: FileMode })
export type DirectoryState = typeof DirectoryState.Type

/**
 * What a capture saw at a path: a file's bytes (inline when appended, kept in the snapshot store
 * as `stored`), nothing (`missing`), a link, a directory, or why it could not be captured
 * (`unavailable`: over a cap, changing while read, now ignored, not a file).
 */
export const CapturedState = Schema.Union(SnapshotContent, SnapshotStored, SnapshotMissing, SnapshotUnavailable, LinkState, DirectoryState)
export type CapturedState = typeof CapturedState.Type

export const CapturedPath = Schema.Struct({
  /** Relative to the workdir, with `/` separators. */
  path: Schema.NonEmptyString,
  state: CapturedState,
  /**
   * The path was not covered by the capture before (the session's first capture, or the ignore
   * rules changed): what it held before is unknown, which is not the same as "nothing".
   */
  firstSeen: Schema.optionalWith(Schema.Literal(true), { exact: true })
})
export type CapturedPath = typeof CapturedPath.Type

/**
 * Whose change a capture saw: a tool call's, a background task's, a restore's — or nobody's in
 * the session (`checkpoint`: seen before a prompt, made between turns, i.e. the user's own edit).
 */
export const CaptureCause = Schema.Union(
  Schema.TaggedStruct("tool", { toolUseId: Schema.NonEmptyString }),
  Schema.TaggedStruct("task", { taskId: Schema.NonEmptyString }),
  Schema.TaggedStruct("restore", {}),
  Schema.TaggedStruct("checkpoint", {})
)
export type CaptureCause = typeof CaptureCause.Type

const captureCause = (value: unknown): CaptureCause | undefined => {
  if (!isFields(value)) return undefined
  switch (value["_tag"]) {
    case "tool":
      return isNonEmptyString(value["toolUseId"]) ? { _tag: "tool", toolUseId: value["toolUseId"] } : undefined
    case "task":
      return isNonEmptyString(value["taskId"]) ? { _tag: "task", taskId: value["taskId"] } : undefined
    case "restore":
      return { _tag: "restore" }
    case "checkpoint":
      return { _tag: "checkpoint" }
    default:
      return undefined
  }
}

/** A link or a directory state as the schemas build it; undefined for anything else (the caller tries its other states). */
export const linkOrDirectoryState = (value: unknown): LinkState | DirectoryState | undefined => {
  if (!isFields(value)) return undefined
  if (value["_tag"] === "link") return isNonEmptyString(value["target"]) ? { _tag: "link", target: value["target"] } : undefined
  if (value["_tag"] === "directory") return isFileMode(value["mode"]) ? { _tag: "directory", mode: value["mode"] } : undefined
  return undefined
}

/**
 * A manifest chunk: its bytes when appended, a reference to the store's object once stored. A
 * chunk is an object, not a file: its `mode` is 0.
 */
export const ManifestChunk = Schema.Union(SnapshotContent, SnapshotStored)
export type ManifestChunk = typeof ManifestChunk.Type

export const capturedState = (value: unknown): CapturedState | undefined => linkOrDirectoryState(value) ?? snapshotState(value)

/** The session's workspace capture: every covered path that changed since its previous one. */
export class WorkspaceCaptured extends EventClass<WorkspaceCaptured>()("WorkspaceCaptured", {
  cause: CaptureCause,
  changes: Schema.Array(CapturedPath),
  /** The coverage settings it was taken with (a digest): a change makes new paths `firstSeen`. */
  coverage: Schema.String,
  /**
   * The capture failed as a whole (no changes recorded): what changed since the one before is
   * unknown until the next capture, which walks the whole workdir. Until then a restore or a
   * move of the branch refuses (`capture_failed`) rather than miss a change.
   */
  failure: Schema.optionalWith(Schema.String, { exact: true }),
  /**
   * The whole tree this capture saw, as manifest chunks (core/manifest.ts) in the store's objects:
   * set on a session's first capture, whose changes are then exactly the manifest's entries. The
   * log keeps the chunks' hashes alone (chunks another capture wrote are `stored` references), and
   * a read lists the entries again as the changes.
   */
  manifest: Schema.optionalWith(Schema.Array(ManifestChunk), { exact: true })
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const cause = captureCause(json["cause"])
    const { changes, coverage, failure, manifest } = json
    if (cause === undefined || !Array.isArray(changes) || !isString(coverage) || (failure !== undefined && !isString(failure))) return undefined
    let chunks: Array<ManifestChunk> | undefined
    if (manifest !== undefined) {
      if (!Array.isArray(manifest)) return undefined
      chunks = []
      for (const chunk of manifest) {
        const state = snapshotState(chunk)
        if (state === undefined || (state._tag !== "content" && state._tag !== "stored")) return undefined
        chunks.push(state)
      }
    }
    const built: Array<CapturedPath> = []
    for (const change of changes) {
      if (!isFields(change)) return undefined
      const { firstSeen, path } = change
      const state = capturedState(change["state"])
      if (!isNonEmptyString(path) || state === undefined || (firstSeen !== undefined && firstSeen !== true)) return undefined
      built.push(firstSeen === true ? { path, state, firstSeen } : { path, state })
    }
    return {
      cause,
      changes: built,
      coverage,
      ...(failure === undefined ? {} : { failure }),
      ...(chunks === undefined ? {} : { manifest: chunks })
    }
  },
  blobs: (fields, visit) => ({
    ...fields,
    changes: fields.changes.map((change) => {
      const state = change.state
      return state._tag === "content" || state._tag === "stored" || state._tag === "missing"
        ? { ...change, state: visit.state(state, change.path) }
        : change
    }),
    ...(fields.manifest === undefined ? {} : {
      manifest: fields.manifest.map((chunk, index) => {
        const visited = visit.state(chunk, `manifest chunk ${index}`)
        return visited._tag === "missing" ? chunk : visited
      })
    })
  })
}) {}
