/**
 * Every failure the library reports is one of these tagged errors. They are all
 * `instanceof Error`, carry the data a caller needs to react, and are exactly the
 * instances the promise facade rejects with.
 */
import { Schema } from "effect"

/** An `expectedHead` did not match the session's real head. Nothing was written. */
export class CheckpointConflictError extends Schema.TaggedError<CheckpointConflictError>()(
  "CheckpointConflictError",
  { sessionId: Schema.String, expected: Schema.Number, actual: Schema.Number }
) {
  override get message(): string {
    return `session "${this.sessionId}": expected head ${this.expected}, but the head is ${this.actual}; re-read the log and retry`
  }
}

/** A session id that cannot be used (it would become an unsafe file name, among others). */
export class InvalidSessionIdError extends Schema.TaggedError<InvalidSessionIdError>()(
  "InvalidSessionIdError",
  { sessionId: Schema.String, reason: Schema.String }
) {
  override get message(): string {
    return `invalid session id ${JSON.stringify(this.sessionId)}: ${this.reason}`
  }
}

/** A seq argument (`sinceSeq`, `toSeq`, `expectedHead`) outside what the session allows. */
export class InvalidSeqError extends Schema.TaggedError<InvalidSeqError>()(
  "InvalidSeqError",
  { sessionId: Schema.String, argument: Schema.String, value: Schema.Unknown, reason: Schema.String }
) {
  override get message(): string {
    return `session "${this.sessionId}": invalid ${this.argument} ${String(this.value)}: ${this.reason}`
  }
}

/** An event handed to `append` that is not a valid `SessionEvent`. Nothing was stored. */
export class InvalidEventError extends Schema.TaggedError<InvalidEventError>()(
  "InvalidEventError",
  { sessionId: Schema.String, index: Schema.Number, detail: Schema.String }
) {
  override get message(): string {
    return `session "${this.sessionId}": event #${this.index} is not a valid SessionEvent: ${this.detail}`
  }
}

/** A stored record that decodes to no known event (unknown kind or malformed fields). */
export class EventDecodeError extends Schema.TaggedError<EventDecodeError>()(
  "EventDecodeError",
  { sessionId: Schema.String, seq: Schema.Number, detail: Schema.String }
) {
  override get message(): string {
    return `session "${this.sessionId}", seq ${this.seq}: cannot decode stored event: ${this.detail}`
  }
}

/** Stored data is damaged: a bad record in the middle of a log, a failed checksum, a corrupt database. */
export class CheckpointIntegrityError extends Schema.TaggedError<CheckpointIntegrityError>()(
  "CheckpointIntegrityError",
  {
    sessionId: Schema.optional(Schema.String),
    seq: Schema.optional(Schema.Number),
    offset: Schema.optional(Schema.Number),
    detail: Schema.String
  }
) {
  override get message(): string {
    const where = [
      this.sessionId === undefined ? undefined : `session "${this.sessionId}"`,
      this.seq === undefined ? undefined : `seq ${this.seq}`,
      this.offset === undefined ? undefined : `byte offset ${this.offset}`
    ].filter((part) => part !== undefined)
    return `${where.length > 0 ? where.join(", ") + ": " : ""}integrity check failed: ${this.detail}`
  }
}

/** Stored data was written by a newer, incompatible format version. It was not touched. */
export class SchemaVersionError extends Schema.TaggedError<SchemaVersionError>()(
  "SchemaVersionError",
  { found: Schema.Number, supported: Schema.Number, detail: Schema.optional(Schema.String) }
) {
  override get message(): string {
    return `stored format version ${this.found} is newer than the supported version ${this.supported}${
      this.detail === undefined ? "" : ` (${this.detail})`
    }`
  }
}

/** A codec could not encode or decode a record (wrong key, tampered data, encoder failure). */
export class CodecError extends Schema.TaggedError<CodecError>()(
  "CodecError",
  { codec: Schema.String, operation: Schema.Literal("encode", "decode"), detail: Schema.String }
) {
  override get message(): string {
    return `codec "${this.codec}" failed to ${this.operation}: ${this.detail}`
  }
}

/** The checkpointer was closed; it cannot be used again. */
export class CheckpointerClosedError extends Schema.TaggedError<CheckpointerClosedError>()(
  "CheckpointerClosedError",
  {}
) {
  override get message(): string {
    return "the checkpointer is closed"
  }
}

/**
 * The storage medium failed (I/O error, disk full, permission denied, a read-only store).
 * `code` is the storage's own name for the failure, when it gives one (SQLite: `SQLITE_FULL`,
 * `SQLITE_IOERR_WRITE`, `SQLITE_READONLY`, …).
 */
