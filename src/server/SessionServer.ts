/**
 * The HTTP server over one checkpointer and, optionally, one agent: its options, the app
 * around the HTTP API, and listening.
 *
 * - The routes, their bodies, errors and statuses are declared in api.ts (SessionApi; the store's
 *   in storeApi.ts) and implemented in handlers.ts (storeHandlers.ts); the SSE streams are sse.ts;
 *   errors go out as wireErrors.ts says.
 * - Every request but `GET /openapi.json` and the viewer's files (`/`, `/viewer/…`: viewerAssets.ts)
 *   needs `Authorization: Bearer <token>`; listening on a
 *   non-loopback address needs a token given explicitly. No CORS headers unless origins are
 *   configured.
 * - Clients following a session at its head share one follower (SessionHub.ts).
 */
import { randomBytes, timingSafeEqual } from "node:crypto"
import { createServer } from "node:http"
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import * as HttpIncomingMessage from "@effect/platform/HttpIncomingMessage"
import * as HttpMiddleware from "@effect/platform/HttpMiddleware"
import { RouteNotFound, type ServeError } from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Cause, Context, Effect, Layer, Option, Schema } from "effect"
import { LiteAgent, type LiteAgentService } from "../agent/LiteAgent.js"
import type { Checkpointer } from "../core/Checkpointer.js"
import { ConfigurationError } from "../core/errors.js"
import { decodeOptions, expecting, NonEmptyString, PositiveInteger, PositiveMilliseconds } from "../core/internal/options.js"
import { Authorization, SessionApi } from "./api.js"
import { openApiDocument } from "./openApiDocument.js"
import { agentHandlers, sessionHandlers } from "./handlers.js"
import { storeHandlers } from "./storeHandlers.js"
import { PermissionRequests, type PermissionRequestsService } from "./PermissionRequests.js"
import { makeSseResponses } from "./sse.js"
import { payloadTooLarge, routeNotFound, unauthorized, undeclaredFailure } from "./wireErrors.js"
import { loadViewerAssets, type ViewerAssets } from "./viewerAssets.js"

export const SessionServerOptions = Schema.Struct({
  /** The address to listen on. Default "127.0.0.1"; any other than loopback needs `token`. */
  host: Schema.optional(NonEmptyString),
  /** The port; 0 (the default) picks a free one. */
  port: Schema.optional(expecting(Schema.Number.pipe(Schema.int(), Schema.between(0, 65535)), "a port number (0-65535)")),
  /** The bearer token every request must carry. Default: a random one (see `token` of the running server). */
  token: Schema.optional(expecting(Schema.String.pipe(Schema.minLength(16)), "a string of at least 16 characters")),
  /** Origins allowed to call from a browser (CORS). Default: none — no CORS headers at all. */
  corsOrigins: Schema.optional(Schema.Array(NonEmptyString)),
  /** Largest request body. Default 1 MiB. */
  maxBodyBytes: Schema.optional(PositiveInteger),
  /** A comment line on idle SSE streams this often, so proxies keep them open. Default 15000. */
  heartbeatMs: Schema.optional(PositiveMilliseconds),
  /** Events that may wait for one slow SSE client. Default 1000. */
  sseBufferEvents: Schema.optional(PositiveInteger),
  /** How long that buffer may stay full before the stream is closed. Default 10000. */
  slowClientMs: Schema.optional(PositiveMilliseconds)
})
export interface SessionServerOptions extends Schema.Schema.Type<typeof SessionServerOptions> {}

export interface SessionServerSettings {
  readonly token: string
  readonly corsOrigins: ReadonlyArray<string>
  readonly maxBodyBytes: number
  readonly heartbeatMs: number
  readonly sseBufferEvents: number
  readonly slowClientMs: number
}

export const resolveSettings = (options: SessionServerOptions, generatedToken: string): SessionServerSettings => ({
  token: options.token ?? generatedToken,
  corsOrigins: options.corsOrigins ?? [],
  maxBodyBytes: options.maxBodyBytes ?? 1024 * 1024,
  heartbeatMs: options.heartbeatMs ?? 15_000,
  sseBufferEvents: options.sseBufferEvents ?? 1000,
  slowClientMs: options.slowClientMs ?? 10_000
})

// ---------------------------------------------------------------------------------------
// The app: the token, CORS, body limit, what no route declares
// ---------------------------------------------------------------------------------------

/** The scheme is case-insensitive (RFC 9110 §11.1); the token is not. */
const BEARER = /^bearer +/i

