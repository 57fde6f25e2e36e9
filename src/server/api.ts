/**
 * The session server's HTTP API, declared once: every route, its path, body and answer, each
 * error it can answer with and that error's status, and the bearer token in front of all of
 * them. The server (handlers.ts, sse.ts) implements it; `HttpApiClient.make(SessionApi)` is
 * its typed client; `OpenApi.fromApi(SessionApi)` its description (served at /openapi.json).
 *
 * The bodies (`setPayload`) are for the client and the description: the server decodes them
 * itself (handlers.ts), so bad ones get its own 400/413 answers.
 *
 * Statuses: 400 bad input (nothing changed), 401 no or a wrong token, 404 an unknown session or
 * a sessions-only server's agent routes, 409 a conflict, a busy agent or a refused restore, 413
 * a body over `maxBodyBytes`, 500 the store or the model failing.
 */
import * as HttpApi from "@effect/platform/HttpApi"
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as HttpApiMiddleware from "@effect/platform/HttpApiMiddleware"
import type { HttpMethod } from "@effect/platform/HttpMethod"
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import * as HttpApiSecurity from "@effect/platform/HttpApiSecurity"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Refusal } from "../core/errors.js"
import { MoveReason } from "../core/events.js"
import { expecting, Flag, NonEmptyString } from "../core/internal/options.js"
import { StoreGroup } from "./storeApi.js"
import { CheckpointPath, ConversationParams, EventsHeaders, EventsParams, PermissionPath, SessionPath } from "./apiParams.js"
import { Wire } from "./wireErrors.js"

export { SessionUsageJson, StoreUsageJson } from "./storeApi.js"

// ---------------------------------------------------------------------------------------
// Bodies and answers
// ---------------------------------------------------------------------------------------

export const MessageBody = Schema.Struct({
  text: NonEmptyString,
  /** The session's log names another workdir than the agent's: make the agent's its own (recorded) rather than answer 409 \`SessionWorkdirError\`. */
  rehome: Schema.optional(Flag)
})

/** `?detach=true`: answer 202 at once and let the turn run on (followed on `/sessions/:id/events`). */
export const MessageParams = Schema.Struct({
  detach: Schema.optional(expecting(Schema.Literal("true", "false"), `"true" or "false"`))
})

/** A turn detached from its request: it runs on, and its events are in the session's log. */
export const DetachedTurn = Schema.Struct({ sessionId: Schema.String, detached: Schema.Literal(true) })

/** The answer to a pending permission question (`permission_request`), as `canUseTool` would give it. */
export const PermissionAnswerBody = Schema.Struct({
  behavior: expecting(Schema.Literal("allow", "deny"), `"allow" or "deny"`),
  /** allow: allow this tool for the rest of the session. */
  remember: Schema.optional(Flag),
  /** deny: what the model is told. */
  message: Schema.optional(Schema.String),
  /** deny: stop the turn too. */
  interrupt: Schema.optional(Flag)
})

const NonNegativeInteger = expecting(Schema.Number.pipe(Schema.int(), Schema.nonNegative()), "a non-negative integer")
const PositiveInteger = expecting(Schema.Number.pipe(Schema.int(), Schema.positive()), "a positive integer")

export const RestoreBody = Schema.Struct({
  seq: NonNegativeInteger,
  files: Schema.optional(Flag),
  conversation: Schema.optional(Flag),
  dryRun: Schema.optional(Flag),
  /** Undo the user's own edits between turns too (otherwise refused as `modified_externally`). */
  includeUserEdits: Schema.optional(Flag),
  /** The session's log names another workdir than the agent's: make the agent's its own (recorded) rather than answer 409 \`SessionWorkdirError\`. */
  rehome: Schema.optional(Flag)
})

const LeafMoveJson = Schema.Struct({ seq: Schema.Number, from: Schema.Number, to: Schema.Number })

/** A session's tree: its checkpoints on every branch, its branches by their tips, what undo and redo would reverse. */
export const SessionTreeJson = Schema.Struct({
  leaf: Schema.Number,
  checkpoints: Schema.Array(Schema.Struct({
    seq: Schema.Number,
    prompt: Schema.String,
    ts: Schema.Number,
    parent: Schema.NullOr(Schema.Number),
    children: Schema.Array(Schema.Number),
    current: Schema.Boolean,
    label: Schema.optionalWith(Schema.String, { exact: true })
  })),
  branches: Schema.Array(Schema.Struct({
    leaf: Schema.Number,
    checkpoint: Schema.NullOr(Schema.Number),
    current: Schema.Boolean,
    label: Schema.optionalWith(Schema.String, { exact: true }),
    /** A branch `pruneBranches` took out of reach: shown as pruned, no move goes there. */
    pruned: Schema.optionalWith(Schema.Literal(true), { exact: true })
  })),
  undo: Schema.NullOr(LeafMoveJson),
  redo: Schema.NullOr(LeafMoveJson),
  /** A fork's origin: the session it was forked from and how many of its events it shares. */
  forkedFrom: Schema.optionalWith(Schema.Struct({ session: Schema.String, at: Schema.Number }), { exact: true }),
  /** The forks made of this session, oldest first. */
  forks: Schema.optionalWith(Schema.Array(Schema.Struct({ session: Schema.String, at: Schema.Number })), { exact: true })
})

