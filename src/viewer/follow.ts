/**
 * A session's events as they land (`GET /sessions/:id/events`, Server-Sent Events), read with
 * `fetch` so the token goes in a header (an `EventSource` cannot send one). A dropped connection
 * is opened again after a pause, from the last event seen (`Last-Event-ID`): nothing is missed
 * and nothing comes twice.
 */

export interface Frame {
  readonly event: string
  readonly id: string | undefined
  readonly data: string
}

export interface FollowHandlers {
  readonly onFrame: (frame: Frame) => void
  /** `refused`: the token was; `gone`: the session is not there (deleted); both end the following. */
  readonly onState: (state: "live" | "reconnecting" | "refused" | "gone") => void
}

/** Parse SSE text into frames; returns the frames and what is left of an unfinished one. */
export const parseFrames = (buffer: string): { readonly frames: Array<Frame>; readonly rest: string } => {
  const frames: Array<Frame> = []
  const blocks = buffer.split(/\r?\n\r?\n/)
  const rest = blocks.pop() ?? ""
  for (const block of blocks) {
    let event = "message"
    let id: string | undefined
    const data: Array<string> = []
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith(":")) continue
      const colon = line.indexOf(":")
      const field = colon === -1 ? line : line.slice(0, colon)
      const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "")
      if (field === "event") event = value
      else if (field === "id") id = value
      else if (field === "data") data.push(value)
    }
    if (data.length > 0 || id !== undefined) frames.push({ event, id, data: data.join("\n") })
  }
  return { frames, rest }
}

/**
 * Follow `sessionId` from after `sinceSeq` until `stop()`. `generation` (the log's, from its
 * summary and then from each event) makes a resume exact: a log rewritten meanwhile (a truncate)
 * comes back as a `reset` frame and the events from its start.
 */
export const follow = (token: string, sessionId: string, sinceSeq: number, generation: string, handlers: FollowHandlers) => {
  let lastId = String(sinceSeq)
  let lastGeneration = generation
  let stopped = false
  let controller: AbortController | undefined
  let pause = 500

  const connect = async (): Promise<void> => {
    while (!stopped) {
      controller = new AbortController()
      try {
        const response = await fetch(`/sessions/${encodeURIComponent(sessionId)}/events?generation=${encodeURIComponent(lastGeneration)}`, {
          headers: { authorization: `Bearer ${token}`, accept: "text/event-stream", "last-event-id": lastId },
          signal: controller.signal
        })
        if (response.status === 401 || response.status === 404) {
          handlers.onState(response.status === 401 ? "refused" : "gone")
          return
        }
        if (!response.ok || response.body === null) throw new Error(`HTTP ${response.status}`)
        handlers.onState("live")
        pause = 500
        const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
        let buffer = ""
        for (;;) {
          const { done, value } = await reader.read()
          if (done) break
          // Parsed only when a frame may have ended: a long frame in many chunks is not re-split each time.
          const ended = /\r?\n\r?\n/.test(buffer.slice(-3) + value)
          buffer += value
          if (!ended) continue
          const { frames, rest } = parseFrames(buffer)
          buffer = rest
          for (const frame of frames) {
            if (frame.id !== undefined) lastId = frame.id
            if (frame.event === "event" || frame.event === "reset") {
              const data = JSON.parse(frame.data) as { generation?: unknown }
              if (typeof data.generation === "string") lastGeneration = data.generation
            }
            handlers.onFrame(frame)
          }
        }
      } catch {
        // Dropped, refused or stopped: try again below unless stopped.
      }
      if (stopped) return
      handlers.onState("reconnecting")
      await new Promise((resolve) => setTimeout(resolve, pause))
      pause = Math.min(pause * 2, 2000)
    }
  }
  void connect()
  return {
    stop: () => {
      stopped = true
      controller?.abort()
    }
  }
}
