/**
 * The append path's side of the snapshot store: bytes never enter the log. Each event's blob
 * places (its kind's lens) are rewritten before it is encoded — a file state's inline bytes
 * (`content`, checked against the size and hash it claims) become a `stored` reference, a tool
 * call's large string arguments become `StoredArgument`s — and the bytes become the batch's
 * blobs, which `make` stores before the records.
 */
import { Either } from "effect"
import type { SnapshotBlob } from "../CheckpointerDriver.js"
import { InvalidEventError } from "../errors.js"
import type { SessionEvent, SessionEventEncoded } from "../events.js"
import { type BlobState, type JsonValue, STORED_ARGUMENT_MIN_BYTES, type StoredArgument, type ToolUseBlock } from "../events/parts.js"
import { sha256Hex } from "./sha256.js"
import type { BlobVisitor, EventKind } from "./eventKind.js"
import { EVENT_KINDS } from "./eventTable.js"

/** The blob lens of each kind that has one, by tag. */
const BLOB_LENSES: ReadonlyMap<string, NonNullable<EventKind["blobs"]>> = new Map(
  [...EVENT_KINDS].flatMap(([tag, { kind }]) => (kind.blobs === undefined ? [] : [[tag, kind.blobs] as const]))
)

/** A batch ready for the log: its records' events as JSON, the blobs they need, and the blobs they name that must already be stored. */
export interface SeparatedBatch {
  readonly encoded: ReadonlyArray<SessionEventEncoded>
  readonly blobs: ReadonlyArray<SnapshotBlob>
  /** `stored` references not backed by this batch's blobs, with the index of an event naming each. */
  readonly references: ReadonlyMap<string, number>
}

interface Separation {
  readonly blobs: Map<string, SnapshotBlob>
  readonly references: Map<string, number>
  /** The index of the event being separated. */
  index: number
  /** The first thing wrong with an event, once the lens has visited it. */
  problem: string | undefined
}

const noteReference = (separation: Separation, sha256: string, index: number) => {
  if (!separation.references.has(sha256)) separation.references.set(sha256, index)
}

/** A file state with its bytes moved into the batch's blobs: its `stored` form. */
const storeState = (separation: Separation, index: number, state: BlobState, path: string): BlobState => {
  if (state._tag === "stored") noteReference(separation, state.sha256, index)
  if (state._tag !== "content") return state
  const { data, mode, sha256, size } = state
  if (data.length !== size || sha256Hex(data) !== sha256) {
    separation.problem ??= `the snapshot of ${path} holds ${data.length} bytes that do not match its size ${size} and sha256`
    return state
  }
  separation.blobs.set(sha256, { sha256, data })
  return { _tag: "stored", sha256, size, mode }
}

const isJsonObject = (value: JsonValue): value is { readonly [key: string]: JsonValue } =>
  value !== null && typeof value === "object" && !Array.isArray(value)

/**
 * A tool call with its large string arguments moved into the batch's blobs. A string that UTF-8
 * cannot carry exactly (a lone surrogate) stays inline.
 */
const storeArguments = (separation: Separation, index: number, call: ToolUseBlock): ToolUseBlock => {
  const given = call.storedArguments ?? []
  const input = call.input
  const invalid = (detail: string) => {
    separation.problem ??= `tool call ${call.id}: ${detail}`
    return call
  }
  const keys = given.length === 0 ? undefined : new Set<string>()
  for (const argument of given) {
    if (keys!.has(argument.key)) return invalid(`the stored argument "${argument.key}" is listed twice`)
    keys!.add(argument.key)
    if (isJsonObject(input) && Object.hasOwn(input, argument.key)) return invalid(`"${argument.key}" is both in the input and a stored argument`)
    noteReference(separation, argument.sha256, index)
  }
  if (!isJsonObject(input)) return given.length > 0 ? invalid("stored arguments need an input object") : call
  let kept: { [key: string]: JsonValue } | undefined
  const stored: Array<StoredArgument> = [...given]
  for (const [key, value] of Object.entries(input)) {
    if (typeof value !== "string" || value.length * 3 < STORED_ARGUMENT_MIN_BYTES) continue
    const size = Buffer.byteLength(value, "utf8")
    if (size < STORED_ARGUMENT_MIN_BYTES || !value.isWellFormed()) continue
    const data = Buffer.from(value, "utf8")
    const sha256 = sha256Hex(data)
    separation.blobs.set(sha256, { sha256, data })
    stored.push({ key, sha256, size })
    kept ??= { ...input }
    delete kept[key]
  }
  return kept === undefined ? call : { ...call, input: kept, storedArguments: stored }
}

/**
 * An event's fields as its JSON form. The types cannot tell that the lens left no bytes inline
 * (the one field whose encoding differs), so this is the one place that says so;
 * test/eventShapes.test.ts holds every kind's result to the schema's own encoding.
 */
const logged = (fields: object): SessionEventEncoded => fields as SessionEventEncoded

/**
 * Validated events (see `normalizeEvents`) as the log stores them: their own fields, with the
 * bytes moved out. Nothing else in an event needs encoding (only inline bytes differ between an
 * event and its JSON, and none are left), so no schema runs here.
 */
export const separateBlobs = (sessionId: string, events: ReadonlyArray<SessionEvent>): Either.Either<SeparatedBatch, InvalidEventError> => {
  const separation: Separation = { blobs: new Map(), references: new Map(), index: 0, problem: undefined }
  // One visitor for the batch: every append of an assistant message passes through it.
  const visitor: BlobVisitor = {
    state: (state, path) => storeState(separation, separation.index, state, path),
    toolCall: (call) => storeArguments(separation, separation.index, call)
  }
  const encoded: Array<SessionEventEncoded> = new Array(events.length)
  for (let index = 0; index < events.length; index++) {
    const event = events[index]!
    const lens = BLOB_LENSES.get(event._tag)
    if (lens === undefined) {
      encoded[index] = logged({ ...event })
      continue
    }
    separation.index = index
    const separated = lens(event, visitor)
    if (separation.problem !== undefined) return Either.left(new InvalidEventError({ sessionId, index, detail: separation.problem }))
    // The lens hands back the event itself when it had nothing to rewrite, and fresh fields otherwise.
    encoded[index] = logged(separated === event ? { ...event } : separated)
  }
  for (const sha256 of separation.blobs.keys()) separation.references.delete(sha256)
  return Either.right({ encoded, blobs: [...separation.blobs.values()], references: separation.references })
}
