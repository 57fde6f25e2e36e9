/** Records a backend gives back, decoded: a read's, in seq order. */
import { Chunk, Effect, Either } from "effect"
import { CheckpointIntegrityError, type CheckpointerError } from "../errors.js"
import type { StoredEvent } from "../events.js"
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
