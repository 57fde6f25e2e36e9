/**
 * What the event kinds' blob lenses give the rest of the core, written once for every kind: the
 * blobs an event references, whether it still holds bytes inline, and the event with its blob
 * places rewritten (the conformance samples' stored and storable forms).
 */
import type { SessionEvent } from "../events.js"
import type { BlobState, ToolUseBlock } from "../events/parts.js"
import type { BlobVisitor, EventKind } from "./eventKind.js"
import { EVENT_KINDS, isEventInstance } from "./eventTable.js"

const unchangedCall = (call: ToolUseBlock): ToolUseBlock => call
const unchangedState = (state: BlobState): BlobState => state

/** A visitor that leaves alone the places `visit` does not name. */
const completed = (visit: Partial<BlobVisitor>): BlobVisitor => ({
  state: visit.state ?? unchangedState,
  toolCall: visit.toolCall ?? unchangedCall
})

/** Visit each blob place of `fields` (of `kind`) without changing it. */
const visitBlobs = (kind: EventKind, fields: object, visit: Partial<BlobVisitor>): void => {
  kind.blobs?.(fields, completed(visit))
}

/** The snapshot-store blobs an event references: stored file states and stored tool-call arguments. */
export const blobReferences = (event: SessionEvent): ReadonlyArray<string> => {
  const kind = EVENT_KINDS.get(event._tag)?.kind
  if (kind?.blobs === undefined) return []
  const hashes: Array<string> = []
  visitBlobs(kind, event, {
    state: (state) => {
      if (state._tag === "stored") hashes.push(state.sha256)
      return state
    },
    toolCall: (call) => {
      for (const argument of call.storedArguments ?? []) hashes.push(argument.sha256)
      return call
    }
  })
  return hashes
}

let inlineSeen = false
// Made once: the replay asks this of every event of a kind with a lens.
const inlineDetector: BlobVisitor = {
  state: (state) => {
    if (state._tag === "content") inlineSeen = true
    return state
  },
  toolCall: unchangedCall
}

/** Whether `fields` of `kind` hold file bytes inline (`content`), as logs from before the snapshot store can. */
export const holdsInlineBytes = (kind: EventKind, fields: object): boolean => {
  inlineSeen = false
  kind.blobs?.(fields, inlineDetector)
  return inlineSeen
}

/** `event` rebuilt (and validated) by its class with each blob place replaced by what `visit` gives back. */
export const withBlobs = (event: SessionEvent, visit: Partial<BlobVisitor>): SessionEvent => {
  const entry = EVENT_KINDS.get(event._tag)
  if (entry?.kind.blobs === undefined) return event
  const fields = entry.kind.blobs(event, completed(visit))
  const rebuilt: unknown = Reflect.construct(entry.eventClass, [fields])
  if (!isEventInstance(rebuilt)) throw new Error(`${event._tag} did not rebuild as an event`)
  return rebuilt
}
