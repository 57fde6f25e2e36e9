/**
 * The one place events cross between their typed form and their JSON form. Backends
 * store `StoredEventEncoded` (plain JSON) and call these on the way in and out.
 */
import { Either, ParseResult, Schema } from "effect"
import { EventDecodeError, InvalidEventError } from "./errors.js"
import {
  SESSION_EVENT_CLASSES,
  SESSION_EVENT_TAGS,
  SessionEvent,
  type SessionEventEncoded,
  StoredEvent,
  type StoredEventEncoded
} from "./events.js"
import { readStoredEvent } from "./storedEventReader.js"

const encodeStored = Schema.encodeSync(StoredEvent)
const decodeStored = Schema.decodeUnknownEither(StoredEvent)
const encodeEvent = Schema.encodeEither(SessionEvent)
const decodeEvent = Schema.decodeUnknownEither(SessionEvent)
const isSessionEvent = Schema.is(SessionEvent)
/** The event classes, whose constructors validate what they build. */
const EVENT_CLASSES: ReadonlySet<unknown> = new Set(SESSION_EVENT_CLASSES)

/**
 * An instance of one of the event classes (not a subclass, not a look-alike): its constructor
 * validated it, so appending it needs no second validation. (An instance built with validation
 * explicitly disabled is trusted as its builder asked.)
 */
const isEventInstance = (value: unknown): value is SessionEvent =>
  typeof value === "object" && value !== null && EVENT_CLASSES.has(value.constructor)

/**
 * The JSON form of a validated event: its own fields, as the schema would encode them. Only
 * inline snapshot bytes need the schema's encoding (base64); everything else is already JSON.
 * (A restore's intent, rare, always goes through the schema.)
 */
const encodeValidated = (event: SessionEvent): Either.Either<SessionEventEncoded, ParseResult.ParseError> => {
  if (event._tag === "FileSnapshot") {
    const state = event.state
    return state._tag === "content" ? encodeEvent(event) : Either.right({ ...event, state })
  }
  if (event._tag === "RestoreStarted") {
    // Rare, and its bytes go to the snapshot store (separateBlobs) whatever their JSON form.
    return encodeEvent(event)
  }
  return Either.right({ ...event })
}
const knownTags: ReadonlySet<string> = new Set(SESSION_EVENT_TAGS)

const describe = (error: ParseResult.ParseError): string => ParseResult.TreeFormatter.formatErrorSync(error)

/** The JSON form of a stored event (events are validated before they are stored). */
export const encodeStoredEvent = (stored: StoredEvent): StoredEventEncoded => encodeStored(stored)

const tagOf = (raw: unknown): unknown =>
  typeof raw === "object" && raw !== null && "event" in raw && typeof raw.event === "object" && raw.event !== null
    ? (raw.event as { readonly _tag?: unknown })._tag
    : undefined

/**
 * Decode one stored record. A kind this reader does not know (written by a newer
 * version) and a malformed record are both typed errors naming the session and seq.
 */
export const decodeStoredEvent = (
  sessionId: string,
  expectedSeq: number,
  raw: unknown
): Either.Either<StoredEvent, EventDecodeError> => {
  const tag = tagOf(raw)
  if (typeof tag === "string" && !knownTags.has(tag)) {
    return Either.left(
      new EventDecodeError({
        sessionId,
        seq: expectedSeq,
        detail: `unknown event kind "${tag}" (written by a newer version of lite-agent?)`
      })
    )
  }
  // seq and ts are plain integers: checked by hand, since this sits on the replay hot path;
  // the event itself always goes through its schema.
  const record = raw as { readonly seq?: unknown; readonly ts?: unknown; readonly event?: unknown } | null
  if (
    typeof record !== "object" || record === null ||
    typeof record.seq !== "number" || !Number.isSafeInteger(record.seq) || record.seq < 1 ||
    typeof record.ts !== "number" || !Number.isSafeInteger(record.ts) || record.ts < 0
  ) {
    return Either.mapLeft(decodeStored(raw), (error) =>
      new EventDecodeError({ sessionId, seq: expectedSeq, detail: describe(error) }))
  }
  const { seq, ts } = record
  const read = readStoredEvent(record.event)
  if (read !== undefined) return Either.right({ seq, ts, event: read })
  return Either.match(decodeEvent(record.event), {
    onLeft: (error) => Either.left(new EventDecodeError({ sessionId, seq: expectedSeq, detail: describe(error) })),
    onRight: (event) => Either.right({ seq, ts, event })
  })
}

/** What callers may hand to `append`: event instances or their encoded JSON form. */
export type SessionEventInput = SessionEvent | SessionEventEncoded

/**
 * Validate every input event, accepting class instances and plain encoded JSON alike.
 * Returns the typed events and their encoded form, or the first invalid one.
 */
export const normalizeEvents = (
  sessionId: string,
  inputs: ReadonlyArray<unknown>
): Either.Either<
  { readonly events: ReadonlyArray<SessionEvent>; readonly encoded: ReadonlyArray<SessionEventEncoded> },
  InvalidEventError
> => {
  if (!Array.isArray(inputs)) {
    return Either.left(new InvalidEventError({ sessionId, index: -1, detail: "events must be an array" }))
  }
  const events: Array<SessionEvent> = []
  const encoded: Array<SessionEventEncoded> = []
  for (let index = 0; index < inputs.length; index++) {
    const input: unknown = inputs[index]
    const result = isEventInstance(input)
      ? Either.map(encodeValidated(input), (json) => [input, json] as const)
      : Either.flatMap(isSessionEvent(input) ? Either.right(input) : decodeEvent(input), (event) =>
        Either.map(encodeEvent(event), (json) => [event, json] as const))
    if (Either.isLeft(result)) {
      return Either.left(new InvalidEventError({ sessionId, index, detail: describe(result.left) }))
    }
    events.push(result.right[0])
    encoded.push(result.right[1])
  }
  return Either.right({ events, encoded })
}

/** `value` as JSON text, bytes (a snapshot's) as base64 rather than an object of numbered keys. */
export const jsonText = (value: unknown): string =>
  JSON.stringify(value, (_key, item: unknown) => (item instanceof Uint8Array ? Buffer.from(item).toString("base64") : item))
