/**
 * Events crossing into the core: records a backend read (decoded, the fast reader first) and
 * events a caller hands `append` (validated into event instances).
 */
import { Either, ParseResult, Schema } from "effect"
import { EventDecodeError, InvalidEventError } from "../errors.js"
import { SESSION_EVENT_TAGS, SessionEvent, StoredEvent } from "../events.js"
import { isEventInstance } from "./eventTable.js"
import { readStoredEvent } from "./storedEventReader.js"

const decodeStored = Schema.decodeUnknownEither(StoredEvent)
const encodeEvent = Schema.encodeEither(SessionEvent)
const decodeEvent = Schema.decodeUnknownEither(SessionEvent)
const isSessionEvent = Schema.is(SessionEvent)
const knownTags: ReadonlySet<string> = new Set(SESSION_EVENT_TAGS)

const describe = (error: ParseResult.ParseError): string => ParseResult.TreeFormatter.formatErrorSync(error)

/** The `_tag` of a stored record's event, read without decoding it (undefined when it has none). */
export const tagOf = (raw: unknown): unknown =>
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
  // seq and ts are plain integers: checked by hand, since this sits on the replay hot path.
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

/**
 * Every input event as an instance of its own class, validated: instances as they are (their
 * constructor validated them), encoded JSON decoded, and anything else the schema accepts (a
 * subclass instance, say) rebuilt through its JSON form. The first invalid one is the error.
 */
export const normalizeEvents = (
  sessionId: string,
  inputs: ReadonlyArray<unknown>
): Either.Either<ReadonlyArray<SessionEvent>, InvalidEventError> => {
  if (!Array.isArray(inputs)) {
    return Either.left(new InvalidEventError({ sessionId, index: -1, detail: "events must be an array" }))
  }
  const events: Array<SessionEvent> = new Array(inputs.length)
  for (let index = 0; index < inputs.length; index++) {
    const input: unknown = inputs[index]
    if (isEventInstance(input)) {
      events[index] = input
      continue
    }
    const result = isSessionEvent(input) ? Either.flatMap(encodeEvent(input), decodeEvent) : decodeEvent(input)
    if (Either.isLeft(result)) return Either.left(new InvalidEventError({ sessionId, index, detail: describe(result.left) }))
    events[index] = result.right
  }
  return Either.right(events)
}
