/**
 * A fake Anthropic Messages API on 127.0.0.1 for tests: it records every request and
 * answers `POST /v1/messages` (any query, e.g. `?beta=true`) from a queue of scripted
 * replies — a message, or an HTTP error with Anthropic's error body. A request with
 * `"stream": true` gets the same message as server-sent events, so both
 * `generateText` and `streamText` can be tested. Anything else is a 404, and a
 * messages request with nothing queued is a 500 `api_error` naming the request, so a
 * test that makes one call too many fails loudly.
 */
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"

/** A content block of a Messages API response. */
export type FakeContentBlock =
  | { readonly type: "text"; readonly text: string }
  | {
    readonly type: "tool_use"
    readonly id: string
    readonly name: string
    readonly input: Readonly<Record<string, unknown>>
  }

export type FakeStopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use" | "pause_turn" | "refusal"

/** A successful Messages API response. Omitted fields get plausible defaults. */
export interface FakeMessageReply {
  readonly kind: "message"
  readonly content: ReadonlyArray<FakeContentBlock>
  /** Default: "tool_use" when there is a tool_use block, else "end_turn". */
  readonly stop_reason?: FakeStopReason
  /** Default: { input_tokens: 10, output_tokens: 5 }. */
  readonly usage?: { readonly input_tokens: number; readonly output_tokens: number }
  /** Default: the request's model. */
  readonly model?: string
  /** Default: msg_fake_<request number>. */
  readonly id?: string
}

/** An API error: the status and Anthropic's `{ type: "error", error: { type, message } }` body. */
export interface FakeErrorReply {
  readonly kind: "error"
  readonly status: number
  /** e.g. "invalid_request_error", "authentication_error", "rate_limit_error", "overloaded_error". */
  readonly errorType: string
  readonly message: string
  readonly headers?: Readonly<Record<string, string>>
}

export type FakeReply = FakeMessageReply | FakeErrorReply

/** One request as the server received it. */
export interface RecordedRequest {
  readonly method: string
  /** Path and query, e.g. "/v1/messages?beta=true". */
  readonly url: string
  /** Path only, e.g. "/v1/messages". */
  readonly path: string
  /** Header names are lower-case (node:http). */
  readonly headers: IncomingHttpHeaders
  readonly rawBody: string
  /** The body parsed as JSON, or undefined when it is empty or not JSON. */
  readonly body: unknown
}

export interface FakeAnthropic {
  /** Base URL to hand to the provider, e.g. http://127.0.0.1:54321 (no trailing slash). */
  readonly url: string
  /** Every request so far, oldest first (the live array). */
  readonly requests: ReadonlyArray<RecordedRequest>
  /** Queues replies for the next messages requests, in order. */
  readonly enqueue: (...replies: ReadonlyArray<FakeReply>) => void
  /** Replies still queued. */
  readonly pending: () => number
  /** How `POST /v1/messages/count_tokens` answers: `{ input_tokens }` from this, or a 500 when it gives undefined (the default). */
  readonly countTokensWith: (count: (body: unknown) => number | undefined) => void
  readonly close: () => Promise<void>
}

/** Shorthands for the common replies. */
export const reply = {
  text: (text: string, extra: Partial<Omit<FakeMessageReply, "kind" | "content">> = {}): FakeMessageReply => ({
    kind: "message",
    content: [{ type: "text", text }],
    ...extra
  }),
  message: (
    content: ReadonlyArray<FakeContentBlock>,
    extra: Partial<Omit<FakeMessageReply, "kind" | "content">> = {}
  ): FakeMessageReply => ({ kind: "message", content, ...extra }),
  error: (status: number, errorType: string, message: string): FakeErrorReply => ({
    kind: "error",
    status,
    errorType,
    message
  })
} as const

const parseJson = (text: string): unknown => {
  if (text === "") return undefined
  try {
    return JSON.parse(text) as unknown
  } catch {
    return undefined
  }
}

const sendJson = (res: ServerResponse, status: number, body: unknown, headers: Readonly<Record<string, string>> = {}) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers })
  res.end(text)
}

const sendError = (res: ServerResponse, status: number, errorType: string, message: string, headers?: Readonly<Record<string, string>>) =>
  sendJson(res, status, { type: "error", error: { type: errorType, message } }, headers)