export const LabelBody = Schema.Struct({ seq: PositiveInteger, label: Schema.String })

/** A switch to another branch: its tip's seq (from the tree), and a move's options. */
export const SwitchBody = Schema.Struct({
  leaf: NonNegativeInteger,
  dryRun: Schema.optional(Flag),
  includeUserEdits: Schema.optional(Flag),
  /** The session's log names another workdir than the agent's: make the agent's its own (recorded) rather than answer 409 `SessionWorkdirError`. */
  rehome: Schema.optional(Flag)
})

/** A fork: from just before checkpoint `seq` (or the tip, without it), in the agent's workdir or into `workdir`. */
export const ForkBody = Schema.Struct({
  seq: Schema.optional(PositiveInteger),
  /** The new session's id (default: a new one); the same id again finishes a fork a crash cut short. */
  id: Schema.optional(Schema.String),
  /** A new or empty directory, on the server, for the fork's files (default: the agent's workdir, whose files move). */
  workdir: Schema.optional(Schema.String),
  dryRun: Schema.optional(Flag),
  includeUserEdits: Schema.optional(Flag),
  /** The session's log names another workdir than the agent's: make the agent's its own (recorded) rather than answer 409 \`SessionWorkdirError\`. */
  rehome: Schema.optional(Flag)
})

/** An undo's or a redo's options (an empty body is none). */
export const MoveBody = Schema.Struct({
  dryRun: Schema.optional(Flag),
  /** Overwrite the user's own edits between turns since too (otherwise refused as `modified_externally`). */
  includeUserEdits: Schema.optional(Flag),
  /** The session's log names another workdir than the agent's: make the agent's its own (recorded) rather than answer 409 \`SessionWorkdirError\`. */
  rehome: Schema.optional(Flag)
})

export const CompactBody = Schema.Struct({
  instructions: Schema.optional(Schema.String),
  /** Messages kept verbatim after the summary, at most (estimated tokens). */
  keepRecentTokens: Schema.optional(NonNegativeInteger)
})



/** A session's messages on one branch, as a viewer shows them: events as the log holds them. */
export const ConversationJson = Schema.Struct({
  /** The node asked for (`at`), or the current leaf. */
  at: Schema.Number,
  /** The tip of the branch the messages are from. */
  leaf: Schema.Number,
  entries: Schema.Array(Schema.Struct({ seq: Schema.Number, ts: Schema.Number, event: Schema.Unknown })),
  /** The branch's last compaction before the end of the turn: its summary replaces, for the model, the messages before `keptFromSeq`. */
  compaction: Schema.NullOr(Schema.Struct({ seq: Schema.Number, summary: Schema.String, keptFromSeq: Schema.Number }))
})

/** What a path held at one point, as far as the session recorded it. */
const RecordedPathJson = Schema.Struct({
  kind: Schema.Literal("file", "link", "directory", "absent", "unknown"),
  size: Schema.optionalWith(Schema.Number, { exact: true }),
  target: Schema.optionalWith(Schema.String, { exact: true }),
  reason: Schema.optionalWith(Schema.String, { exact: true })
})

/** The files a checkpoint's turn changed, each with a unified diff when both sides are text within the size cap. */
export const CheckpointChangesJson = Schema.Struct({
  seq: Schema.Number,
  files: Schema.Array(Schema.Struct({
    path: Schema.String,
    before: RecordedPathJson,
    after: RecordedPathJson,
    /** `--- a/path`, `+++ b/path`, then hunks; null when there is no text diff to show (`note` says why). */
    diff: Schema.NullOr(Schema.Array(Schema.String)),
    note: Schema.NullOr(Schema.String)
  }))
})

export const SessionList = Schema.Struct({
  sessions: Schema.Array(Schema.Struct({ id: Schema.String, mtime: Schema.String }))
})

