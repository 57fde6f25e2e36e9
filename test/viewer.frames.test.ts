import { describe, expect, it } from "vitest"
import { parseFrames } from "../src/viewer/follow.js"

describe("the viewer's reading of Server-Sent Events (src/viewer/follow.ts)", () => {
  it("frames with their event, id and data; comments skipped; CRLF or LF; a frame cut in two waits for its end", () => {
    const { frames, rest } = parseFrames(
      ": heartbeat\n\nid: 7\nevent: event\ndata: {\"a\":1}\n\r\nevent: reset\r\nid: 0\r\ndata: line one\r\ndata: line two\r\n\r\nid: 9\nevent: ev"
    )
    expect(frames).toEqual([
      { event: "event", id: "7", data: "{\"a\":1}" },
      { event: "reset", id: "0", data: "line one\nline two" }
    ])
    expect(rest).toBe("id: 9\nevent: ev")
    const more = parseFrames(`${rest}ent\ndata: x\n\n`)
    expect(more).toEqual({ frames: [{ event: "event", id: "9", data: "x" }], rest: "" })
  })

  it("a frame without an event is a `message`; a value's one leading space is dropped, others kept", () => {
    expect(parseFrames("data:  two spaces\n\n").frames).toEqual([{ event: "message", id: undefined, data: " two spaces" }])
  })
})
