/**
 * The fast paths beside the event schemas (each kind's checker, src/core/events/*.ts) must never disagree with them:
 * - an event constructor's checker accepts only fields the schema accepts, and builds them as the
 *   schema does; it accepts every field set the schema can produce (or it would not be fast);
 * - the stored-event reader (replay) likewise for stored JSON;
 * - appending an event class instance logs it as the schema encodes its stored form (bytes moved out).
 */
import { Arbitrary, Either, ParseResult, Schema } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { SESSION_EVENT_CLASSES, SessionEvent, SessionMetadata } from "../src/core/events.js"
import { withBlobs } from "../src/core/internal/blobs.js"
import { decodeStoredEvent, normalizeEvents } from "../src/core/internal/eventCodec.js"
import { kindOf } from "../src/core/internal/eventKind.js"
import { separateBlobs } from "../src/core/internal/snapshotSeparation.js"
import { readStoredEvent } from "../src/core/internal/storedEventReader.js"
import { sha256Hex } from "../src/core/internal/sha256.js"
import { asStored, sampleEvents } from "../src/testing.js"

/** A schema's answer; a value too odd for it even to describe (it throws a TypeError) counts as refused. */
const refusedIfThrown = <A>(schemaAnswer: () => Either.Either<A, unknown>): Either.Either<A, unknown> => {
  try {
    return schemaAnswer()
  } catch (error) {
    return Either.left(error)
  }
}
const decodeEither = Schema.decodeUnknownEither(SessionEvent)
const decodeWithSchema = (json: unknown) => refusedIfThrown(() => decodeEither(json))
const encodeWithSchema = Schema.encodeSync(SessionEvent)
const events = Arbitrary.make(SessionEvent)
/** An event's JSON as a store gives it back: encoded, written as text, parsed. */
const storedJson = (event: SessionEvent): unknown => JSON.parse(JSON.stringify(encodeWithSchema(event)))
/** Whether any place the kind's blob lens visits holds bytes inline (stored JSON of those goes the slow way). */
const hasInlineBytes = (event: SessionEvent) => {
  let found = false
  withBlobs(event, {
    state: (state) => {
      if (state._tag === "content") found = true
      return state
    },
    toolCall: (call) => call
  })
  return found
}

/** Replace the value at a random path of `json` (or drop the key) — most results are invalid, some still valid. */
const mutated = (json: unknown): fc.Arbitrary<unknown> => {
  const paths: Array<Array<string | number>> = []
  const collect = (value: unknown, path: Array<string | number>) => {
    paths.push(path)
    if (value instanceof Uint8Array) return
    if (Array.isArray(value)) value.forEach((item, index) => collect(item, [...path, index]))
    else if (typeof value === "object" && value !== null) for (const [key, item] of Object.entries(value)) collect(item, [...path, key])
  }
  collect(json, [])
  const replacement = fc.oneof(
    fc.constant<unknown>(undefined),
    fc.jsonValue(),
    fc.constantFrom<unknown>(-0, 1.5, -1, 0o10000, "", "x", null, true, [], {}, "a".repeat(64), Number.MAX_SAFE_INTEGER + 2)
  )
  return fc.tuple(fc.constantFrom(...paths), replacement).map(([path, value]) => {
    const copy: unknown = structuredClone(json)
    if (path.length === 0) return value
    let target: unknown = copy
    for (const step of path.slice(0, -1)) target = (target as Record<string | number, unknown>)[step]
    const last = path.at(-1)!
    const container = target as Record<string | number, unknown>
    if (value === undefined) delete container[last]
    else container[last] = value
    return copy
  })
}

/** `new eventClass(props, options)` with props of any shape: what a JavaScript caller may pass. */
const construct = (eventClass: (typeof SESSION_EVENT_CLASSES)[number], props: unknown, options?: boolean): unknown =>
  Reflect.construct(eventClass, [props, options])

describe("the event constructors' checkers", () => {
  for (const eventClass of SESSION_EVENT_CLASSES) {
    const check = (props: unknown) => kindOf(eventClass).check(props)
    // What the constructor validates with when the checker cannot vouch: the class's fields, tag aside.
    const fields = Schema.Struct(eventClass.fields).pipe(Schema.omit("_tag"))
    const validate = ParseResult.validateEither(Schema.typeSchema(fields))
    const arbitrary = Arbitrary.make(Schema.typeSchema(fields))

    it(`${eventClass.identifier}: vouches for every field set the schema can produce, built as the schema builds it`, () => {
      fc.assert(
        fc.property(arbitrary, (props) => {
          // An own "__proto__" key is left to the schema on purpose (see isPlainRecord).
          fc.pre(!JSON.stringify(props).includes('"__proto__"'))
          const checked = check(props)
          expect(checked).toBeDefined()
          expect(checked).toStrictEqual(Either.getOrThrow(validate(props)))
          expect(construct(eventClass, props)).toStrictEqual(construct(eventClass, Either.getOrThrow(validate(props)), true))
        }),
        { numRuns: 300 }
      )
    })

    it(`${eventClass.identifier}: vouches for nothing the schema refuses, however the fields were altered`, () => {
      let vouched = 0
      fc.assert(
        fc.property(arbitrary.chain((props) => mutated(props)), (props) => {
          const checked = check(props)
          const validated = refusedIfThrown(() => validate(props))
          if (checked === undefined) {
            // The constructor then validates with the schema, which refuses it (wording the error: a
            // ParseError, or a TypeError for objects too odd to print).
            if (Either.isLeft(validated)) expect(() => construct(eventClass, props)).toThrow()
            return
          }
          vouched++
          expect(Either.isRight(validated), JSON.stringify(props)).toBe(true)
          expect(checked).toStrictEqual(Either.getOrThrow(validated))
        }),
        // Few fields leave few altered sets valid: more runs, so that some still are.
        { numRuns: Object.keys(eventClass.fields).length <= 3 ? 3000 : 600 }
      )
      // Some altered field sets stay valid (a replaced string is still a string): the accepting side was exercised too.
      expect(vouched).toBeGreaterThan(0)
    })
  }
})