interface StreamEvent {
  readonly type: string
  readonly [field: string]: unknown
}

/** The message as the Messages API streams it: message_start, blocks with deltas, message_delta, message_stop. */
const streamEvents = (message: {
  readonly id: string
  readonly model: string
  readonly content: ReadonlyArray<FakeContentBlock>
  readonly stop_reason: FakeStopReason
  readonly usage: { readonly input_tokens: number; readonly output_tokens: number }
}): ReadonlyArray<StreamEvent> => [
  {
    type: "message_start",
    message: {
      id: message.id,
      type: "message",
      role: "assistant",
      model: message.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: message.usage.input_tokens, output_tokens: 1 }
    }
  },
  ...message.content.flatMap((block, index): ReadonlyArray<StreamEvent> =>
    block.type === "text"
      ? [
        { type: "content_block_start", index, content_block: { type: "text", text: "" } },
        // Word by word, as the API sends a long text in several deltas.
        ...(block.text.match(/\s*\S+\s*|\s+/g) ?? [block.text]).map((text): StreamEvent => ({
          type: "content_block_delta",
          index,
          delta: { type: "text_delta", text }
        })),
        { type: "content_block_stop", index }
      ]
      : [
        { type: "content_block_start", index, content_block: { type: "tool_use", id: block.id, name: block.name, input: {} } },
        { type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) } },
        { type: "content_block_stop", index }
      ]
  ),
  {
    type: "message_delta",
    delta: { stop_reason: message.stop_reason, stop_sequence: null },
    usage: { output_tokens: message.usage.output_tokens }
  },
  { type: "message_stop" }
]

export const startFakeAnthropic = async (): Promise<FakeAnthropic> => {
  const requests: Array<RecordedRequest> = []
  const queue: Array<FakeReply> = []
  let countTokens: (body: unknown) => number | undefined = () => undefined

  const server = createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      const rawBody = Buffer.concat(chunks).toString("utf8")
      const url = req.url ?? "/"
      const path = new URL(url, "http://localhost").pathname
      const body = parseJson(rawBody)
      requests.push({ method: req.method ?? "", url, path, headers: req.headers, rawBody, body })
      const number = requests.length

      if (req.method === "POST" && path === "/v1/messages/count_tokens") {
        const tokens = countTokens(body)
        if (tokens === undefined) sendError(res, 500, "api_error", "fake anthropic: no token count configured")
        else sendJson(res, 200, { input_tokens: tokens })
        return
      }
      if (req.method !== "POST" || path !== "/v1/messages") {
        sendError(res, 404, "not_found_error", `fake anthropic: no route for ${req.method} ${url}`)
        return
      }
      const next = queue.shift()
      if (next === undefined) {
        sendError(res, 500, "api_error", `fake anthropic: no reply queued for request #${number}`)
        return
      }
      if (next.kind === "error") {
        sendError(res, next.status, next.errorType, next.message, next.headers)
        return
      }
      const requestBody = typeof body === "object" && body !== null ? body as Record<string, unknown> : {}
      const message = {
        id: next.id ?? `msg_fake_${number}`,
        model: next.model ?? (typeof requestBody["model"] === "string" ? requestBody["model"] : "unknown"),
        content: next.content,
        stop_reason: next.stop_reason ?? (next.content.some((block) => block.type === "tool_use") ? "tool_use" : "end_turn"),
        usage: next.usage ?? { input_tokens: 10, output_tokens: 5 }
      }
      if (requestBody["stream"] === true) {
        res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
        for (const event of streamEvents(message)) res.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`)
        res.end()
        return
      }
      sendJson(res, 200, {
        ...message,
        type: "message",
        role: "assistant",
        stop_sequence: null,
        usage: { ...message.usage, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 }
      })
    })
  })

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => resolve())
  })
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    enqueue: (...replies) => {
      queue.push(...replies)
    },
    pending: () => queue.length,
    countTokensWith: (count) => {
      countTokens = count
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        // fetch keeps connections alive; without this, close() would wait for them to time out.
        server.closeAllConnections()
        server.close((err) => (err ? reject(err) : resolve()))
      })
  }
}
