/**
 * Events in their JSON form. Backends store `StoredEventEncoded` (plain JSON); the core decodes
 * what they read and encodes what `append` hands them (src/core/internal/eventCodec.ts).
 */
import { Schema } from "effect"
import { type SessionEvent, type SessionEventEncoded, StoredEvent, type StoredEventEncoded } from "./events.js"

const encodeStored = Schema.encodeSync(StoredEvent)

/** The JSON form of a stored event (events are validated before they are stored). */
export const encodeStoredEvent = (stored: StoredEvent): StoredEventEncoded => encodeStored(stored)

/** What callers may hand to `append`: event instances or their encoded JSON form. */
export type SessionEventInput = SessionEvent | SessionEventEncoded

/** `value` as JSON text, bytes (a snapshot's) as base64 rather than an object of numbered keys. */
export const jsonText = (value: unknown): string =>
  JSON.stringify(value, (_key, item: unknown) => (item instanceof Uint8Array ? Buffer.from(item).toString("base64") : item))
