/**
 * The session server's routes as SessionApi declares them (api.ts). Request bodies are read
 * and decoded here rather than by the HttpApi builder, so a body that is not JSON, has unknown
 * or missing fields, or is too large gets the server's own 400/413 answers (`BadRequest`,
 * `PayloadTooLarge`) with the option decoder's messages, not the builder's generic ones.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import { Deferred, Effect, Either, Option, Schema, type Scope, Stream } from "effect"
import type { AgentEvent } from "../agent/AgentEvents.js"
import type { LiteAgentService } from "../agent/LiteAgent.js"
import type { PermissionResult } from "../agent/permissions.js"
import type { SendError } from "../agent/turn.js"
import { Checkpointer, type CheckpointerService, NO_GENERATION } from "../core/Checkpointer.js"
import { jsonText } from "../core/encoding.js"
import { decodeOptions } from "../core/internal/options.js"
import * as Session from "../core/session.js"
import { sessionIdProblem } from "../core/sessionId.js"
import * as SessionStates from "../tools/SessionStates.js"
import { foldedLog } from "../tools/SessionStates.js"
import {
  branchThrough,
  checkpointChanges,
  conversationThrough,
  type PathChangeInTurn,
  type RecordedPath
} from "../core/checkpointChanges.js"
import { unifiedDiff } from "../core/textDiff.js"
import {
  CompactBody,
  ForkBody,
  LabelBody,
  MessageBody,
  MoveBody,
  PermissionAnswerBody,
  RestoreBody,
  SessionApi,
  SwitchBody
} from "./api.js"
import type { PendingPermission, PermissionRequestsService } from "./PermissionRequests.js"
import type { SseClient } from "./sseClient.js"
import { makeSessionHubs } from "./SessionHub.js"
import { errorFrame, followFrame, frame, type makeSseResponses, resumePoint } from "./sse.js"
import type { SseSettings } from "./sseClient.js"
import { badRequest, noAgent, payloadTooLarge, permissionRequestNotFound, sessionNotFound } from "./wireErrors.js"

export const checkedSessionId = (sessionId: string) => {
  const problem = sessionIdProblem(sessionId)
  return problem === undefined ? Effect.succeed(sessionId) : Effect.fail(badRequest(`session id ${JSON.stringify(sessionId)} ${problem}`))
}

/** The body size limit in force (`maxBodyBytes`). */
const maxBodySize = Effect.map(HttpIncomingMessage.MaxBodySize, (size) => Option.match(size, { onNone: () => Infinity, onSome: Number }))

/** How far past the limit a chunked body is read (and thrown away) before its 413 is sent. */
const DRAIN_FACTOR = 8

/**
 * The request's body as text, at most `limit` bytes. A declared length over the limit never gets
 * here (the app answers 413 first). A body without one (chunked) that grows past it is read on and
 * thrown away, up to `DRAIN_FACTOR` times the limit, and answered 413 when it ends: a client that
 * is still sending when the answer comes would see its connection reset instead of the 413. A body
 * longer than that is answered at once, and its connection may then be cut.
 */
const bodyText = (request: HttpServerRequest.HttpServerRequest, limit: number) =>
  Effect.async<string, ReturnType<typeof payloadTooLarge> | ReturnType<typeof badRequest>>((resume) => {
    const incoming = NodeHttpServerRequest.toIncomingMessage(request)
    const chunks: Array<Buffer> = []
    let size = 0
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= limit) return void chunks.push(chunk)
      chunks.length = 0
      if (size > limit * DRAIN_FACTOR) {
        incoming.pause()
        finish(Effect.fail(payloadTooLarge(limit)))
      }
    }
    const onEnd = () =>
      finish(size > limit ? Effect.fail(payloadTooLarge(limit)) : Effect.succeed(Buffer.concat(chunks).toString("utf8")))
    const onError = (error: Error) => finish(Effect.fail(badRequest(`cannot read the request body: ${error.message}`)))
    const stop = () => {
      incoming.off("data", onData)
      incoming.off("end", onEnd)
      incoming.off("error", onError)
    }
    const finish = (outcome: Effect.Effect<string, ReturnType<typeof payloadTooLarge> | ReturnType<typeof badRequest>>) => {
      stop()
      resume(outcome)
    }
    if (incoming.readableEnded) return resume(Effect.succeed(""))
    incoming.on("data", onData)
    incoming.once("end", onEnd)
    incoming.once("error", onError)
    return Effect.sync(stop)
  })

