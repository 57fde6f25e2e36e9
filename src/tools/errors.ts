/**
 * The errors of the file tools, the workspace and time travel. Like every error of the
 * library they are `Schema.TaggedError`s, `instanceof Error`, and the very instances the
 * promise facade rejects with.
 */
import { Schema } from "effect"
import { Refusal } from "../core/errors.js"
import { MoveReason } from "../core/events.js"
import type { InterruptedRestore } from "../core/session.js"

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

/** Restore refused: every reason, per file where it applies. Nothing was changed. */
export class RestoreRefusedError extends Schema.TaggedError<RestoreRefusedError>()("RestoreRefusedError", {
  sessionId: Schema.String,
  /** The checkpoint of a restore (or fork), the leaf of a move; 0 when there was none to go to. */
  seq: Schema.Number,
  refusals: Schema.Array(Refusal),
  /** What was refused, when it is not a restore: an undo, a redo, a switch, a fork. */
  operation: Schema.optional(Schema.Literal("undo", "redo", "switch", "fork"))
}) {
  override get message(): string {
    const lines = this.refusals.map((r) => `- ${r.path === undefined ? "" : `${r.path}: `}${r.reason} (${r.detail})`)
    const what = this.operation === undefined
      ? `restore of session "${this.sessionId}" to checkpoint ${this.seq}`
      : this.operation === "switch"
      ? `switch of session "${this.sessionId}" to seq ${this.seq}`
      : this.operation === "fork"
      ? `fork of session "${this.sessionId}"${this.seq === 0 ? "" : ` from checkpoint ${this.seq}`}`
      : `${this.operation} of session "${this.sessionId}"${this.seq === 0 ? "" : ` (back to seq ${this.seq})`}`
    return `${what} refused; nothing was changed:\n${lines.join("\n")}`
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
 * The session has a restore that was cut short (its intent is in the log, at `startedSeq`): its
 * workspace may be half way between two states, so nothing may run on it — a turn, or another
 * restore — until the restore is finished (`restore` to the same checkpoint) or undone
 * (`undoInterruptedRestore`).
 */
export class RestoreInterruptedError extends Schema.TaggedError<RestoreInterruptedError>()("RestoreInterruptedError", {
  sessionId: Schema.String,
  /** The checkpoint the interrupted restore goes back to (absent for an undo, redo or switch). */
  checkpoint: Schema.optionalWith(Schema.Number, { exact: true }),
  /** An undo, redo or switch: the leaf it was moving the session to. */
  move: Schema.optionalWith(Schema.Struct({ reason: MoveReason, to: Schema.Number }), { exact: true }),
  startedSeq: Schema.Number
}) {
  /** The error for a session's interrupted restore (as `interruptedRestore` reports it). */
  static of(sessionId: string, interrupted: InterruptedRestore): RestoreInterruptedError {
    return new RestoreInterruptedError({
      sessionId,
      ...(interrupted.checkpoint === undefined ? {} : { checkpoint: interrupted.checkpoint }),
      ...(interrupted.move === undefined ? {} : { move: interrupted.move }),
      startedSeq: interrupted.startedSeq
    })
  }

  override get message(): string {
    const [what, finish] = this.move === undefined
      ? [`a restore to checkpoint ${this.checkpoint}`, `restore("${this.sessionId}", ${this.checkpoint})`]
      : [`an ${this.move.reason} to seq ${this.move.to}`, `${this.move.reason}("${this.sessionId}")`]
    return `session "${this.sessionId}" has ${what} that was cut short (its intent is at seq ${this.startedSeq}); its files may ` +
      `be half restored: finish it with ${finish} or put them back with undoInterruptedRestore("${this.sessionId}")`
  }
}

/**
 * The session's files live in another workdir (its `SessionMetadata` names it): a turn, restore,
 * move or fork in place here would take this tree for that one. Nothing was changed. Run it in
 * `sessionWorkdir`, or pass `rehome: true` to make `workdir` the session's (recorded as an event).
 */
export class SessionWorkdirError extends Schema.TaggedError<SessionWorkdirError>()("SessionWorkdirError", {
  sessionId: Schema.String,
  /** What was refused: "turn", "restore", "undo", "redo", "switch", "fork", "undoInterruptedRestore". */
  operation: Schema.String,
  /** The workdir the session's log names. */
  sessionWorkdir: Schema.String,
  /** This agent's workdir. */
  workdir: Schema.String
}) {
  override get message(): string {
    return `session "${this.sessionId}" belongs to workdir ${this.sessionWorkdir}, not ${this.workdir} (this agent's): ` +
      `${this.operation} refused, nothing was changed. Run it there, or re-home the session here (rehome: true; ` +
      `recorded in the session, and what differs here is then taken for your own edits)`
  }
}
