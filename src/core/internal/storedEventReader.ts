/**
 * A fast reader for stored events: the replay hot path. It builds the event a stored record's
 * JSON holds with each kind's hand-written checker, exactly as the schema would; `undefined`
 * when the checker cannot vouch for it (the caller then decodes through the schema). Inline
 * snapshot bytes (base64, from logs older than the snapshot store) always go the slow way.
 */
import type { SessionEvent } from "../events.js"
import { holdsInlineBytes } from "./blobs.js"
import { EVENT_KINDS } from "./eventTable.js"

/**
 * An instance as its class's constructor leaves one (a Data class: its fields, then its tag, as
 * own properties), made directly: the checker just vouched for every field, and the constructor
 * would spend more on merging defaults (there are none) than the read spent on everything else.
 * The property tests compare these instances with the schema's.
 */
const readers: ReadonlyMap<string, (json: unknown) => SessionEvent | undefined> = new Map(
  [...EVENT_KINDS.values()].map(({ eventClass, kind }) => {
    const prototype: object = eventClass.prototype
    // The tag as an object to copy from, made once rather than once per event read.
    const tag = { _tag: eventClass._tag }
    const read = (json: unknown): SessionEvent | undefined => {
      const fields = kind.check(json)
      if (fields === undefined || (kind.blobs !== undefined && holdsInlineBytes(kind, fields))) return undefined
      return Object.assign(Object.create(prototype), fields, tag)
    }
    return [eventClass._tag, read]
  })
)

export const readStoredEvent = (json: unknown): SessionEvent | undefined => {
  if (typeof json !== "object" || json === null || !("_tag" in json) || typeof json._tag !== "string") return undefined
  return readers.get(json._tag)?.(json)
}