describe("the stored-event reader", () => {
  it("reads every event the schema can produce (inline snapshot bytes aside) exactly as the schema decodes it", () => {
    fc.assert(
      fc.property(events, (event) => {
        const json = storedJson(event)
        const read = readStoredEvent(json)
        const decoded = decodeWithSchema(json)
        expect(Either.isRight(decoded)).toBe(true)
        if (hasInlineBytes(event)) {
          expect(read).toBeUndefined()
          return
        }
        expect(read).toBeDefined()
        expect(read).toStrictEqual(Either.getOrThrow(decoded))
      }),
      { numRuns: 2000 }
    )
  })

  it("accepts nothing the schema refuses, and reads what it accepts as the schema does, however the record was altered", () => {
    let accepted = 0
    let refused = 0
    fc.assert(
      fc.property(events.chain((event) => mutated(storedJson(event))), (json) => {
        const read = readStoredEvent(json)
        const decoded = decodeWithSchema(json)
        if (read === undefined) return
        accepted++
        expect(Either.isRight(decoded), JSON.stringify(json)).toBe(true)
        expect(read).toStrictEqual(Either.getOrThrow(decoded))
      }),
      { numRuns: 5000 }
    )
    fc.assert(fc.property(events.chain((event) => mutated(storedJson(event))), (json) => {
      if (readStoredEvent(json) === undefined && Either.isLeft(decodeWithSchema(json))) refused++
    }), { numRuns: 500 })
    // Both outcomes were exercised: the mutations are not all harmless, nor all fatal.
    expect(accepted).toBeGreaterThan(100)
    expect(refused).toBeGreaterThan(50)
  })

  it("an altered record it cannot vouch for still decodes, or fails, through the schema with the schema's words", () => {
    const json = { seq: 1, ts: 0, event: { _tag: "UserMessage", content: "hi", origin: "someone" } }
    const result = decodeStoredEvent("s", 1, json)
    expect(Either.isLeft(result) && result.left.message).toMatch(/origin/)
    const legacy = sampleEvents().find(hasInlineBytes)!
    const decoded = decodeStoredEvent("s", 1, { seq: 1, ts: 0, event: storedJson(legacy) })
    expect(Either.isRight(decoded) && decoded.right.event).toStrictEqual(legacy)
  })
})

/**
 * A generated event `append` accepts: inline bytes with their true size and hash (generated ones
 * rarely match), tool calls without made-up stored arguments (which may collide with the input).
 */
const appendable = (event: SessionEvent) =>
  withBlobs(event, {
    state: (state) => (state._tag === "content" ? { ...state, size: state.data.length, sha256: sha256Hex(state.data) } : state),
    toolCall: ({ storedArguments: _dropped, ...call }) => call
  })

describe("appending event class instances", () => {
  it("logs an instance exactly as the schema encodes its stored form, its bytes moved into blobs", () => {
    fc.assert(
      fc.property(events.map(appendable), (event) => {
        const normalized = normalizeEvents("s", [event])
        expect(Either.isRight(normalized)).toBe(true)
        if (Either.isLeft(normalized)) return
        expect(normalized.right[0]).toBe(event)
        const separated = separateBlobs("s", normalized.right)
        expect(Either.isRight(separated)).toBe(true)
        if (Either.isLeft(separated)) return
        expect(JSON.stringify(separated.right.encoded[0])).toBe(JSON.stringify(encodeWithSchema(asStored(event))))
        if (!hasInlineBytes(event)) return
        for (const blob of separated.right.blobs) expect(sha256Hex(blob.data)).toBe(blob.sha256)
        expect(separated.right.blobs.length).toBeGreaterThan(0)
      }),
      { numRuns: 2000 }
    )
  })

  it("refuses inline bytes that do not match the size and hash they claim, naming the event", () => {
    const [snapshot] = sampleEvents().filter(hasInlineBytes)
    const damaged = withBlobs(snapshot!, { state: (state) => (state._tag === "content" ? { ...state, sha256: "0".repeat(64) } : state) })
    const separated = separateBlobs("s", [sampleEvents()[0]!, damaged])
    expect(Either.isLeft(separated) && separated.left.index).toBe(1)
    expect(Either.isLeft(separated) && separated.left.message).toMatch(/do not match its size/)
  })

  it("a subclass instance or an encoded event is rebuilt as its own class", () => {
    class Special extends SessionMetadata {}
    const normalized = normalizeEvents("s", [new Special({ formatVersion: 1 }), encodeWithSchema(new SessionMetadata({ formatVersion: 2 }))])
    expect(Either.isRight(normalized) && normalized.right.map((event) => [event.constructor, event])).toEqual([
      [SessionMetadata, new SessionMetadata({ formatVersion: 1 })],
      [SessionMetadata, new SessionMetadata({ formatVersion: 2 })]
    ])
  })
})