/** The request's JSON body decoded with `schema` (unknown keys refused), or a 400 (413) saying what is wrong. */
const requestBody = <A, I>(request: HttpServerRequest.HttpServerRequest, schema: Schema.Schema<A, I, never>, name: string) =>
  Effect.flatMap(maxBodySize, (limit) => {
    return bodyText(request, limit).pipe(
      Effect.flatMap((text) => {
        let parsed: unknown
        try {
          parsed = text.trim() === "" ? {} : JSON.parse(text)
        } catch (error) {
          return Effect.fail(badRequest(`the request body is not JSON: ${String(error)}`))
        }
        return Either.match(decodeOptions(schema, parsed, name), {
          onLeft: (error) => Effect.fail(badRequest(error.message)),
          onRight: Effect.succeed
        })
      })
    )
  })

export const existing = (checkpointer: CheckpointerService, sessionId: string) =>
  Effect.flatMap(checkpointer.version(sessionId), (version) =>
    version.generation === NO_GENERATION ? Effect.fail(sessionNotFound(sessionId)) : Effect.succeed(version))

/** A node's seq from the URL: a positive integer. */
const nodeSeq = (name: string, text: string) =>
  /^[1-9]\d{0,15}$/.test(text) ? Effect.succeed(Number(text)) : Effect.fail(badRequest(`${name} must be a positive integer (a seq), got ${JSON.stringify(text)}`))

/** The session folded along a branch through node `seq`, or 400 when no branch goes through it. */
const onABranch = (sessionId: string, state: Session.SessionState, seq: number) => {
  const branch = seq === 0 ? state : branchThrough(state, seq)
  return branch === undefined
    ? Effect.fail(badRequest(`seq ${seq} is not a node of session "${sessionId}" (not a checkpoint, nor on a branch)`))
    : Effect.succeed(branch)
}

/** Text shown as a diff, at most this large on either side, for at most this many files of a turn. */
const DIFF_MAX_BYTES = 256 * 1024
const DIFF_MAX_FILES = 100

const pathJson = (recorded: RecordedPath) => {
  switch (recorded.kind) {
    case "file":
      return { kind: recorded.kind, size: recorded.size }
    case "link":
      return { kind: recorded.kind, target: recorded.target }
    case "unknown":
      return { kind: recorded.kind, reason: recorded.reason }
    default:
      return { kind: recorded.kind }
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true })
/** Bytes as text, or undefined for what is not text (invalid UTF-8, or a NUL byte). */
const asText = (bytes: Uint8Array): string | undefined => {
  if (bytes.includes(0)) return undefined
  try {
    return utf8.decode(bytes)
  } catch {
    return undefined
  }
}

/** One changed path as the viewer shows it: both sides, and their text diff when both are text (or absent) within the cap. */
const describeChange = (checkpointer: CheckpointerService, sessionId: string, change: PathChangeInTurn) =>
  Effect.gen(function*() {
    const base = { path: change.path, before: pathJson(change.before), after: pathJson(change.after) }
    const sides = [change.before, change.after]
    const unknown = sides.find((side) => side.kind === "unknown")
    if (unknown !== undefined) return { ...base, diff: null, note: "what it held is not known: the session did not record it" }
    if (sides.some((side) => side.kind === "link" || side.kind === "directory")) return { ...base, diff: null, note: null }
    if (sides.some((side) => side.kind === "file" && side.size > DIFF_MAX_BYTES)) {
      return { ...base, diff: null, note: `over ${DIFF_MAX_BYTES / 1024} KiB: no diff shown` }
    }
    const texts: Array<string | undefined> = []
    for (const side of sides) {
      if (side.kind !== "file") {
        texts.push(undefined)
        continue
      }
      const bytes = side.data === undefined ? yield* Effect.either(checkpointer.readSnapshot(sessionId, side.sha256)) : Either.right(side.data)
      if (Either.isLeft(bytes)) return { ...base, diff: null, note: `its content is not in the snapshot store: ${bytes.left.message}` }
      const text = asText(bytes.right)
      if (text === undefined) return { ...base, diff: null, note: "binary: no diff shown" }
      texts.push(text)
    }
    // One file's diff at a time (at most the LCS table's cap of work), the event loop given back
    // before each: a turn of many large edits must not hold every other request up.
    yield* eventLoopTurn
    return { ...base, diff: unifiedDiff(change.path, texts[0], texts[1]), note: null }
  })

