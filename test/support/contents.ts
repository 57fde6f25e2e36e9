/** Shared by the tests and the worker processes (so it must not import vitest). */
import type { StoredEvent } from "../../src/index.js"

/** The content string of a stored UserMessage (every event these tests write is one). */
export const contentOf = (stored: StoredEvent): string => {
  const event = stored.event
  if (event._tag !== "UserMessage" || typeof event.content !== "string") {
    throw new Error(`seq ${stored.seq}: unexpected event ${JSON.stringify(event)}`)
  }
  return event.content
}

/** A FileSnapshot as stores of earlier releases held it: JSON text naming its object by hash (`mode` 0o644). */
export const storedSnapshotJson = (path: string, sha256: string, size: number): string =>
  JSON.stringify({ toolUseId: "t1", path, state: { _tag: "stored", sha256, size, mode: 420 }, _tag: "FileSnapshot" })
