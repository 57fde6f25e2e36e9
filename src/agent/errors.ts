/**
 * The agent's errors. Like every error of the library they are `Schema.TaggedError`s,
 * `instanceof Error`, and the very instances the promise facade rejects with.
 */
import { Schema } from "effect"

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

/** A compaction was stopped (its `signal` aborted) before it wrote anything: the log is as it was. */
export class CompactionCancelledError extends Schema.TaggedError<CompactionCancelledError>()("CompactionCancelledError", {
  sessionId: Schema.String,
  /** The stage it was in: measure, archive, normalize, summarize or project. */
  stage: Schema.String
}) {
  override get message(): string {
    return `compaction of session "${this.sessionId}" was cancelled during ${this.stage}; nothing was written`
  }
}
