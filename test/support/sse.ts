/**
 * A real Server-Sent Events client for the server tests: `fetch` with a streaming body,
 * parsed into `{ id, event, data }` messages as the specification says (fields up to a blank
 * line; comment lines, such as heartbeats, skipped).
 */
export interface SseMessage {
  readonly id: string | undefined
  readonly event: string
  readonly data: string
}

export interface SseConnection {
  readonly status: number
  readonly headers: Headers
  /** The messages as they arrive; ends when the server ends the stream. */
  readonly messages: AsyncIterable<SseMessage>
  /** Drop the connection (as a network failure would). */
  readonly abort: () => void
}

export const connectSse = async (
  url: string,
  options: { readonly token?: string; readonly lastEventId?: string; readonly method?: string; readonly body?: unknown } = {}
): Promise<SseConnection> => {
  const controller = new AbortController()
  const headers: Record<string, string> = { accept: "text/event-stream" }
  if (options.token !== undefined) headers["authorization"] = `Bearer ${options.token}`
  if (options.lastEventId !== undefined) headers["last-event-id"] = options.lastEventId
  if (options.body !== undefined) headers["content-type"] = "application/json"
  const response = await fetch(url, {
    method: options.method ?? "GET",
    headers,
    signal: controller.signal,
    ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) })
  })
  const body = response.body
  async function* messages(): AsyncGenerator<SseMessage> {
    if (body === null) return
    const decoder = new TextDecoder()
    let buffer = ""
    try {
      for await (const chunk of body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true })
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
    } catch (error) {
      if (!controller.signal.aborted) throw error
    }
  }
  return { status: response.status, headers: response.headers, messages: messages(), abort: () => controller.abort() }
}

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
