/** A restore under way: its intent, logged before it changes any file, and its end. */
import { Schema } from "effect"
import { afterState, blobState, isCount, isFields, isNonEmptyString, isPositiveInt, optional } from "../internal/eventChecks.js"
import { EventClass } from "../internal/eventKind.js"
import { Count, FileAbsent, FileLeft, PositiveInt, SnapshotContent, SnapshotMissing, SnapshotStored } from "./parts.js"
import { isMoveReason, MoveReason } from "./tree.js"
import { DirectoryState, LinkState, linkOrDirectoryState } from "./workspace.js"

/**
 * What a path held when a restore began: a file's bytes and mode (`content`, kept in the snapshot
 * store as `stored`, like a `FileSnapshot`'s), nothing, a link or a directory.
 */
export const RestoreBefore = Schema.Union(SnapshotContent, SnapshotStored, SnapshotMissing, LinkState, DirectoryState)
export type RestoreBefore = typeof RestoreBefore.Type

/** What a restore puts at a path: a file (by hash), nothing, a link or a directory. */
export const RestoreTarget = Schema.Union(FileLeft, FileAbsent, LinkState, DirectoryState)
export type RestoreTarget = typeof RestoreTarget.Type

/** One path a restore changes: what it held before, and what the restore puts there. */
export const RestoreFile = Schema.Struct({
  /** Relative to the workdir, with `/` separators. */
  path: Schema.NonEmptyString,
  before: RestoreBefore,
  target: RestoreTarget
})
export type RestoreFile = typeof RestoreFile.Type

/**
 * A restore's intent, appended before it changes any file. A restore that completes takes it
 * out of the log again (its truncate), or closes it with a `RestoreEnded` when the log has moved
 * past it; one cut short by a crash leaves it, so the session knows its workspace may be half
 * way between two states: the restore can be finished, or undone from each file's `before`.
 * Not a message and not a checkpoint: the model never sees it.
 */
export class RestoreStarted extends EventClass<RestoreStarted>()("RestoreStarted", {
  /** The checkpoint (the seq of its prompt) restored to; absent for a move along the history of moves (which sets `move`). */
  checkpoint: Schema.optionalWith(PositiveInt, { exact: true }),
  /** An undo, redo or switch: the leaf the session moves to, and why (then no `checkpoint`). */
  move: Schema.optionalWith(Schema.Struct({ reason: MoveReason, to: Count }), { exact: true }),
  /** Whether the conversation goes back too (the session's leaf moved to just before the checkpoint). */
  conversation: Schema.Boolean,
  /** The files the restore changes (not those already at their target). */
  files: Schema.Array(RestoreFile)
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { checkpoint, conversation, files } = json
    const move = json["move"] === undefined ? undefined : movedTo(json["move"])
    if (json["move"] !== undefined && move === undefined) return undefined
    if (!optional(checkpoint, isPositiveInt) || typeof conversation !== "boolean" || !Array.isArray(files)) return undefined
    const built: Array<RestoreFile> = []
    for (const file of files) {
      if (!isFields(file)) return undefined
      const { path } = file
      const before = linkOrDirectoryState(file["before"]) ?? blobState(file["before"])
      const target = linkOrDirectoryState(file["target"]) ?? afterState(file["target"])
      if (!isNonEmptyString(path) || before === undefined || target === undefined) return undefined
      built.push({ path, before, target })
    }
    return {
      ...(checkpoint === undefined ? {} : { checkpoint }),
      ...(move === undefined ? {} : { move }),
      conversation,
      files: built
    }
  },
  blobs: (fields, visit) => ({
    ...fields,
    files: fields.files.map((file) =>
      file.before._tag === "link" || file.before._tag === "directory"
        ? file
        : { path: file.path, before: visit.state(file.before, file.path), target: file.target }
    )
  })
}) {}

const movedTo = (value: unknown): { readonly reason: MoveReason; readonly to: number } | undefined => {
  if (!isFields(value)) return undefined
  const { reason, to } = value
  return isMoveReason(reason) && isCount(to) ? { reason, to } : undefined
}

const isOutcome = (value: unknown): value is "finished" | "undone" => value === "finished" || value === "undone"

/** The restore begun at `startedSeq` ended with its intent still in the log (the log had moved past it). */
export class RestoreEnded extends EventClass<RestoreEnded>()("RestoreEnded", {
  startedSeq: PositiveInt,
  /** `finished`: the files are at the restore's targets; `undone`: back to what they held before it. */
  outcome: Schema.Literal("finished", "undone")
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { outcome, startedSeq } = json
    return isPositiveInt(startedSeq) && isOutcome(outcome) ? { startedSeq, outcome } : undefined
  }
}) {}
