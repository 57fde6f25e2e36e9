/**
 * Permission questions asked over HTTP. The server's agent asks through `canUseTool` here: each
 * question is pending under its request id (the tool call's id) until a client answers it with
 * `POST /sessions/:id/permissions/:requestId`, the turn is interrupted (then it is denied), or
 * nobody answers within `timeoutMs` (then it is denied too, saying so, and the turn goes on: a
 * server nobody watches must not keep a turn, and the agent's maintenance, waiting for ever).
 * Followers of the session see each question as a `permission_request` SSE event — on the turn's
 * own stream and on `/sessions/:id/events`, where one connecting later is shown those still
 * pending — and its end as the `PermissionDecided` event the turn logs, however it was decided.
 */
import { Context, Effect, Layer, Schema } from "effect"
import type { ConfigurationError } from "../core/errors.js"
import { proposedDiffField } from "../tools/editDiffs.js"
import { decodeOptions, decodeOptionsOrThrow, expecting } from "../core/internal/options.js"
import type { CanUseTool, PermissionResult } from "../agent/permissions.js"
import type { AgentEvent } from "../agent/AgentEvents.js"

/** A question waiting: the agent's own `permission_request` event (answer it by its `requestId`). */
export type PendingPermission = Extract<AgentEvent, { readonly type: "permission_request" }>

/** How long a question waits for an answer unless told otherwise: 5 minutes. */
export const DEFAULT_TIMEOUT_MS = 5 * 60_000
/** The longest finite wait a timer can hold (2^31 - 1 ms, about 24.8 days); `Infinity` for none. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1

const TimeoutMs = expecting(
  Schema.Number.pipe(Schema.filter((value) => value === Infinity || (Number.isInteger(value) && value > 0 && value <= MAX_TIMEOUT_MS))),
  `a positive integer of milliseconds up to ${MAX_TIMEOUT_MS}, or Infinity to wait without limit`
)

export const PermissionRequestsOptions = Schema.Struct({
  /**
   * How long a question waits for an answer before it is denied ("nobody answered within …";
   * the model is told and the turn goes on). Default 5 minutes; `Infinity` waits without limit.
   */
  timeoutMs: Schema.optional(TimeoutMs)
})
export interface PermissionRequestsOptions extends Schema.Schema.Type<typeof PermissionRequestsOptions> {}

export interface PermissionRequestsService {
  /** Give this to the agent the server runs. */
  readonly canUseTool: CanUseTool
  /** The questions of a session still waiting, oldest first. */
  readonly pending: (sessionId: string) => ReadonlyArray<PendingPermission>
  /** Answer a pending question; false when there is none by that id in that session (answered, expired, or never asked). */
  readonly answer: (sessionId: string, requestId: string, result: PermissionResult) => boolean
  /** Call `listener` with each new question of the session; returns the way to stop. */
  readonly listen: (sessionId: string, listener: (request: PendingPermission) => void) => () => void
}

export class PermissionRequests extends Context.Tag("@lite-agent/server/PermissionRequests")<
  PermissionRequests,
  PermissionRequestsService
>() {}

/** A wait as people say it: "5 minutes", "1 second", "1500 ms". */
export const describeWait = (ms: number): string => {
  const unit = (count: number, name: string) => `${count} ${name}${count === 1 ? "" : "s"}`
  if (ms % 60_000 === 0) return unit(ms / 60_000, "minute")
  if (ms % 1000 === 0) return unit(ms / 1000, "second")
  return `${ms} ms`
}

const OPTIONS_NAME = "permission request options"

const makeRegistry = (options: PermissionRequestsOptions): PermissionRequestsService => {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  const expired: PermissionResult = { behavior: "deny", message: `nobody answered within ${describeWait(timeoutMs)}` }
  const waiting = new Map<string, { readonly request: PendingPermission; readonly resolve: (result: PermissionResult) => void }>()
  const listeners = new Map<string, Set<(request: PendingPermission) => void>>()
  const key = (sessionId: string, requestId: string) => `${sessionId}\u0000${requestId}`
  return {
    canUseTool: (name, input, context) =>
      new Promise<PermissionResult>((resolve) => {
        const request: PendingPermission = {
          type: "permission_request",
          requestId: context.toolUseId,
          sessionId: context.sessionId,
          toolUseId: context.toolUseId,
          name,
          input,
          mode: context.mode,
          // What an edit would change, for a client to show: read now, as the question is asked.
          ...proposedDiffField(context.workdir, name, input)
        }
        const id = key(request.sessionId, request.requestId)
        let timer: ReturnType<typeof setTimeout> | undefined
        const settle = (result: PermissionResult) => {
          if (waiting.get(id)?.resolve === settle) waiting.delete(id)
          clearTimeout(timer)
          context.signal.removeEventListener("abort", aborted)
          resolve(result)
        }
        const aborted = () => settle({ behavior: "deny", message: "the turn was interrupted while the question waited", interrupt: true })
        if (context.signal.aborted) return aborted()
        context.signal.addEventListener("abort", aborted)
        if (timeoutMs !== Infinity) timer = setTimeout(() => settle(expired), timeoutMs)
        waiting.set(id, { request, resolve: settle })
        for (const listener of listeners.get(request.sessionId) ?? []) listener(request)
      }),
    pending: (sessionId) => [...waiting.values()].map((entry) => entry.request).filter((request) => request.sessionId === sessionId),
    answer: (sessionId, requestId, result) => {
      const entry = waiting.get(key(sessionId, requestId))
      if (entry === undefined) return false
      entry.resolve(result)
      return true
    },
    listen: (sessionId, listener) => {
      const set = listeners.get(sessionId) ?? new Set()
      listeners.set(sessionId, set)
      set.add(listener)
      return () => {
        set.delete(listener)
        if (set.size === 0) listeners.delete(sessionId)
      }
    }
  }
}

/**
 * A registry of questions, for a server whose agent asks over HTTP. Throws `ConfigurationError`
 * for options it cannot take (a `timeoutMs` that is not a positive integer, nor `Infinity`).
 */
export const make = (options: PermissionRequestsOptions = {}): PermissionRequestsService =>
  makeRegistry(decodeOptionsOrThrow(PermissionRequestsOptions, options, OPTIONS_NAME))

/** A registry of its own, as a layer; bad options fail it with `ConfigurationError`. */
export const layer = (options: PermissionRequestsOptions = {}): Layer.Layer<PermissionRequests, ConfigurationError> =>
  Layer.effect(PermissionRequests, Effect.map(decodeOptions(PermissionRequestsOptions, options, OPTIONS_NAME), makeRegistry))
