/** Records a backend gives back, decoded: a read's, in seq order, and a sweep's, for the blobs they reference. */
import { Chunk, Effect, Either, Stream } from "effect"
import { CheckpointIntegrityError, type CheckpointerError } from "../errors.js"
import type { StoredEvent } from "../events.js"
import { blobReferences } from "./blobs.js"
import { decodeStoredEvent } from "./eventCodec.js"

/**
 * Decodes the chunks of a read that starts after `sinceSeq`: each record must carry the next
 * seq, or the log is not contiguous (an integrity error naming where).
 */
export const contiguousDecoder = (sessionId: string, sinceSeq: number) => {
  let expectedSeq = sinceSeq + 1
  return (chunk: Chunk.Chunk<unknown>): Effect.Effect<Chunk.Chunk<StoredEvent>, CheckpointerError> => {
    // A plain loop: decoding sits on the replay hot path.
    const raws = Chunk.toReadonlyArray(chunk)
    const decodedChunk: Array<StoredEvent> = new Array(raws.length)
    for (let index = 0; index < raws.length; index++) {
      const decoded = decodeStoredEvent(sessionId, expectedSeq, raws[index])
      if (Either.isLeft(decoded)) return Effect.fail(decoded.left)
      if (decoded.right.seq !== expectedSeq) {
        return Effect.fail(
          new CheckpointIntegrityError({
            sessionId,
            seq: decoded.right.seq,
            detail: `expected seq ${expectedSeq}, found ${decoded.right.seq}: the log is not contiguous`
          })
        )
      }
      expectedSeq++
      decodedChunk[index] = decoded.right
    }
    return Effect.succeed(Chunk.unsafeFromArray(decodedChunk))
  }
}

/** What a session's records (all of them, from seq 1) reference: objects, and of those the manifest chunks (whose entries name more). */
export interface RecordReferences {
  readonly objects: ReadonlySet<string>
  readonly manifestChunks: ReadonlySet<string>
}

/** The objects a session's records (all of them, from seq 1) reference. */
export const referencedBlobs = (
  sessionId: string,
  records: Stream.Stream<unknown, CheckpointerError>
): Effect.Effect<RecordReferences, CheckpointerError> =>
  Effect.suspend(() => {
    let expectedSeq = 1
    const objects = new Set<string>()
    const manifestChunks = new Set<string>()
    return Stream.runForEach(records, (raw) =>
      Either.match(decodeStoredEvent(sessionId, expectedSeq++, raw), {
        onLeft: Effect.fail,
        onRight: ({ event }) =>
          Effect.sync(() => {
            for (const sha256 of blobReferences(event)) objects.add(sha256)
            if (event._tag === "WorkspaceCaptured") for (const chunk of event.manifest ?? []) manifestChunks.add(chunk.sha256)
          })
      })).pipe(Effect.as({ objects, manifestChunks }))
  })
