import { Either, Schema } from "effect"
import { describe, expect, it } from "vitest"
import {
  encodeStoredEvent,
  EventDecodeError,
  InvalidEventError,
  sampleEvents,
  SessionEvent,
  sessionIdProblem,
  UserMessage
} from "../src/core.js"
import { decodeStoredEvent, normalizeEvents } from "../src/core/internal/eventCodec.js"

describe("stored event encoding", () => {
  it("round-trips every sample event through JSON text", () => {
    sampleEvents().forEach((event, i) => {
      const json = JSON.parse(JSON.stringify(encodeStoredEvent({ seq: i + 1, ts: 5, event })))
      const decoded = decodeStoredEvent("s", i + 1, json)
      expect(Either.isRight(decoded)).toBe(true)
      if (Either.isRight(decoded)) {
        expect(Schema.encodeSync(SessionEvent)(decoded.right.event)).toEqual(Schema.encodeSync(SessionEvent)(event))
      }
    })
  })

  it("an event kind the reader does not know is a typed error naming the session and seq", () => {
    const result = decodeStoredEvent("sess-1", 7, { seq: 7, ts: 1, event: { _tag: "HologramMessage", beam: 1 } })
    expect(Either.isLeft(result)).toBe(true)
    const error = Either.getLeft(result).pipe((o) => (o._tag === "Some" ? o.value : undefined))
    expect(error).toBeInstanceOf(EventDecodeError)
    expect(error).toMatchObject({ sessionId: "sess-1", seq: 7 })
    expect(error?.message).toContain("HologramMessage")
    expect(error?.message).toContain("seq 7")
  })

  it("a malformed record of a known kind is a typed error too", () => {
    const result = decodeStoredEvent("s", 3, { seq: 3, ts: 1, event: { _tag: "UserMessage", content: 12 } })
    expect(Either.isLeft(result) && result.left).toBeInstanceOf(EventDecodeError)
    expect(Either.isLeft(result) && result.left.seq).toBe(3)
  })

  it("normalizeEvents accepts instances and encoded JSON alike and names the bad index", () => {
    const ok = normalizeEvents("s", [new UserMessage({ content: "a" }), { _tag: "UserMessage", content: "b" }])
    expect(Either.isRight(ok) && ok.right.every((e) => e instanceof UserMessage)).toBe(true)
    const bad = normalizeEvents("s", [new UserMessage({ content: "a" }), { _tag: "UserMessage", content: 1 }])
    expect(Either.isLeft(bad) && bad.left).toBeInstanceOf(InvalidEventError)
    expect(Either.isLeft(bad) && bad.left.index).toBe(1)
  })
})

describe("session ids", () => {
  it("accepts ordinary ids and explains what is wrong with bad ones", () => {
    for (const id of ["abc", "2026-12-02T10:00:00Z", "user@example.com", "ünïcode-🚀", "a.b", "x".repeat(200)]) {
      expect(sessionIdProblem(id), id).toBeUndefined()
    }
    expect(sessionIdProblem("")).toMatch(/empty/)
    expect(sessionIdProblem("x".repeat(201))).toMatch(/limit/)
    expect(sessionIdProblem("é".repeat(101))).toMatch(/202 bytes/)
    expect(sessionIdProblem("a/b")).toMatch(/separator/)
    expect(sessionIdProblem("..")).toMatch(/\.\./)
    expect(sessionIdProblem("a\u0000b")).toMatch(/NUL/)
    expect(sessionIdProblem("a\nb")).toMatch(/control/)
    expect(sessionIdProblem(".git")).toMatch(/start with/)
    expect(sessionIdProblem(42)).toMatch(/string/)
    // Stores write ids as UTF-8, which has no form for a lone surrogate: "a\uD800" and "a\uDBFF" would both become "a\uFFFD".
    expect(sessionIdProblem("a\uD800")).toMatch(/well-formed/)
    expect(sessionIdProblem("🚀".slice(0, 1))).toMatch(/lone surrogate/)
  })
})