const tokenMatches = (header: string | undefined, token: string) => {
  const scheme = header === undefined ? null : BEARER.exec(header)
  if (header === undefined || scheme === null) return false
  const expected = Buffer.from(token)
  const given = Buffer.from(header.slice(scheme[0].length))
  return given.length === expected.length && timingSafeEqual(given, expected)
}

/** The bearer token, compared in constant time. */
const authorization = (token: string) =>
  Layer.succeed(Authorization, {
    bearer: () =>
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        tokenMatches(request.headers["authorization"], token) ? Effect.void : Effect.fail(unauthorized))
  })

const isRouteNotFound = (error: unknown) => error instanceof RouteNotFound

/** The OpenAPI description is public: it says what the routes are (as the README does), not what any session holds. */
const OPENAPI_PATH = "/openapi.json"

/**
 * The viewer's page shell and files are public, like the description: they hold no session.
 * Everything they show comes from the API, with the token the person enters.
 */
const VIEWER_FILES: Record<string, { readonly file: keyof ViewerAssets; readonly contentType: string }> = {
  "/": { file: "html", contentType: "text/html; charset=utf-8" },
  "/viewer/app.js": { file: "script", contentType: "text/javascript; charset=utf-8" },
  "/viewer/viewer.css": { file: "style", contentType: "text/css; charset=utf-8" }
}

/** The page runs only its own script and style, talks only to this origin, and cannot be framed. */
export const VIEWER_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

const viewerResponse = (assets: ViewerAssets | undefined, path: string) => {
  const entry = VIEWER_FILES[path]!
  const headers = {
    "content-security-policy": VIEWER_CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache"
  }
  return assets === undefined
    ? HttpServerResponse.text("The viewer is not part of this installation (run npm run build).\n", { status: 404, headers })
    : HttpServerResponse.text(assets[entry.file], { contentType: entry.contentType, headers })
}

/** 413, and the connection closes once it is sent: the rest of the body is never read. */
const tooLarge = (limit: number) =>
  HttpServerResponse.unsafeJson(
    { error: "PayloadTooLarge", message: payloadTooLarge(limit).message },
    { status: 413, headers: { connection: "close" } }
  )

/** The whole application: SessionApi behind the token, `GET /openapi.json` and the viewer's files, errors as JSON. */
export const makeApp = (
  settings: SessionServerSettings,
  agent: Option.Option<LiteAgentService>,
  permissions: Option.Option<PermissionRequestsService> = Option.none()
) =>
  Effect.gen(function*() {
    const sse = makeSseResponses(settings)
    yield* Effect.addFinalizer(() => Effect.sync(() => sse.clients.closeAll()))
    // Detached turns run in the server's scope: closing the server interrupts them.
    const scope = yield* Effect.scope
    const implemented = HttpApiBuilder.api(SessionApi).pipe(
      Layer.provide([
        sessionHandlers(settings, sse, agent, permissions),
        agentHandlers(sse, agent, permissions, scope),
        storeHandlers,
        authorization(settings.token)
      ])
    )
    const built = yield* Layer.build(Layer.mergeAll(implemented, HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer))
    const api = yield* Effect.provide(HttpApiBuilder.httpApp, built)
    const openApi = HttpServerResponse.unsafeJson(openApiDocument())
    // Loaded when first asked for, once (no server start pays for a page nobody opens); a viewer
    // that cannot be loaded (a damaged installation) is a 404 page, not a failing server.
    const viewer = yield* Effect.cached(Effect.promise(() => loadViewerAssets().catch(() => undefined)))
    const app = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const pathname = new URL(request.url, "http://localhost").pathname
      if (request.method === "GET" && pathname === OPENAPI_PATH) return openApi
      if (request.method === "GET" && Object.hasOwn(VIEWER_FILES, pathname)) return viewerResponse(yield* viewer, pathname)
      // A body declared over the limit is refused before any route reads (or drains) it.
      if (Number(request.headers["content-length"] ?? 0) > settings.maxBodyBytes) return tooLarge(settings.maxBodyBytes)
      const response = yield* api.pipe(
        HttpIncomingMessage.withMaxBodySize(Option.some(settings.maxBodyBytes)),
        Effect.catchAllCause((cause) => {
          if (Cause.isInterruptedOnly(cause)) return Effect.failCause(cause)
          const failure = Cause.failureOption(cause)
          // The token is checked before routing (an API-wide middleware): an unknown route got here with it.
          if (Option.isSome(failure) && isRouteNotFound(failure.value)) {
            return Effect.succeed(routeNotFound(request.method, request.url))
          }
          return Effect.succeed(undeclaredFailure(cause))
        })
      )
      // The API's error encoding sets a status and a body only; a 401 also says which scheme to use.
      if (response.status === 401) return HttpServerResponse.setHeader(response, "www-authenticate", "Bearer")
      // A body found over the limit while read (no Content-Length): the connection closes too.
      if (response.status === 413) return HttpServerResponse.setHeader(response, "connection", "close")
      return response
    })
    return settings.corsOrigins.length === 0 ? app : HttpMiddleware.cors({
      allowedOrigins: (origin) => settings.corsOrigins.includes(origin),
      allowedHeaders: ["authorization", "content-type", "last-event-id"],
      allowedMethods: ["GET", "POST", "DELETE", "OPTIONS"]
    })(app)
  })

