/**
 * A session log's records under its codec: events encoded to log lines on the way in, scanned
 * lines decoded back to records on the way out, and the header that names the codec (and key)
 * a log was written with, so no log is read with another.
 */
import { randomBytes } from "node:crypto"
import { Chunk, Effect } from "effect"
import { CheckpointIntegrityError, type CheckpointerError, CodecError } from "../../core/errors.js"
import type { StoredEventEncoded } from "../../core/events.js"
import { jsonCodec, type LogCodecService } from "./codec.js"
import { headerLine, type LogHeader, recordLine } from "./format.js"

const newGeneration = () => randomBytes(8).toString("hex")

export const makeLogRecords = (codec: LogCodecService) => {
  /** The header of a new log file (a first append, or a truncate's rewrite): a new generation. */
  const newHeader = (): Buffer => Buffer.from(headerLine(codec.name, codec.keyId, newGeneration()), "utf8")

  /** Fails unless the log's header names this codec and key. */
  const checkCodec = (sessionId: string, header: LogHeader): Effect.Effect<void, CodecError> =>
    header.codec !== codec.name
      ? Effect.fail(
        new CodecError({
          codec: codec.name,
          operation: "decode",
          detail: `session "${sessionId}" was written with the "${header.codec}" codec; open it with that codec`
        })
      )
      : header.keyId !== codec.keyId
      ? Effect.fail(
        new CodecError({
          codec: codec.name,
          operation: "decode",
          detail: `session "${sessionId}" was written with a different key (key id ${header.keyId ?? "none"})`
        })
      )
      : Effect.void

  /** Scanned lines' payloads as stored records (`{ seq, ts, event }`). */
  const decode = (
    sessionId: string,
    scanned: ReadonlyArray<{ readonly seq: number; readonly payload: string }>
  ): Effect.Effect<Chunk.Chunk<unknown>, CheckpointerError> =>
    Effect.flatMap(
      // The default codec stores the JSON text itself: nothing to decode (this is the replay's hot path).
      codec === jsonCodec
        ? Effect.succeed(undefined)
        : codec.decode(scanned.map((record) => ({ sessionId, seq: record.seq, payload: record.payload }))),
      (texts) =>
        Effect.try({
          try: () =>
            Chunk.unsafeFromArray(scanned.map((record, index) => {
              const body = JSON.parse(texts === undefined ? record.payload : texts[index]!) as { readonly ts: unknown; readonly event: unknown }
              return { seq: record.seq, ts: body.ts, event: body.event }
            })),
          catch: (cause) =>
            new CheckpointIntegrityError({
              sessionId,
              seq: scanned[0]?.seq,
              detail: `a record passed its checksum but is not JSON: ${String(cause)}`
            })
        })
    )

  /** One batch of records as the log lines that append it (its last seq is every line's batch end). */
  const encode = (sessionId: string, records: ReadonlyArray<StoredEventEncoded>): Effect.Effect<Buffer, CodecError> =>
    Effect.flatMap(
      codec.encode(records.map((record) => ({
        sessionId,
        seq: record.seq,
        payload: JSON.stringify({ ts: record.ts, event: record.event })
      }))),
      (texts) => {
        if (texts.length !== records.length || texts.some((text) => typeof text !== "string" || text.includes("\n"))) {
          return Effect.fail(
            new CodecError({
              codec: codec.name,
              operation: "encode",
              detail: "the codec must return one single-line string per record"
            })
          )
        }
        const batchEnd = records.at(-1)!.seq
        return Effect.succeed(
          Buffer.from(texts.map((text, index) => recordLine(records[index]!.seq, batchEnd, text)).join(""), "utf8")
        )
      }
    )

  return { newHeader, checkCodec, decode, encode }
}

export type LogRecords = ReturnType<typeof makeLogRecords>
