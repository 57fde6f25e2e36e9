/**
 * Errors as the server sends them: `{ ...fields, error: <tag>, message }` — the error's own
 * fields (never its `cause`), its tag as `error`, its message last. `wireError` turns a tagged
 * error class into a schema of exactly that body, so the HTTP API declares each error once
 * and its typed client decodes the body back into the same class.
 */
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { Cause, Option, ParseResult, Schema } from "effect"
import {
  CheckpointBusyError,
  CheckpointConflictError,
  CheckpointerClosedError,
  CheckpointIntegrityError,
  CheckpointLockLostError,
  SessionForkedError,
  CodecError,
  ConfigurationError,
  EventDecodeError,
  InvalidEventError,
  InvalidSeqError,
  InvalidSessionIdError,
  SchemaVersionError,
  SnapshotBlobError,
  StorageError
} from "../core/errors.js"
import { AgentBusyError, CompactionCancelledError, ModelError, SessionsDisabledError } from "../agent/errors.js"
import { RestoreFailedError, RestoreInterruptedError, RestoreRefusedError, SessionWorkdirError, WorkspaceIOError } from "../tools/errors.js"

/** What every error body has, besides the error's own fields. */
export interface WireErrorBody {
  readonly error: string
  readonly message: string
}

/** Keys of an error never sent: the tag goes out as `error`, the message last, the cause not at all. */
const notOnWire = new Set(["_tag", "message", "cause", "stack"])

/**
 * `errorClass` as the body the server sends for it. Decoding (the typed client) rebuilds the
 * class from the body, so a client gets the same error the server failed with.
 */
export const wireError = <Self extends { readonly _tag: string; readonly message: string }, I, Fields extends Schema.Struct.Fields>(
  errorClass: Schema.Schema<Self, I, never> & { readonly _tag: string; readonly fields: Fields }
): Schema.Schema<Self, WireErrorBody, never> => {
  const fields: Schema.Struct.Fields = Object.fromEntries(Object.entries(errorClass.fields).filter(([key]) => !notOnWire.has(key)))
  const carriesMessage = "message" in errorClass.fields
  const decodeError = ParseResult.decodeUnknown(errorClass)
  return Schema.transformOrFail(
    Schema.Struct({ ...fields, error: Schema.Literal(errorClass._tag), message: Schema.String }),
    Schema.typeSchema(errorClass),
    {
      strict: false,
      decode: ({ error, message, ...rest }) => decodeError({ ...rest, _tag: error, ...(carriesMessage ? { message } : {}) }),
      encode: (error) => ParseResult.succeed({ ...error, error: error._tag, message: error.message })
    }
  ).annotations({ identifier: errorClass._tag })
}

// ---------------------------------------------------------------------------------------
// The server's own refusals
// ---------------------------------------------------------------------------------------

/** Bad input — an invalid id, seq or JSON body, unknown or missing fields. Nothing was changed. */
export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", { message: Schema.String }) {}

/** There is no session with this id. */
export class SessionNotFound extends Schema.TaggedError<SessionNotFound>()("SessionNotFound", { message: Schema.String }) {}

/** The agent's routes on a server that serves sessions only. */
export class NoAgent extends Schema.TaggedError<NoAgent>()("NoAgent", { message: Schema.String }) {}

/** No permission question of this session waits under this request id (answered already, or never asked). */
export class PermissionRequestNotFound extends Schema.TaggedError<PermissionRequestNotFound>()(
  "PermissionRequestNotFound",
  { message: Schema.String }
) {}

/** A request body over `maxBodyBytes`. */
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", { message: Schema.String }) {}

/** A request without `Authorization: Bearer <token>`, or with a wrong token. */
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", { message: Schema.String }) {}

export const badRequest = (message: string) => new BadRequest({ message })
export const sessionNotFound = (sessionId: string) => new SessionNotFound({ message: `there is no session "${sessionId}"` })
export const noAgent = new NoAgent({ message: "this server has no agent: it serves sessions only" })
export const permissionRequestNotFound = (sessionId: string, requestId: string) =>
  new PermissionRequestNotFound({
    message: `no permission question "${requestId}" waits in session "${sessionId}" (answered already, denied when nobody answered in time, ` +
      "or never asked)"
  })
export const payloadTooLarge = (limit: number) =>
  new PayloadTooLarge({ message: `the request body is too large (the limit is ${limit} bytes)` })
export const unauthorized = new Unauthorized({ message: "send Authorization: Bearer <token>" })

// ---------------------------------------------------------------------------------------
// Every error on the wire, once
// ---------------------------------------------------------------------------------------

export const Wire = {
  BadRequest: wireError(BadRequest),
  SessionNotFound: wireError(SessionNotFound),
  NoAgent: wireError(NoAgent),
  PayloadTooLarge: wireError(PayloadTooLarge),
  PermissionRequestNotFound: wireError(PermissionRequestNotFound),
  Unauthorized: wireError(Unauthorized),
  InvalidSessionIdError: wireError(InvalidSessionIdError),
  InvalidSeqError: wireError(InvalidSeqError),
  InvalidEventError: wireError(InvalidEventError),
  ConfigurationError: wireError(ConfigurationError),
  SessionsDisabledError: wireError(SessionsDisabledError),
  CheckpointConflictError: wireError(CheckpointConflictError),
  CheckpointBusyError: wireError(CheckpointBusyError),
  AgentBusyError: wireError(AgentBusyError),
  RestoreRefusedError: wireError(RestoreRefusedError),
  RestoreInterruptedError: wireError(RestoreInterruptedError),
  SessionWorkdirError: wireError(SessionWorkdirError),
  EventDecodeError: wireError(EventDecodeError),
  CheckpointIntegrityError: wireError(CheckpointIntegrityError),
  SchemaVersionError: wireError(SchemaVersionError),
  CodecError: wireError(CodecError),
  CheckpointerClosedError: wireError(CheckpointerClosedError),
  StorageError: wireError(StorageError),
  CheckpointLockLostError: wireError(CheckpointLockLostError),
  SnapshotBlobError: wireError(SnapshotBlobError),
  SessionForkedError: wireError(SessionForkedError),
  ModelError: wireError(ModelError),
  CompactionCancelledError: wireError(CompactionCancelledError),
  RestoreFailedError: wireError(RestoreFailedError),
  WorkspaceIOError: wireError(WorkspaceIOError)
}

// ---------------------------------------------------------------------------------------
// What no route declares
// ---------------------------------------------------------------------------------------

/** A request for a route that does not exist (after the token was checked). */
export const routeNotFound = (method: string, url: string) =>
  HttpServerResponse.unsafeJson({ error: "NotFound", message: `no route ${method} ${url}` }, { status: 404 })

/**
 * A failure no route declares (a defect, or an error the API does not know): 500 with the
 * error's tag, message and own fields, in the same shape as the declared ones.
 */
export const undeclaredFailure = (cause: Cause.Cause<unknown>): HttpServerResponse.HttpServerResponse => {
  const failure = Cause.failureOption(cause)
  if (Option.isNone(failure)) {
    return HttpServerResponse.unsafeJson({ error: "InternalError", message: Cause.pretty(cause) }, { status: 500 })
  }
  const error = failure.value
  const tag = typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "InternalError"
  const fields: Record<string, unknown> = {}
  if (typeof error === "object" && error !== null) {
    for (const [key, value] of Object.entries(error)) if (key !== "cause" && key !== "_tag" && key !== "stack") fields[key] = value
  }
  const message = error instanceof Error ? error.message : String(error)
  return HttpServerResponse.unsafeJson({ ...fields, error: tag, message }, { status: 500 })
}
