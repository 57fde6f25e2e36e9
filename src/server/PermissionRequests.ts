/**
 * Permission questions asked over HTTP. The server's agent asks through `canUseTool` here: each
 * question is pending under its request id (the tool call's id) until a client answers it with
 * `POST /sessions/:id/permissions/:requestId`, or the turn is interrupted (then it is denied).
 * Followers of the session see each question as a `permission_request` SSE event — on the turn's
 * own stream and on `/sessions/:id/events`, where one connecting later is shown those still pending.
 */
import { Context, Layer } from "effect"
import type { CanUseTool, PermissionResult } from "../agent/permissions.js"
import type { AgentEvent } from "../agent/AgentEvents.js"

/** A question waiting: the agent's own `permission_request` event (answer it by its `requestId`). */
export type PendingPermission = Extract<AgentEvent, { readonly type: "permission_request" }>

export interface PermissionRequestsService {
  /** Give this to the agent the server runs. */
  readonly canUseTool: CanUseTool
  /** The questions of a session still waiting, oldest first. */
  readonly pending: (sessionId: string) => ReadonlyArray<PendingPermission>
  /** Answer a pending question; false when there is none by that id in that session (answered, or never asked). */
  readonly answer: (sessionId: string, requestId: string, result: PermissionResult) => boolean
  /** Call `listener` with each new question of the session; returns the way to stop. */
  readonly listen: (sessionId: string, listener: (request: PendingPermission) => void) => () => void
}

export class PermissionRequests extends Context.Tag("@lite-agent/server/PermissionRequests")<
  PermissionRequests,
  PermissionRequestsService
>() {}

export const make = (): PermissionRequestsService => {
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
          mode: context.mode
        }
        const id = key(request.sessionId, request.requestId)
        const settle = (result: PermissionResult) => {
          waiting.delete(id)
          context.signal.removeEventListener("abort", aborted)
          resolve(result)
        }
        const aborted = () => settle({ behavior: "deny", message: "the turn was interrupted while the question waited", interrupt: true })
        if (context.signal.aborted) return aborted()
        context.signal.addEventListener("abort", aborted)
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

/** A registry of its own, for a server whose agent asks over HTTP. */
export const layer = (): Layer.Layer<PermissionRequests> => Layer.sync(PermissionRequests, make)
