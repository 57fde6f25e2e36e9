/**
 * `@lite-agent/sdk/server` — sessions over HTTP: JSON for sessions and checkpoints, Server-Sent
 * Events for a session's events as they land, and (with an agent) turns, restores and
 * compactions; the API's declaration (`SessionApi`) for typed clients. The only entry point,
 * besides the command, that loads `@effect/platform-node`.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import * as SessionServer from "./server/SessionServer.js"
import type { PromiseCheckpointer } from "./facade/checkpointer.js"
import { runForPromise } from "./facade/run.js"

export * as SessionServer from "./server/SessionServer.js"
export type { SessionServerOptions } from "./server/SessionServer.js"
/** The HTTP API itself: `HttpApiClient.make(SessionApi, { baseUrl })` is a typed client, `OpenApi.fromApi(SessionApi)` its description. */
export { AgentGroup, SessionApi, SessionsGroup } from "./server/api.js"
export { BadRequest, NoAgent, PayloadTooLarge, PermissionRequestNotFound, SessionNotFound, Unauthorized } from "./server/wireErrors.js"
/** Permission questions answered over HTTP: give `canUseTool` to the served agent, and the service to the server's layer. */
export * as PermissionRequests from "./server/PermissionRequests.js"

export interface RunningSessionServer {
  /** `http://host:port`. */
  readonly url: string
  readonly host: string
  readonly port: number
  /** The bearer token clients must send (generated when none was given). */
  readonly token: string
  /** Stop listening and end every open stream. */
  close(): Promise<void>
}

/**
 * Serve `checkpointer`'s sessions over HTTP until `close()`. Bad options reject with
 * `ConfigurationError` (a non-loopback `host` without a `token` among them).
 */
export const serveSessions = async (
  options: SessionServer.SessionServerOptions & { readonly checkpointer: PromiseCheckpointer }
): Promise<RunningSessionServer> => {
  const { checkpointer, ...serverOptions } = options
  const runtime = ManagedRuntime.make(SessionServer.layer(serverOptions).pipe(Layer.provide(checkpointer.layer)))
  try {
    const info = await runForPromise(runtime, Effect.flatMap(SessionServer.SessionServerInfo, Effect.succeed))
    return { url: info.url, host: info.host, port: info.port, token: info.token, close: () => runtime.dispose() }
  } catch (error) {
    await runtime.dispose()
    throw error
  }
}
