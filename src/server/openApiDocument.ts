/**
 * The OpenAPI document `GET /openapi.json` serves: `OpenApi.fromApi(SessionApi)`, with each
 * operation's security said as it is. Effect gives the API-wide bearer requirement at the top and
 * `security: []` on every operation — which OpenAPI reads as "this route needs nothing",
 * so generated clients and Swagger UI would send no token. Every route of the API is behind the
 * Authorization middleware: each says so. And what a generator names things by: a summary per
 * operation, and the server (the one the document was fetched from).
 */
import * as OpenApi from "@effect/platform/OpenApi"
import { SessionApi } from "./api.js"

const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const

/** Each route in a few words (its description says the rest). */
const SUMMARIES: Readonly<Record<string, string>> = {
  "get /sessions": "List the sessions",
  "get /sessions/{id}": "A session's head, generation and size",
  "delete /sessions/{id}": "Delete a session",
  "get /sessions/{id}/checkpoints": "A session's checkpoints",
  "get /sessions/{id}/tree": "A session's tree of branches",
  "get /sessions/{id}/conversation": "The conversation of a branch",
  "get /sessions/{id}/checkpoints/{seq}/changes": "The files a checkpoint's turn changed",
  "get /sessions/{id}/events": "Follow a session's events (SSE)",
  "get /sessions/{id}/usage": "What a session holds in the store",
  "post /sessions/{id}/messages": "Run a turn",
  "post /sessions/{id}/permissions/{requestId}": "Answer a permission question",
  "post /sessions/{id}/restore": "Restore to before a checkpoint",
  "post /sessions/{id}/restore/undo": "Undo a restore a crash cut short",
  "post /sessions/{id}/undo": "Undo the last move",
  "post /sessions/{id}/redo": "Redo the last undo",
  "post /sessions/{id}/switch": "Switch to another branch",
  "post /sessions/{id}/fork": "Fork a session",
  "post /sessions/{id}/label": "Name a checkpoint or a branch",
  "post /sessions/{id}/compact": "Compact a session",
  "get /store/usage": "What the store holds"
}

export const openApiDocument = (): OpenApi.OpenAPISpec => {
  const spec = OpenApi.fromApi(SessionApi)
  for (const [path, item] of Object.entries(spec.paths)) {
    for (const method of METHODS) {
      const operation = item[method]
      if (operation === undefined) continue
      if (operation.security.length === 0) operation.security = spec.security
      const summary = SUMMARIES[`${method} ${path}`]
      if (operation.summary === undefined && summary !== undefined) operation.summary = summary
    }
  }
  return { ...spec, servers: spec.servers ?? [{ url: "/", description: "The server this document was fetched from" }] }
}
