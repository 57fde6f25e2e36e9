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

/** The storage medium failed (I/O error, disk full, permission denied). */
export class StorageError extends Schema.TaggedError<StorageError>()(
  "StorageError",
  { operation: Schema.String, detail: Schema.String, cause: Schema.optional(Schema.Defect) }
) {
  override get message(): string {
    return `storage error during ${this.operation}: ${this.detail}`
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

/** A path that resolves outside the workdir, or through a symlink. Nothing was touched. */
export class UnsafePathError extends Schema.TaggedError<UnsafePathError>()("UnsafePathError", {
  path: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `unsafe path ${JSON.stringify(this.path)}: ${this.reason}`
  }
}

/** The file system refused an operation inside the workdir. */
export class WorkspaceIOError extends Schema.TaggedError<WorkspaceIOError>()("WorkspaceIOError", {
  operation: Schema.String,
  path: Schema.String,
  detail: Schema.String
}) {
  override get message(): string {
    return `cannot ${this.operation} ${JSON.stringify(this.path)}: ${this.detail}`
  }
}

/** A tool was called with input it cannot act on (no unique match for an edit, a directory to write…). */
export class ToolInputError extends Schema.TaggedError<ToolInputError>()("ToolInputError", {
  tool: Schema.String,
  path: Schema.optionalWith(Schema.String, { exact: true }),
  detail: Schema.String
}) {
  override get message(): string {
    return `${this.tool}${this.path === undefined ? "" : ` ${JSON.stringify(this.path)}`}: ${this.detail}`
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
  "modified_externally"
)
export type RefusalReason = typeof RefusalReason.Type

export const Refusal = Schema.Struct({
  reason: RefusalReason,
  path: Schema.optionalWith(Schema.String, { exact: true }),
  detail: Schema.String
})
export type Refusal = typeof Refusal.Type

/** Restore refused: every reason, per file where it applies. Nothing was changed. */
export class RestoreRefusedError extends Schema.TaggedError<RestoreRefusedError>()("RestoreRefusedError", {
  sessionId: Schema.String,
  seq: Schema.Number,
  refusals: Schema.Array(Refusal)
}) {
  override get message(): string {
    const lines = this.refusals.map((r) => `- ${r.path === undefined ? "" : `${r.path}: `}${r.reason} (${r.detail})`)
    return `restore of session "${this.sessionId}" to checkpoint ${this.seq} refused; nothing was changed:\n${lines.join("\n")}`
  }
}

/** Restore stopped part-way (aborted, or a write failed); every file it had changed was put back. */
export class RestoreFailedError extends Schema.TaggedError<RestoreFailedError>()("RestoreFailedError", {
  sessionId: Schema.String,
  seq: Schema.Number,
  detail: Schema.String,
  /** Files that could not be put back (empty when the rollback was complete). */
  notRolledBack: Schema.Array(Schema.String),
  cause: Schema.optionalWith(Schema.Defect, { exact: true })
}) {
  override get message(): string {
    return `restore of session "${this.sessionId}" to checkpoint ${this.seq} failed: ${this.detail}; ` +
      (this.notRolledBack.length === 0
        ? "every file was put back as it was"
        : `these files could not be put back: ${this.notRolledBack.join(", ")}`)
  }
}

/**
 * The agent cannot do this now without breaking the maintenance rule: restore needs the agent
 * idle (no run in flight or queued, no background task running), and while a restore runs no
 * other run may write. Nothing was changed; retry when the agent is idle.
 */
export class AgentBusyError extends Schema.TaggedError<AgentBusyError>()("AgentBusyError", {
  /** What was refused: "send", "restore", "deleteSession", "resume", "clear". */
  operation: Schema.String,
  /** Why: "maintenance" (a restore is running), "run_in_flight", "background_task". */
  reason: Schema.Literal("maintenance", "run_in_flight", "background_task"),
  sessionId: Schema.optionalWith(Schema.String, { exact: true }),
  detail: Schema.String
}) {
  override get message(): string {
    return `${this.operation} refused, the agent is busy (${this.reason}): ${this.detail}`
  }
}

/** The agent was created with `sessions: false`: there is no persisted session to manage. */
export class SessionsDisabledError extends Schema.TaggedError<SessionsDisabledError>()("SessionsDisabledError", {
  operation: Schema.String
}) {
  override get message(): string {
    return `${this.operation} is not available: this agent was created with sessions: false (no persistence)`
  }
}

/** The model call failed (network, HTTP status, malformed output, a scripted model that ran out). */
export class ModelError extends Schema.TaggedError<ModelError>()("ModelError", {
  sessionId: Schema.String,
  /** HTTP status of the provider's answer, when there was one. */
  status: Schema.optionalWith(Schema.Number, { exact: true }),
  detail: Schema.String,
  cause: Schema.optionalWith(Schema.Defect, { exact: true })
}) {
  override get message(): string {
    return `model call for session "${this.sessionId}" failed${this.status === undefined ? "" : ` (HTTP ${this.status})`}: ${this.detail}`
  }
}

/** The agent (or its facade) was closed; every later call fails with this. */
export class AgentClosedError extends Schema.TaggedError<AgentClosedError>()("AgentClosedError", {}) {
  override get message(): string {
    return "the agent is closed"
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