export class StorageError extends Schema.TaggedError<StorageError>()(
  "StorageError",
  {
    operation: Schema.String,
    detail: Schema.String,
    code: Schema.optional(Schema.String),
    cause: Schema.optional(Schema.Defect)
  }
) {
  override get message(): string {
    return `storage error during ${this.operation}${this.code === undefined ? "" : ` (${this.code})`}: ${this.detail}`
  }
}

/** Invalid options given to a constructor (a backend, a codec, the agent). */
export class ConfigurationError extends Schema.TaggedError<ConfigurationError>()(
  "ConfigurationError",
  { option: Schema.String, detail: Schema.String }
) {
  override get message(): string {
    return `invalid option "${this.option}": ${this.detail}`
  }
}

/** The session is locked by someone else for longer than the caller was willing to wait. */
export class CheckpointBusyError extends Schema.TaggedError<CheckpointBusyError>()(
  "CheckpointBusyError",
  { sessionId: Schema.optional(Schema.String), waitedMs: Schema.Number, detail: Schema.String }
) {
  override get message(): string {
    return `${this.sessionId === undefined ? "" : `session "${this.sessionId}": `}still busy after ${this.waitedMs} ms: ${this.detail}`
  }
}

/**
 * A writer found, right before writing, that its session lock was no longer its own: it had
 * not renewed the lock for longer than the lease (the process was paused, or its event loop
 * stalled) and another process took it over. Nothing was written; re-read the head and retry.
 */
export class CheckpointLockLostError extends Schema.TaggedError<CheckpointLockLostError>()(
  "CheckpointLockLostError",
  { sessionId: Schema.String, detail: Schema.String }
) {
  override get message(): string {
    return `session "${this.sessionId}": the session lock was lost before writing, nothing was written: ${this.detail}`
  }
}

/**
 * A delete or a truncate would take events that forks of the session still read as their own
 * (a fork shares its source's first events instead of copying them). Nothing was changed:
 * delete the forks first, or truncate no lower than their fork points.
 */
export class SessionForkedError extends Schema.TaggedError<SessionForkedError>()(
  "SessionForkedError",
  {
    sessionId: Schema.String,
    operation: Schema.Literal("delete", "truncate"),
    /** The forks that share the events, and how many each shares. */
    forks: Schema.Array(Schema.Struct({ sessionId: Schema.String, at: Schema.Number }))
  }
) {
  override get message(): string {
    const forks = this.forks.map((fork) => `"${fork.sessionId}" (its first ${fork.at} events)`).join(", ")
    return `session "${this.sessionId}" was not changed: its forks ${forks} share its events, which a ${this.operation} would take; ` +
      (this.operation === "delete" ? "delete the forks first" : "truncate no lower than the fork points")
  }
}

/** Why restore will not act, for one file or for the whole request. */
export const RefusalReason = Schema.Literal(
  "not_a_checkpoint",
  "tool_call_cut",
  "tool_interrupted",
  "snapshot_missing",
  "snapshot_unavailable",
  "snapshot_truncated",
  "unsafe_path",
  "modified_externally",
  "restore_interrupted",
  "no_interrupted_restore",
  "nothing_to_undo",
  "nothing_to_redo",
  "not_a_branch",
  "other_branch",
  "capture_failed",
  "branch_pruned"
)
export type RefusalReason = typeof RefusalReason.Type

export const Refusal = Schema.Struct({
  reason: RefusalReason,
  path: Schema.optionalWith(Schema.String, { exact: true }),
  detail: Schema.String
})
export type Refusal = typeof Refusal.Type

/**
 * A file snapshot's bytes cannot be read back from the session's snapshot store: the blob is
 * not there (`missing`) or does not match the hash it is stored under (`damaged`).
 */
export class SnapshotBlobError extends Schema.TaggedError<SnapshotBlobError>()(
  "SnapshotBlobError",
  {
    sessionId: Schema.String,
    sha256: Schema.String,
    reason: Schema.Literal("missing", "damaged"),
    detail: Schema.String
  }
) {
  override get message(): string {
    return `session "${this.sessionId}": snapshot ${this.sha256.slice(0, 12)}… is ${this.reason}: ${this.detail}`
  }
}

/** Every error a `Checkpointer` operation can fail with. */
export type CheckpointerError =
  | CheckpointConflictError
  | InvalidSessionIdError
  | InvalidSeqError
  | InvalidEventError
  | EventDecodeError
  | CheckpointIntegrityError
  | SchemaVersionError
  | CodecError
  | CheckpointerClosedError
  | StorageError
  | CheckpointBusyError
  | CheckpointLockLostError
  | ConfigurationError
  | SnapshotBlobError
  | SessionForkedError
