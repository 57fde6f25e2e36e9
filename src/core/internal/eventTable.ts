/** Each event kind's class and declaration, by tag: the table the reader and the blob handling look kinds up in. */
import { SESSION_EVENT_CLASSES, type SessionEvent } from "../events.js"
import { type EventKind, kindOf } from "./eventKind.js"

export interface EventKindEntry {
  readonly kind: EventKind
  /** The declared class (the one `instanceof` and decoding know). */
  readonly eventClass: (typeof SESSION_EVENT_CLASSES)[number]
}

export const EVENT_KINDS: ReadonlyMap<string, EventKindEntry> = new Map(
  SESSION_EVENT_CLASSES.map((eventClass) => [eventClass._tag, { kind: kindOf(eventClass), eventClass }])
)

const EVENT_CLASSES: ReadonlySet<unknown> = new Set(SESSION_EVENT_CLASSES)

/**
 * An instance of one of the event classes (not a subclass, not a look-alike): its constructor
 * validated it, so appending it needs no second validation. (An instance built with validation
 * explicitly disabled is trusted as its builder asked.)
 */
export const isEventInstance = (value: unknown): value is SessionEvent =>
  typeof value === "object" && value !== null && EVENT_CLASSES.has(value.constructor)