export const SessionSummary = Schema.Struct({
  id: Schema.String,
  head: Schema.Number,
  generation: Schema.String,
  stats: Schema.Struct({ events: Schema.Number, logBytes: Schema.Number, snapshotBytes: Schema.Number, snapshots: Schema.Number })
})

/** A path a restore leaves as it is, and why (not covered by the workspace capture). */
const NotCovered = Schema.Struct({ path: Schema.String, reason: Schema.String })

export const CheckpointList = Schema.Struct({
  checkpoints: Schema.Array(Schema.Struct({
    seq: Schema.Number,
    prompt: Schema.String,
    ts: Schema.Number,
    files: Schema.Array(Schema.String),
    unavailableFiles: Schema.Array(Schema.String),
    notCovered: Schema.Array(NotCovered)
  })),
  /** A restore a crash cut short, or null. */
  interruptedRestore: Schema.NullOr(Schema.Struct({
    /** A restore's checkpoint; absent for an undo, redo or switch. */
    checkpoint: Schema.optionalWith(Schema.Number, { exact: true }),
    /** An undo, redo or switch: the leaf it moves the session to. */
    move: Schema.optionalWith(Schema.Struct({ reason: MoveReason, to: Schema.Number }), { exact: true }),
    startedSeq: Schema.Number,
    conversation: Schema.Boolean,
    files: Schema.Array(Schema.String)
  }))
})

export const RestoreResult = Schema.Struct({
  restoredFiles: Schema.Array(Schema.String),
  conversationRestored: Schema.Boolean,
  unverifiedFiles: Schema.Array(Schema.String),
  commandsNotUndone: Schema.Array(Schema.Struct({ seq: Schema.Number, tool: Schema.String, input: Schema.Unknown })),
  notCovered: Schema.Array(NotCovered),
  dryRun: Schema.Boolean,
  plan: Schema.Array(Schema.Struct({
    path: Schema.String,
    action: Schema.Literal("write", "link", "directory", "delete", "none"),
    refusal: Schema.optionalWith(Refusal, { exact: true }),
    unverified: Schema.Boolean,
    alreadyRestored: Schema.Boolean
  })),
  refusals: Schema.Array(Refusal),
  resumed: Schema.Boolean
})

export const ForkResult = Schema.Struct({
  ...RestoreResult.fields,
  sessionId: Schema.String,
  forkedFrom: Schema.Struct({ session: Schema.String, at: Schema.Number }),
  leaf: Schema.Number,
  workdir: Schema.String
})

/** A Server-Sent Events stream; read it with an SSE client (`EventSource`), not as one body. */
const EventStream = HttpApiSchema.Text({ contentType: "text/event-stream" }).annotations({
  description: "Server-Sent Events: `id:` a seq where there is one, `event:` the kind, `data:` JSON"
})

// ---------------------------------------------------------------------------------------
// The token
// ---------------------------------------------------------------------------------------

/** Every route needs `Authorization: Bearer <token>`; without it, or with a wrong one, 401. */
export class Authorization extends HttpApiMiddleware.Tag<Authorization>()("@lite-agent/server/Authorization", {
  failure: Wire.Unauthorized.annotations(HttpApiSchema.annotations({ status: 401 })),
  security: { bearer: HttpApiSecurity.bearer }
}) {}

// ---------------------------------------------------------------------------------------
// Routes
// ---------------------------------------------------------------------------------------

/** Sessions as JSON and their events as SSE: served with or without an agent. */
export class SessionsGroup extends HttpApiGroup.make("sessions")
  .add(HttpApiEndpoint.get("list", "/sessions").addSuccess(SessionList))
  .add(
    HttpApiEndpoint.get("get", "/sessions/:id").setPath(SessionPath).addSuccess(SessionSummary)
      .addError(Wire.SessionNotFound, { status: 404 })
  )
  .add(
    HttpApiEndpoint.get("checkpoints", "/sessions/:id/checkpoints").setPath(SessionPath).addSuccess(CheckpointList)
      .addError(Wire.SessionNotFound, { status: 404 })
  )
  .add(
    HttpApiEndpoint.get("tree", "/sessions/:id/tree").setPath(SessionPath).addSuccess(SessionTreeJson)
      .addError(Wire.SessionNotFound, { status: 404 })
      .annotate(OpenApi.Description, "The session's tree: every branch's checkpoints, the branches by their tips, the current one, labels.")
  )
  .add(
    HttpApiEndpoint.get("conversation", "/sessions/:id/conversation").setPath(SessionPath).setUrlParams(ConversationParams)
      .addSuccess(ConversationJson)
      .addError(Wire.SessionNotFound, { status: 404 })
      .annotate(OpenApi.Description, "The messages of the branch through ?at= (default: the current one), up to the end of that checkpoint's turn.")
  )
  .add(
    HttpApiEndpoint.get("changes", "/sessions/:id/checkpoints/:seq/changes").setPath(CheckpointPath).addSuccess(CheckpointChangesJson)
      .addError(Wire.SessionNotFound, { status: 404 })
      .annotate(OpenApi.Description, "The files the checkpoint's turn changed: what each held before and after, and a text diff.")
  )
  .add(
    HttpApiEndpoint.get("events", "/sessions/:id/events").setPath(SessionPath).setUrlParams(EventsParams).setHeaders(EventsHeaders)
      .addSuccess(EventStream)
      .addError(Wire.SessionNotFound, { status: 404 })
      .annotate(
        OpenApi.Description,
        "The session's events as Server-Sent Events, then each new one as it lands. Resume with Last-Event-ID or ?sinceSeq=; " +
          "?generation= makes the resume exact."
      )
  )
  .add(
    HttpApiEndpoint.del("delete", "/sessions/:id").setPath(SessionPath).addSuccess(HttpApiSchema.NoContent)
      .addError(Wire.SessionNotFound, { status: 404 })
      .addError(Wire.AgentBusyError, { status: 409 })
  )
{}

