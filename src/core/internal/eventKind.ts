/**
 * One declaration per event kind. `EventClass<Self>()(tag, fields, { check, blobs })` makes the
 * kind's `Schema.TaggedClass` with its fast constructor, and carries what the rest of the core
 * derives from the one declaration: the stored-record reader (from `check`), the tag list, union
 * and class table (events.ts), and the blob handling of the append path, sweeps and the
 * conformance samples (from `blobs`). Adding a kind is its declaration plus its fold step.
 */
import { Schema } from "effect"
import type { BlobState, ToolUseBlock } from "../events/parts.js"

/** What a blob lens hands each place an event keeps bytes or names a blob, and takes back. */
export interface BlobVisitor {
  /** A file state of `path`: inline bytes (`content`), a blob reference (`stored`) or nothing. */
  readonly state: (state: BlobState, path: string) => BlobState
  /** A tool call, whose large string arguments belong in the snapshot store. */
  readonly toolCall: (call: ToolUseBlock) => ToolUseBlock
}

/**
 * Where an event kind keeps what belongs in the session's snapshot store: the event's fields
 * with each such place replaced by what the visitor gives back (and visited in a fixed order).
 */
export type BlobLens<Fields> = (fields: Fields, visit: BlobVisitor) => Fields

/** A kind as the core's generic code (reader, blob handling) sees it: its fields as plain objects. */
export interface EventKind {
  /**
   * The hand-written checker: the fields as the schema builds them from `json`, or `undefined`
   * when it cannot vouch for them (the schema then decides, and words the error). Measured ~4×
   * faster than a guard compiled from the schema, ~100× faster than the schema's validation.
   */
  check(json: unknown): object | undefined
  /** Absent for kinds that never hold bytes or name blobs. (A method: each kind's lens takes its own fields.) */
  blobs?(fields: object, visit: BlobVisitor): object
}

/** Each kind, under the class `EventClass` made for it (which the declared class extends). */
const kinds = new Map<Function, EventKind>()

/** A kind's fields as its schema builds them (always an object). */
type FieldsOf<Fields extends Schema.Struct.Fields> = Schema.Struct.Type<Fields> & object

type SchemaClassConstructor = new(props: unknown, options?: Schema.MakeOptions) => object

const validates = (options: Schema.MakeOptions | undefined): boolean =>
  options === undefined || options === false || (typeof options === "object" && options.disableValidation !== true)

/** The class of one event kind; `Self` is the class being declared, as `Schema.TaggedClass` wants it. */
export const EventClass = <Self>() =>
<Tag extends string, Fields extends Schema.Struct.Fields>(
  tag: Tag,
  fields: Fields,
  kind: {
    readonly check: (json: unknown) => FieldsOf<Fields> | undefined
    readonly blobs?: BlobLens<FieldsOf<Fields>>
  }
) => {
  type KindClass = Schema.TaggedClass<Self, Tag, { readonly _tag: Schema.tag<Tag> } & Fields>
  // TypeScript cannot extend a class whose instance type is generic, so the class is built on its
  // untyped constructor and given its type back at the end: the type `Schema.TaggedClass` gives.
  const Base = Schema.TaggedClass<Self>()(tag, fields) as SchemaClassConstructor
  const check = kind.check
  class Event extends Base {
    /**
     * Validates with the kind's checker when it vouches for the fields (the common case, tens of
     * times cheaper), handing the schema class the fields it built with validation off; otherwise
     * the schema validates (and words the error), as it does when the caller asked for none.
     */
    constructor(props: unknown, options?: Schema.MakeOptions) {
      const checked = validates(options) ? check(props) : undefined
      if (checked === undefined) super(props, options)
      else super(checked, true)
    }
  }
  kinds.set(Event, kind.blobs === undefined ? { check } : { check, blobs: kind.blobs })
  return Event as KindClass
}

/** The kind an event class was declared as. */
export const kindOf = (eventClass: Function): EventKind => {
  const kind = kinds.get(Object.getPrototypeOf(eventClass))
  if (kind === undefined) throw new Error(`${eventClass.name} was not declared with EventClass`)
  return kind
}

