/** What the file tools did to the workspace: a snapshot before their first change to a path, each change after. */
import { Schema } from "effect"
import { afterState, isFields, isNonEmptyString, snapshotState } from "../internal/eventChecks.js"
import { EventClass } from "../internal/eventKind.js"
import { FileAfterState, FileSnapshotState } from "./parts.js"

/** Taken by a mutating file tool before its first change to `path` after a checkpoint. */
export class FileSnapshot extends EventClass<FileSnapshot>()("FileSnapshot", {
  toolUseId: Schema.NonEmptyString,
  /** Relative to the workdir, with `/` separators. */
  path: Schema.NonEmptyString,
  state: FileSnapshotState
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { path, toolUseId } = json
    const state = snapshotState(json["state"])
    return isNonEmptyString(toolUseId) && isNonEmptyString(path) && state !== undefined ? { toolUseId, path, state } : undefined
  },
  blobs: (fields, visit) => (fields.state._tag === "unavailable" ? fields : { ...fields, state: visit.state(fields.state, fields.path) })
}) {}

const isOperation = (value: unknown): value is "write" | "edit" | "delete" | "chmod" =>
  value === "write" || value === "edit" || value === "delete" || value === "chmod"

/**
 * Written after every change a file tool makes. `after` is what the tool left; records
 * from before it existed lack it, and restore cannot check those for outside edits.
 */
export class FileChange extends EventClass<FileChange>()("FileChange", {
  toolUseId: Schema.NonEmptyString,
  path: Schema.NonEmptyString,
  operation: Schema.Literal("write", "edit", "delete", "chmod"),
  after: Schema.optionalWith(FileAfterState, { exact: true })
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { after, operation, path, toolUseId } = json
    const left = after === undefined ? undefined : afterState(after)
    if (!isNonEmptyString(toolUseId) || !isNonEmptyString(path) || !isOperation(operation)) return undefined
    if (after !== undefined && left === undefined) return undefined
    return { toolUseId, path, operation, ...(left === undefined ? {} : { after: left }) }
  }
}) {}