/**
 * What a route that moves a session and its files answers besides its result (restore, undo,
 * redo, switch): the session unknown, the body too large, the agent busy, a refusal or a restore
 * cut short (409), a failure part-way (500).
 */
const movesFiles = <
  Name extends string,
  Method extends HttpMethod,
  Path,
  UrlParams,
  Payload,
  Headers,
  Success,
  Error,
  R,
  RE
>(endpoint: HttpApiEndpoint.HttpApiEndpoint<Name, Method, Path, UrlParams, Payload, Headers, Success, Error, R, RE>) =>
  endpoint
    .addError(Wire.SessionNotFound, { status: 404 })
    .addError(Wire.PayloadTooLarge, { status: 413 })
    .addError(Wire.AgentBusyError, { status: 409 })
    .addError(Wire.RestoreRefusedError, { status: 409 })
    .addError(Wire.RestoreInterruptedError, { status: 409 })
    .addError(Wire.SessionWorkdirError, { status: 409 })
    .addError(Wire.RestoreFailedError, { status: 500 })
    .addError(Wire.WorkspaceIOError, { status: 500 })

/** Turns, restores and compactions: 404 `NoAgent` on a server without an agent. */
export class AgentGroup extends HttpApiGroup.make("agent")
  .add(
    HttpApiEndpoint.post("messages", "/sessions/:id/messages").setPath(SessionPath).setUrlParams(MessageParams).setPayload(MessageBody)
      .addSuccess(EventStream)
      .addSuccess(DetachedTurn, { status: 202 })
      .addError(Wire.PayloadTooLarge, { status: 413 })
      .addError(Wire.AgentBusyError, { status: 409 })
      .addError(Wire.RestoreInterruptedError, { status: 409 })
      .addError(Wire.SessionWorkdirError, { status: 409 })
      .addError(Wire.ModelError, { status: 500 })
      .annotate(
        OpenApi.Description,
        "Runs a turn in the session (creating it); its agent events as Server-Sent Events, `result` last. A client that leaves " +
          "cancels the turn — unless `?detach=true`: then 202 at once, and the turn runs on (follow it on `/sessions/:id/events`)."
      )
  )
  .add(
    HttpApiEndpoint.post("answerPermission", "/sessions/:id/permissions/:requestId").setPath(PermissionPath).setPayload(PermissionAnswerBody)
      .addError(Wire.PermissionRequestNotFound, { status: 404 })
      .addError(Wire.PayloadTooLarge, { status: 413 })
      .annotate(
        OpenApi.Description,
        "Answers a pending `permission_request` of a turn (its `requestId`): allow (with `remember` for the rest of the session) or " +
          "deny (with the `message` the model is told, and `interrupt` to stop the turn). A question nobody answers within the " +
          "server's permission timeout (`lite-agent serve --permission-timeout`, default 5 minutes) is denied, and then 404 like " +
          "one already answered."
      )
  )
  .add(
    HttpApiEndpoint.post("restore", "/sessions/:id/restore").setPath(SessionPath).setPayload(RestoreBody).addSuccess(RestoreResult)
      .pipe(movesFiles)
  )
  .add(
    HttpApiEndpoint.post("undoRestore", "/sessions/:id/restore/undo").setPath(SessionPath).addSuccess(RestoreResult)
      .addError(Wire.SessionNotFound, { status: 404 })
      .addError(Wire.AgentBusyError, { status: 409 })
      .addError(Wire.RestoreRefusedError, { status: 409 })
      .addError(Wire.SessionWorkdirError, { status: 409 })
      .addError(Wire.RestoreFailedError, { status: 500 })
      .addError(Wire.WorkspaceIOError, { status: 500 })
  )
  .add(
    HttpApiEndpoint.post("undo", "/sessions/:id/undo").setPath(SessionPath).setPayload(MoveBody).addSuccess(RestoreResult)
      .pipe(movesFiles)
      .annotate(OpenApi.Description, "Undoes the session's last move (a restore or a redo): conversation and workspace.")
  )
  .add(
    HttpApiEndpoint.post("redo", "/sessions/:id/redo").setPath(SessionPath).setPayload(MoveBody).addSuccess(RestoreResult)
      .pipe(movesFiles)
      .annotate(OpenApi.Description, "Redoes the session's last undo.")
  )
  .add(
    HttpApiEndpoint.post("switch", "/sessions/:id/switch").setPath(SessionPath).setPayload(SwitchBody).addSuccess(RestoreResult)
      .pipe(movesFiles)
      .annotate(OpenApi.Description, "Moves the session to another branch, by its tip's seq from the tree: its conversation and its files.")
  )
  .add(
    HttpApiEndpoint.post("fork", "/sessions/:id/fork").setPath(SessionPath).setPayload(ForkBody).addSuccess(ForkResult)
      .pipe(movesFiles)
      .annotate(
        OpenApi.Description,
        "Forks the session from just before a checkpoint (or its tip): a new session with the conversation up to there and " +
          "the workspace as it was there, in the agent's workdir or written into `workdir`."
      )
  )
  .add(
    HttpApiEndpoint.post("label", "/sessions/:id/label").setPath(SessionPath).setPayload(LabelBody)
      .addError(Wire.SessionNotFound, { status: 404 })
      .addError(Wire.PayloadTooLarge, { status: 413 })
      .addError(Wire.AgentBusyError, { status: 409 })
      .annotate(OpenApi.Description, "Names a checkpoint or a branch's tip (an empty label removes the name).")
  )
  .add(
    HttpApiEndpoint.post("compact", "/sessions/:id/compact").setPath(SessionPath).setPayload(CompactBody).addSuccess(EventStream)
      .addError(Wire.SessionNotFound, { status: 404 })
      .addError(Wire.PayloadTooLarge, { status: 413 })
      .addError(Wire.AgentBusyError, { status: 409 })
      .addError(Wire.ModelError, { status: 500 })
      .addError(Wire.CompactionCancelledError, { status: 500 })
      .annotate(OpenApi.Description, "Compacts the session; its `compaction` events as Server-Sent Events. A client that leaves cancels it.")
  )
  .addError(Wire.NoAgent, { status: 404 })
{}