/** Let the event loop run what waits (I/O, other requests) before going on. */
const eventLoopTurn = Effect.async<void>((resume) => {
  const immediate = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(immediate))
})

/** A JSON answer encoded as the log encodes events (snapshot bytes as base64): a restore's result exactly as the agent gave it, a conversation's events. */
const jsonResponse = (value: unknown) => HttpServerResponse.text(jsonText(value), { contentType: "application/json" })

/** Sessions as JSON, their events as SSE. */
export const sessionHandlers = (
  settings: SseSettings,
  sse: ReturnType<typeof makeSseResponses>,
  agent: Option.Option<LiteAgentService>,
  permissions: Option.Option<PermissionRequestsService>
) =>
  HttpApiBuilder.group(SessionApi, "sessions", (handlers) =>
    Effect.gen(function*() {
      const checkpointer = yield* Checkpointer
      const hubs = yield* makeSessionHubs(checkpointer, settings, followFrame, errorFrame)
      // Folded sessions, kept and brought up to date incrementally: a viewer asks the same session again and again.
      const states = yield* SessionStates.fromContextOrNew
      return handlers
        .handle("list", () =>
          Effect.map(checkpointer.list(), (sessions) => ({
            sessions: sessions.map((s) => ({ id: s.id, mtime: s.mtime.toISOString() }))
          })))
        .handle("get", ({ path }) =>
          Effect.gen(function*() {
            const sessionId = yield* checkedSessionId(path.id)
            const version = yield* existing(checkpointer, sessionId)
            const stats = yield* checkpointer.stats(sessionId)
            return { id: sessionId, head: version.head, generation: version.generation, stats }
          }))
        .handle("checkpoints", ({ path }) =>
          Effect.gen(function*() {
            const sessionId = yield* checkedSessionId(path.id)
            yield* existing(checkpointer, sessionId)
            const { checkpoints, interruptedRestore } = yield* Option.match(agent, {
              onSome: (a) =>
                Effect.all({ checkpoints: a.listCheckpoints(sessionId), interruptedRestore: a.interruptedRestore(sessionId) }),
              onNone: () =>
                Effect.map(foldedLog(checkpointer, sessionId), (state) => ({
                  checkpoints: Session.checkpoints(state),
                  interruptedRestore: Session.interruptedRestore(state)
                }))
            })
            return { checkpoints, interruptedRestore: interruptedRestore ?? null }
          }))
        .handle("tree", ({ path }) =>
          Effect.gen(function*() {
            const sessionId = yield* checkedSessionId(path.id)
            yield* existing(checkpointer, sessionId)
            const tree = yield* Option.match(agent, {
              onSome: (a) => a.tree(sessionId),
              onNone: () => Effect.map(foldedLog(checkpointer, sessionId), Session.tree)
            })
            return { ...tree, undo: tree.undo ?? null, redo: tree.redo ?? null }
          }))
        .handleRaw("conversation", ({ path, urlParams }) =>
          Effect.gen(function*() {
            const sessionId = yield* checkedSessionId(path.id)
            yield* existing(checkpointer, sessionId)
            const { state } = yield* states.get(sessionId)
            const at = urlParams.at === undefined ? state.leaf : yield* nodeSeq("at", urlParams.at)
            const branch = yield* onABranch(sessionId, state, at)
            const { end, entries } = conversationThrough(branch, at)
            const compaction = branch.compaction !== undefined && (end === undefined || branch.compaction.seq < end)
              ? {
                seq: branch.compaction.seq,
                summary: branch.compaction.event.summary,
                keptFromSeq: branch.compaction.event.keptFromSeq ?? branch.compaction.seq + 1
              }
              : null
            return jsonResponse({ at, leaf: branch.leaf, entries, compaction })
          }))
        .handleRaw("changes", ({ path }) =>
          Effect.gen(function*() {
            const sessionId = yield* checkedSessionId(path.id)
            yield* existing(checkpointer, sessionId)
            const seq = yield* nodeSeq("seq", path.seq)
            const { state } = yield* states.get(sessionId)
            const branch = yield* onABranch(sessionId, state, seq)
            if (!branch.anchors.toArray().some((anchor) => anchor.seq === seq)) {
              return yield* Effect.fail(badRequest(`seq ${seq} of session "${sessionId}" is not a checkpoint`))
            }
            // Diffs for the first files only: a turn that changed thousands (a checkout) lists the rest without one.
            const changed = checkpointChanges(branch, seq)
            const files = yield* Effect.forEach(changed, (change, index) =>
              index < DIFF_MAX_FILES
                ? describeChange(checkpointer, sessionId, change)
                : Effect.succeed({
                  path: change.path,
                  before: pathJson(change.before),
                  after: pathJson(change.after),
                  diff: null,
                  note: `no diff shown: the turn changed ${changed.length} files, diffs are shown for the first ${DIFF_MAX_FILES}`
                }))
            return jsonResponse({ seq, files })
          }))
        .handleRaw("events", ({ path, request }) =>
          Effect.gen(function*() {
            const sessionId = yield* checkedSessionId(path.id)
            const { generation, sinceSeq } = yield* resumePoint(request)
            // A session with no events yet is followed too: its first event comes when it is appended.
            return yield* sse.respond(request, (client) =>
              Effect.zipRight(
                Option.match(permissions, { onNone: () => Effect.void, onSome: (requests) => forwardQuestions(requests, client, sessionId) }),
                hubs.serve(client, sessionId, sinceSeq, generation)
              ))
          }))
        .handle("delete", ({ path }) =>
          Effect.gen(function*() {
            const sessionId = yield* checkedSessionId(path.id)
            yield* existing(checkpointer, sessionId)
            yield* Option.match(agent, { onSome: (a) => a.deleteSession(sessionId), onNone: () => checkpointer.delete(sessionId) })
          }))
    }))

