/**
 * The session server's HTTP API as the page uses it: every call carries the bearer token the
 * person entered (kept for the tab), and the answers have the types the server declares
 * (src/server/api.ts). A refusal comes back as an `ApiError` with the server's message.
 */
import type { Schema } from "effect"
import type {
  CheckpointChangesJson,
  CheckpointList,
  ConversationJson,
  ForkResult,
  RestoreResult,
  SessionList,
  SessionSummary,
  SessionTreeJson,
  SessionUsageJson
} from "../server/api.js"

export type Sessions = Schema.Schema.Type<typeof SessionList>
export type Summary = Schema.Schema.Type<typeof SessionSummary>
export type Tree = Schema.Schema.Type<typeof SessionTreeJson>
export type Checkpoints = Schema.Schema.Type<typeof CheckpointList>
export type Conversation = Schema.Schema.Type<typeof ConversationJson>
export type Changes = Schema.Schema.Type<typeof CheckpointChangesJson>
export type Restore = Schema.Schema.Type<typeof RestoreResult>
export type Fork = Schema.Schema.Type<typeof ForkResult>
export type SessionUsage = Schema.Schema.Type<typeof SessionUsageJson>

const TOKEN_KEY = "lite-agent-token"

export const savedToken = (): string | undefined => sessionStorage.getItem(TOKEN_KEY) ?? undefined
export const saveToken = (token: string) => sessionStorage.setItem(TOKEN_KEY, token)
export const forgetToken = () => sessionStorage.removeItem(TOKEN_KEY)

export class ApiError extends Error {
  constructor(readonly status: number, readonly tag: string, message: string, readonly body: unknown) {
    super(message)
  }
}

/** A refusal's per-file reasons (a restore, an undo, a fork refused with 409), when the error has them. */
export const refusalsOf = (error: unknown): Restore["refusals"] => {
  if (!(error instanceof ApiError) || typeof error.body !== "object" || error.body === null) return []
  const refusals = (error.body as { refusals?: unknown }).refusals
  return Array.isArray(refusals) ? (refusals as Restore["refusals"]) : []
}

const session = (id: string) => `/sessions/${encodeURIComponent(id)}`

const call = async <A>(token: string, method: "GET" | "POST", path: string, body?: unknown): Promise<A> => {
  const response = await fetch(path, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "content-type": "application/json" })
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  if (!response.ok) {
    let tag = `HTTP ${response.status}`
    let message = text
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
      const fields = parsed as { error?: string; _tag?: string; message?: string }
      tag = fields.error ?? fields._tag ?? tag
      message = fields.message ?? message
    } catch {
      // Not JSON: the text says it.
    }
    throw new ApiError(response.status, tag, message, parsed)
  }
  if (text === "") return undefined as A
  return ((response.headers.get("content-type") ?? "").startsWith("application/json") ? JSON.parse(text) : text) as A
}

export const makeApi = (token: string) => ({
  sessions: () => call<Sessions>(token, "GET", "/sessions"),
  summary: (id: string) => call<Summary>(token, "GET", session(id)),
  tree: (id: string) => call<Tree>(token, "GET", `${session(id)}/tree`),
  /** Reads every log of the store: asked once per change, not per frame. */
  usage: (id: string) => call<SessionUsage>(token, "GET", `${session(id)}/usage`),
  checkpoints: (id: string) => call<Checkpoints>(token, "GET", `${session(id)}/checkpoints`),
  conversation: (id: string, at: number | undefined) =>
    call<Conversation>(token, "GET", `${session(id)}/conversation${at === undefined ? "" : `?at=${at}`}`),
  changes: (id: string, seq: number) => call<Changes>(token, "GET", `${session(id)}/checkpoints/${seq}/changes`),
  /** `files: false` the conversation only, `conversation: false` the files only. */
  restore: (id: string, seq: number, dryRun: boolean, only: { readonly files?: false; readonly conversation?: false } = {}) =>
    call<Restore>(token, "POST", `${session(id)}/restore`, { seq, dryRun, ...only }),
  switchTo: (id: string, leaf: number, dryRun: boolean) => call<Restore>(token, "POST", `${session(id)}/switch`, { leaf, dryRun }),
  undo: (id: string, dryRun: boolean) => call<Restore>(token, "POST", `${session(id)}/undo`, { dryRun }),
  redo: (id: string, dryRun: boolean) => call<Restore>(token, "POST", `${session(id)}/redo`, { dryRun }),
  fork: (id: string, seq: number, dryRun: boolean) => call<Fork>(token, "POST", `${session(id)}/fork`, { seq, dryRun }),
  label: (id: string, seq: number, label: string) => call<void>(token, "POST", `${session(id)}/label`, { seq, label }),
  /** Its answer is the compaction's events (SSE), read to the end: the compaction is then over. */
  compact: (id: string) => call<string>(token, "POST", `${session(id)}/compact`, {}),
  /** `message`: what the model is told of a denial. */
  answer: (id: string, requestId: string, behavior: "allow" | "deny", message?: string) =>
    call<void>(token, "POST", `${session(id)}/permissions/${encodeURIComponent(requestId)}`, { behavior, ...(message === undefined ? {} : { message }) })
})

export type Api = ReturnType<typeof makeApi>