export class SessionApi extends HttpApi.make("lite-agent")
  .add(SessionsGroup)
  .add(AgentGroup)
  .add(StoreGroup)
  // One addError per error: the builder flattens a union of errors, dropping a status given to the union.
  // Bad input: nothing was changed.
  .addError(Wire.BadRequest, { status: 400 })
  .addError(Wire.InvalidSessionIdError, { status: 400 })
  .addError(Wire.InvalidSeqError, { status: 400 })
  .addError(Wire.InvalidEventError, { status: 400 })
  .addError(Wire.ConfigurationError, { status: 400 })
  .addError(Wire.SessionsDisabledError, { status: 400 })
  // Someone else got there first, or holds the session.
  .addError(Wire.CheckpointConflictError, { status: 409 })
  .addError(Wire.CheckpointBusyError, { status: 409 })
  .addError(Wire.SessionForkedError, { status: 409 })
  // The store failed: storage, integrity, a codec, a closed checkpointer.
  .addError(Wire.EventDecodeError, { status: 500 })
  .addError(Wire.CheckpointIntegrityError, { status: 500 })
  .addError(Wire.SchemaVersionError, { status: 500 })
  .addError(Wire.CodecError, { status: 500 })
  .addError(Wire.CheckpointerClosedError, { status: 500 })
  .addError(Wire.StorageError, { status: 500 })
  .addError(Wire.CheckpointLockLostError, { status: 500 })
  .addError(Wire.SnapshotBlobError, { status: 500 })
  .middleware(Authorization)
  .annotateContext(OpenApi.annotations({
    title: "lite-agent session server",
    description: "Durable agent sessions over HTTP: sessions as JSON, their events as Server-Sent Events, and, with an agent, " +
      "turns, restores and compactions."
  }))
{}