/**
 * The session's permission questions to a follower of its events: those pending now, then each
 * new one, as `permission_request` frames (without an id: they are not log events) until it leaves.
 */
const forwardQuestions = (requests: PermissionRequestsService, client: SseClient, sessionId: string) =>
  Effect.sync(() => {
    const send = (request: PendingPermission) => {
      client.write(frame({ event: request.type, data: request }))
    }
    const stop = requests.listen(sessionId, send)
    client.whenEnded(stop)
    for (const request of requests.pending(sessionId)) send(request)
  })

/** Turns, restores and compactions; each answers `NoAgent` (404) on a server without an agent. */
export const agentHandlers = (
  sse: ReturnType<typeof makeSseResponses>,
  agent: Option.Option<LiteAgentService>,
  permissions: Option.Option<PermissionRequestsService>,
  serverScope: Scope.Scope
) =>
  HttpApiBuilder.group(SessionApi, "agent", (handlers) =>
    Effect.gen(function*() {
      const checkpointer = yield* Checkpointer
      const withAgent = Option.match(agent, { onNone: () => Effect.fail(noAgent), onSome: Effect.succeed })
      const moveAlongHistory = (reason: "undo" | "redo", id: string, request: HttpServerRequest.HttpServerRequest) =>
        Effect.gen(function*() {
          const a = yield* withAgent
          const sessionId = yield* checkedSessionId(id)
          const options = yield* requestBody(request, MoveBody, reason)
          yield* existing(checkpointer, sessionId)
          return jsonResponse(yield* (reason === "undo" ? a.undo(sessionId, options) : a.redo(sessionId, options)))
        })
      return handlers
        .handleRaw("messages", ({ path, request, urlParams }) =>
          Effect.gen(function*() {
            const a = yield* withAgent
            const sessionId = yield* checkedSessionId(path.id)
            const { detach } = urlParams
            const { rehome, text } = yield* requestBody(request, MessageBody, "message")
            const sendOptions = { sessionId, ...(rehome === undefined ? {} : { rehome }) }
            if (detach === "true") {
              // Busy or not, the answer is known only once the turn starts: wait for its first event.
              const started = yield* Deferred.make<void, SendError>()
              const turn = a.run(text, sendOptions).pipe(
                Stream.tap(() => Deferred.succeed(started, undefined)),
                Stream.runDrain,
                Effect.tapError((error) => Deferred.fail(started, error)),
                Effect.ensuring(Deferred.succeed(started, undefined))
              )
              // Its failure after the 202 has no client to go to: it goes to the server's log (the
              // session's followers see its events stop; its prompt is repaired by the next turn).
              yield* Effect.forkIn(
                turn.pipe(Effect.catchAllCause((cause) => Effect.logWarning(`a detached turn in session "${sessionId}" failed`, cause))),
                serverScope
              )
              yield* Deferred.await(started)
              return HttpServerResponse.unsafeJson({ sessionId, detached: true }, { status: 202 })
            }
            return yield* sse.stream(request, a.run(text, sendOptions), (event: AgentEvent) => frame({ event: event.type, data: event }))
          }))
        .handleRaw("answerPermission", ({ path, request }) =>
          Effect.gen(function*() {
            yield* withAgent
            const sessionId = yield* checkedSessionId(path.id)
            const answer = yield* requestBody(request, PermissionAnswerBody, "permission answer")
            const result: PermissionResult = answer.behavior === "allow"
              ? { behavior: "allow", ...(answer.remember === undefined ? {} : { remember: answer.remember }) }
              : {
                behavior: "deny",
                ...(answer.message === undefined ? {} : { message: answer.message }),
                ...(answer.interrupt === undefined ? {} : { interrupt: answer.interrupt })
              }
            const answered = Option.match(permissions, {
              onNone: () => false,
              onSome: (requests) => requests.answer(sessionId, path.requestId, result)
            })
            if (!answered) return yield* Effect.fail(permissionRequestNotFound(sessionId, path.requestId))
            return HttpServerResponse.empty({ status: 204 })
          }))
        .handleRaw("restore", ({ path, request }) =>
          Effect.gen(function*() {
            const a = yield* withAgent
            const sessionId = yield* checkedSessionId(path.id)
            const { seq, ...options } = yield* requestBody(request, RestoreBody, "restore")
            yield* existing(checkpointer, sessionId)
            return jsonResponse(yield* a.restore(sessionId, seq, options))
          }))
        .handle("undoRestore", ({ path }) =>
          Effect.gen(function*() {
            const a = yield* withAgent
            const sessionId = yield* checkedSessionId(path.id)
            yield* existing(checkpointer, sessionId)
            return jsonResponse(yield* a.undoInterruptedRestore(sessionId))
          }))
        .handleRaw("switch", ({ path, request }) =>
          Effect.gen(function*() {
            const a = yield* withAgent
            const sessionId = yield* checkedSessionId(path.id)
            const { leaf, ...options } = yield* requestBody(request, SwitchBody, "switch")
            yield* existing(checkpointer, sessionId)
            return jsonResponse(yield* a.switchBranch(sessionId, leaf, options))
          }))
        .handleRaw("fork", ({ path, request }) =>
          Effect.gen(function*() {
            const a = yield* withAgent
            const sessionId = yield* checkedSessionId(path.id)
            const { seq, ...options } = yield* requestBody(request, ForkBody, "fork")
            yield* existing(checkpointer, sessionId)
            return jsonResponse(yield* a.fork(sessionId, seq, options))
          }))
        .handleRaw("label", ({ path, request }) =>
          Effect.gen(function*() {
            const a = yield* withAgent
            const sessionId = yield* checkedSessionId(path.id)
            const { label, seq } = yield* requestBody(request, LabelBody, "label")
            yield* existing(checkpointer, sessionId)
            yield* a.label(sessionId, seq, label)
            return HttpServerResponse.empty({ status: 204 })
          }))
        .handleRaw("undo", ({ path, request }) => moveAlongHistory("undo", path.id, request))
        .handleRaw("redo", ({ path, request }) => moveAlongHistory("redo", path.id, request))
        .handleRaw("compact", ({ path, request }) =>
          Effect.gen(function*() {
            const a = yield* withAgent
            const sessionId = yield* checkedSessionId(path.id)
            const { instructions, keepRecentTokens } = yield* requestBody(request, CompactBody, "compact")
            yield* existing(checkpointer, sessionId)
            return yield* sse.stream(
              request,
              a.compactRun(instructions, { sessionId, ...(keepRecentTokens === undefined ? {} : { keepRecentTokens }) }),
              (event) => frame({ event: event.type, data: event })
            )
          }))
    }))
