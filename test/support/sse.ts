import { type IncomingHttpHeaders, request as httpRequest } from "node:http"

/**
 * A real Server-Sent Events client for the server tests: an HTTP request whose body is read as
 * it streams, parsed into `{ id, event, data }` messages as the specification says (fields up to a blank
 * line; comment lines, such as heartbeats, skipped).
 */
export interface SseMessage {
  readonly id: string | undefined
  readonly event: string
  readonly data: string
}

export interface SseConnection {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  /** The messages as they arrive; ends when the server ends the stream. */
  readonly messages: AsyncIterable<SseMessage>
  /** Drop the connection (as a network failure would). */
  readonly abort: () => void
}

/** Parse an SSE byte stream into messages. */
async function* parseMessages(body: AsyncIterable<Buffer | string>): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder()
  let buffer = ""
  for await (const chunk of body) {
    buffer += typeof chunk === "string" ? chunk : decoder.decode(chunk, { stream: true })
    let end: number
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      let id: string | undefined
      let event = "message"
      const data: Array<string> = []
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue
        const colon = line.indexOf(":")
        const field = colon < 0 ? line : line.slice(0, colon)
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "")
        if (field === "id") id = value
        else if (field === "event") event = value
        else if (field === "data") data.push(value)
      }
      if (data.length > 0 || id !== undefined) yield { id, event, data: data.join("\n") }
    }
  }
}

/**
 * Open an SSE stream with node:http (one connection per stream, as browsers hold them).
 * (Node's fetch was tried first: with 200 streams at once and some aborted, it ended other
 * streams' bodies early and empty.)
 */
export const connectSse = (
  url: string,
  options: { readonly token?: string; readonly lastEventId?: string; readonly method?: string; readonly body?: unknown } = {}
): Promise<SseConnection> =>
  new Promise((resolve, reject) => {
    const headers: Record<string, string> = { accept: "text/event-stream" }
    if (options.token !== undefined) headers["authorization"] = `Bearer ${options.token}`
    if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body)
    if (payload !== undefined) {
      headers["content-type"] = "application/json"
      headers["content-length"] = String(Buffer.byteLength(payload))
    }
    let aborted = false
    const request = httpRequest(url, { method: options.method ?? "GET", headers, agent: false }, (response) => {
      async function* messages(): AsyncGenerator<SseMessage> {
        try {
          yield* parseMessages(response)
        } catch (error) {
          if (!aborted) throw error
        }
      }
      resolve({
        status: response.statusCode ?? 0,
        headers: response.headers,
        messages: messages(),
        abort: () => {
          aborted = true
          request.destroy()
        }
      })
    })
    request.on("error", (error) => {
      if (!aborted) reject(error)
    })
    request.end(payload)
  })

/** `fetch` with the token, returning the status and the parsed JSON body. */
export const request = async (
  url: string,
  options: { readonly token?: string; readonly method?: string; readonly body?: unknown; readonly rawBody?: string } = {}
): Promise<{ readonly status: number; readonly json: unknown }> => {
  const headers: Record<string, string> = {}
  if (options.token !== undefined) headers["authorization"] = `Bearer ${options.token}`
  if (options.body !== undefined || options.rawBody !== undefined) headers["content-type"] = "application/json"
  const response = await fetch(url, {
    method: options.method ?? "GET",
    headers,
    ...(options.rawBody !== undefined ? { body: options.rawBody } : options.body === undefined ? {} : { body: JSON.stringify(options.body) })
  })
  const text = await response.text()
  return { status: response.status, json: text === "" ? undefined : JSON.parse(text) }
}

/** Messages of a stream until (and with) the first one `until` accepts; a stream that ends first is an error. */
export const messagesUntil = async (messages: AsyncIterator<SseMessage>, until: (message: SseMessage) => boolean) => {
  const seen: Array<SseMessage> = []
  for (;;) {
    const next = await messages.next()
    if (next.done === true) throw new Error(`the stream ended before the awaited message; it sent ${JSON.stringify(seen)}`)
    seen.push(next.value)
    if (until(next.value)) return seen
  }
}

/** The stored event of an `event` frame of `/sessions/:id/events` (`Event`: the fields a test reads). */
export const storedEvent = <Event = { readonly _tag: string; readonly [field: string]: unknown }>(message: SseMessage): Event | undefined =>
  message.event === "event" ? (JSON.parse(message.data) as { event: Event }).event : undefined