// ---------------------------------------------------------------------------------------
// Listening
// ---------------------------------------------------------------------------------------

/** What a token reachable from the network must be worth: as much as 16 random bytes. */
const MIN_TOKEN_BITS = 128
const MAKE_A_TOKEN = "make one with `openssl rand -hex 32`"

/**
 * A token's entropy, estimated from the token alone: its length times the Shannon entropy of
 * its characters' frequencies. Generous to a token that only looks random, but it refuses what
 * people actually type — a repeated letter, a word with digits — and a token of 32 random bytes
 * in hex or base64 always passes.
 */
export const estimatedEntropyBits = (token: string) => {
  const counts = new Map<string, number>()
  for (const character of token) counts.set(character, (counts.get(character) ?? 0) + 1)
  const length = [...token].length
  let perCharacter = 0
  for (const count of counts.values()) perCharacter -= (count / length) * Math.log2(count / length)
  return perCharacter * length
}

const isLoopback = (host: string) =>
  host === "localhost" || host === "::1" || host === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)

/** Where the server listens, and the token its clients need. */
export class SessionServerInfo extends Context.Tag("@lite-agent/server/SessionServerInfo")<
  SessionServerInfo,
  { readonly url: string; readonly host: string; readonly port: number; readonly token: string; readonly tokenGenerated: boolean }
>() {}

/**
 * Serve the `Checkpointer` in context — and the `LiteAgent`, when there is one — over HTTP,
 * for as long as the layer lives. Refuses (`ConfigurationError`) a non-loopback `host`
 * without an explicit `token`.
 */
export const layer = (
  options: SessionServerOptions = {}
): Layer.Layer<SessionServerInfo, ConfigurationError | ServeError, Checkpointer> =>
  Layer.scoped(
    SessionServerInfo,
    Effect.gen(function*() {
      const decoded = yield* decodeOptions(SessionServerOptions, options, { name: "server options", secrets: ["token"] })
      const host = decoded.host ?? "127.0.0.1"
      if (!isLoopback(host)) {
        if (decoded.token === undefined) {
          return yield* new ConfigurationError({
            option: "token",
            detail: `listening on ${host}, which is not a loopback address, needs a token of your own (${MAKE_A_TOKEN})`
          })
        }
        const bits = estimatedEntropyBits(decoded.token)
        if (bits < MIN_TOKEN_BITS) {
          return yield* new ConfigurationError({
            option: "token",
            detail: `listening on ${host}, which is not a loopback address, needs a token of at least ${MIN_TOKEN_BITS} bits of ` +
              `entropy; this one has about ${Math.floor(bits)} (${MAKE_A_TOKEN})`
          })
        }
      }
      const settings = resolveSettings(decoded, randomBytes(32).toString("base64url"))
      const agent = yield* Effect.serviceOption(LiteAgent)
      const permissions = yield* Effect.serviceOption(PermissionRequests)
      const app = yield* makeApp(settings, agent, permissions)
      const server = yield* NodeHttpServer.make(() => createServer(), { host, port: decoded.port ?? 0 })
      yield* server.serve(app)
      const address = server.address
      const port = address._tag === "TcpAddress" ? address.port : 0
      const urlHost = host.includes(":") && !host.startsWith("[") ? `[${host}]` : host
      return { url: `http://${urlHost}:${port}`, host, port, token: settings.token, tokenGenerated: decoded.token === undefined }
    })
  ).pipe(Layer.provide(NodeHttpServer.layerContext))
