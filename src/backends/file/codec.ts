/**
 * Storage codecs (`storage.codec`): how each record's JSON is turned into the text stored
 * on its line, and back. A codec may be asynchronous; the file backend runs it under the
 * session lock. The codec's name (and, for keyed codecs, a key fingerprint) is written in
 * the log header, so a log is never read with a codec other than the one that wrote it.
 * The store's objects (file snapshots, large tool-call arguments) go through the same codec, as bytes.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto"
import { promisify } from "node:util"
import { gunzip, gunzipSync, gzip, gzipSync, type ZlibOptions } from "node:zlib"
import { Context, Effect, Layer, Schema } from "effect"
import { CodecError, ConfigurationError } from "../../core/errors.js"
import { decodeOptionsOrThrow, expecting } from "../../core/internal/options.js"

export interface CodecRecord {
  readonly sessionId: string
  readonly seq: number
  /** JSON text (encode) or stored text (decode). */
  readonly payload: string
}

/**
 * An object's bytes (`data`: plain when encoding, as stored when decoding), named by their plain
 * SHA-256. Objects are shared by every session of the store: `sessionId` is set only when a blob
 * stored by a release that kept blobs per session is read (to be moved into the shared store).
 */
export interface BlobRecord {
  readonly sessionId?: string | undefined
  readonly sha256: string
  readonly data: Uint8Array
}

export interface LogCodecService {
  /** Written in the log header; a log is only opened by a codec of the same name. */
  readonly name: string
  /** For keyed codecs: a fingerprint of the key (not the key), written in the header. */
  readonly keyId?: string
  /** One stored line text per record, in order; must not contain a newline. */
  readonly encode: (records: ReadonlyArray<CodecRecord>) => Effect.Effect<ReadonlyArray<string>, CodecError>
  /** The JSON text of each record, in order. */
  readonly decode: (records: ReadonlyArray<CodecRecord>) => Effect.Effect<ReadonlyArray<string>, CodecError>
  /**
   * A blob's bytes as stored. Optional: without it, a blob is stored through `encode` as base64
   * text, one record named by its hash (`sessionId: "object:<sha256>"`, `seq: 0`), not its session.
   */
  readonly encodeBlob?: (blob: BlobRecord) => Effect.Effect<Uint8Array, CodecError>
  /** A stored blob's plain bytes; required with `encodeBlob`. */
  readonly decodeBlob?: (blob: BlobRecord) => Effect.Effect<Uint8Array, CodecError>
}

/** Blob seq for codecs that only know records: blobs are not log records, and their hash names them. */
const BLOB_SEQ = 0

/**
 * The record a blob is for a codec that only knows records: named by its hash (`object:<sha256>`),
 * not by its session — a codec that authenticates the record's name then binds the blob to its
 * hash, and the same bytes are the same object whichever session stored them.
 */
const objectRecordId = (blob: BlobRecord) => `object:${blob.sha256}`

/** How an error names a blob. */
const blobName = (blob: BlobRecord) =>
  blob.sessionId === undefined ? `object ${blob.sha256}` : `session "${blob.sessionId}", snapshot ${blob.sha256}`

/** How `codec` stores blobs: its own blob methods, or base64 text through its record methods. */
export const blobCodec = (codec: LogCodecService) => {
  const decodeAs = (blob: BlobRecord, sessionId: string) =>
    Effect.map(
      codec.decode([{ sessionId, seq: BLOB_SEQ, payload: Buffer.from(blob.data).toString("utf8") }]),
      (texts) => Buffer.from(texts[0] ?? "", "base64")
    )
  return {
    encode: (blob: BlobRecord): Effect.Effect<Uint8Array, CodecError> =>
      codec.encodeBlob !== undefined && codec.decodeBlob !== undefined
        ? codec.encodeBlob(blob)
        : Effect.map(
          codec.encode([{ sessionId: objectRecordId(blob), seq: BLOB_SEQ, payload: Buffer.from(blob.data).toString("base64") }]),
          (texts) => Buffer.from(texts[0] ?? "", "utf8")
        ),
    decode: (blob: BlobRecord): Effect.Effect<Uint8Array, CodecError> =>
      codec.encodeBlob !== undefined && codec.decodeBlob !== undefined
        ? codec.decodeBlob(blob)
        // A blob stored before blobs were named by their hash was a record of its session: still read.
        : blob.sessionId === undefined
        ? decodeAs(blob, objectRecordId(blob))
        : Effect.orElse(decodeAs(blob, objectRecordId(blob)), () => decodeAs(blob, blob.sessionId!))
  }
}

/** Whether `value` looks like a codec (for options that take one). */
export const isLogCodec = (value: unknown): value is LogCodecService =>
  typeof value === "object" && value !== null && "name" in value && typeof value.name === "string" &&
  "encode" in value && typeof value.encode === "function" && "decode" in value && typeof value.decode === "function"

export class LogCodec extends Context.Tag("@lite-agent/backends/file/LogCodec")<LogCodec, LogCodecService>() {}

/** Plain JSON lines: the default. */
export const jsonCodec: LogCodecService = {
  name: "json",
  encode: (records) => Effect.succeed(records.map((record) => record.payload)),
  decode: (records) => Effect.succeed(records.map((record) => record.payload)),
  // Blobs are stored as their raw bytes.
  encodeBlob: (blob) => Effect.succeed(blob.data),
  decodeBlob: (blob) => Effect.succeed(blob.data)
}

const gzipAsync = promisify(gzip)
const gunzipAsync = promisify(gunzip)
/**
 * Below this many bytes zlib runs on the calling thread: a record of a few hundred bytes takes
 * microseconds there, and several times as long as a trip through the thread pool. Larger
 * inputs (big objects) go to the pool so they do not hold the event loop.
 */
const GZIP_SYNC_MAX_BYTES = 64 * 1024
const deflate = (data: string | Uint8Array, options: ZlibOptions): Promise<Buffer> | Buffer =>
  data.length <= GZIP_SYNC_MAX_BYTES ? gzipSync(data, options) : gzipAsync(data, options)
const inflate = (data: Uint8Array): Promise<Buffer> | Buffer =>
  data.length <= GZIP_SYNC_MAX_BYTES ? gunzipSync(data) : gunzipAsync(data)
/** Each record's result in order; the small ones done at once, the large ones in the pool (at most 8 at a time). */
const eachRecord = <A>(
  records: ReadonlyArray<CodecRecord>,
  run: (record: CodecRecord) => Promise<A> | A,
  failure: (record: CodecRecord, cause: unknown) => CodecError
): Effect.Effect<ReadonlyArray<A>, CodecError> =>
  Effect.suspend(() => {
    const results: Array<A> = []
    const pending: Array<{ readonly at: number; readonly record: CodecRecord; readonly result: Promise<A> }> = []
    for (const [at, record] of records.entries()) {
      try {
        const result = run(record)
        if (result instanceof Promise) pending.push({ at, record, result })
        else results[at] = result
      } catch (cause) {
        // The pool's results are not awaited now: their failures must not surface as unhandled.
        for (const each of pending) each.result.catch(() => undefined)
        return Effect.fail(failure(record, cause))
      }
    }
    if (pending.length === 0) return Effect.succeed(results)
    return Effect.as(
      Effect.forEach(pending, ({ at, record, result }) =>
        Effect.tryPromise({ try: () => result, catch: (cause) => failure(record, cause) }).pipe(Effect.map((value) => {
          results[at] = value
        })), { concurrency: 8, discard: true }),
      results
    )
  })

export const GzipCodecOptions = Schema.Struct({
  /** zlib's compression level: 1 (fastest) to 9 (smallest). Default zlib's own (6). */
  level: Schema.optional(expecting(Schema.Number.pipe(Schema.int(), Schema.between(1, 9)), "an integer from 1 to 9"))
})
export interface GzipCodecOptions extends Schema.Schema.Type<typeof GzipCodecOptions> {}

/** gzip, base64 on the line. Large inputs are compressed on libuv's thread pool. Bad options throw `ConfigurationError`. */
export const gzipCodec = (input: GzipCodecOptions = {}): LogCodecService => {
  const { level } = decodeOptionsOrThrow(GzipCodecOptions, input, "gzip codec options")
  const zlibOptions = level === undefined ? {} : { level }
  return {
    name: "gzip",
    encode: (records) =>
      eachRecord(
        records,
        (record) => {
          const compressed = deflate(record.payload, zlibOptions)
          return compressed instanceof Promise ? compressed.then((buffer) => buffer.toString("base64")) : compressed.toString("base64")
        },
        (_record, cause) => new CodecError({ codec: "gzip", operation: "encode", detail: String(cause) })
      ),
    decode: (records) =>
      eachRecord(
        records,
        (record) => {
          const plain = inflate(Buffer.from(record.payload, "base64"))
          return plain instanceof Promise ? plain.then((buffer) => buffer.toString("utf8")) : plain.toString("utf8")
        },
        (record, cause) =>
          new CodecError({ codec: "gzip", operation: "decode", detail: `session "${record.sessionId}", seq ${record.seq}: ${String(cause)}` })
      ),
    encodeBlob: (blob) =>
      Effect.tryPromise({
        try: async () => deflate(blob.data, zlibOptions),
        catch: (cause) => new CodecError({ codec: "gzip", operation: "encode", detail: String(cause) })
      }),
    decodeBlob: (blob) =>
      Effect.tryPromise({
        try: async () => inflate(blob.data),
        catch: (cause) =>
          new CodecError({ codec: "gzip", operation: "decode", detail: `${blobName(blob)}: ${String(cause)}` })
      })
  }
}

const IV_BYTES = 12
const TAG_BYTES = 16

/** The record's identity is authenticated with it, so records cannot be swapped or moved. */
const additionalData = (record: CodecRecord) => Buffer.from(`${record.sessionId}\0${record.seq}`, "utf8")
/**
 * A blob's: the hash it is stored under, and nothing of its session — the same bytes are the same
 * object whichever session stored them (so that sessions can share them), and no blob can be read
 * under another name.
 */
const blobAdditionalData = (blob: BlobRecord) => Buffer.from(`object\0${blob.sha256}`, "utf8")
/** What blobs were authenticated with before they could be shared: their session too. Still read. */
const sessionBlobAdditionalData = (blob: BlobRecord) => Buffer.from(`blob\0${blob.sessionId}\0${blob.sha256}`, "utf8")

/**
 * AES-256-GCM with a random 96-bit IV per record. The key is yours: 32 bytes, kept out of
 * the log (only a fingerprint is stored). A wrong key or a tampered record fails to
 * authenticate and is a `CodecError`; nothing is ever returned unauthenticated.
 */
export const aes256gcmCodec = (key: Uint8Array): LogCodecService => {
  if (!(key instanceof Uint8Array) || key.length !== 32) {
    throw new ConfigurationError({
      option: "codec",
      detail: `an AES-256-GCM key is 32 bytes, got ${key instanceof Uint8Array ? key.length : typeof key}`
    })
  }
  const secret = Buffer.from(key)
  const keyId = createHash("sha256").update("lite-agent/aes-256-gcm/key-id\0").update(secret).digest("hex").slice(0, 16)
  return {
    name: "aes-256-gcm",
    keyId,
    encode: (records) =>
      Effect.try({
        try: () =>
          records.map((record) => {
            const iv = randomBytes(IV_BYTES)
            const cipher = createCipheriv("aes-256-gcm", secret, iv)
            cipher.setAAD(additionalData(record))
            const body = Buffer.concat([cipher.update(record.payload, "utf8"), cipher.final()])
            return Buffer.concat([iv, body, cipher.getAuthTag()]).toString("base64")
          }),
        catch: (cause) => new CodecError({ codec: "aes-256-gcm", operation: "encode", detail: String(cause) })
      }),
    decode: (records) =>
      Effect.forEach(records, (record) =>
        Effect.try({
          try: () => {
            const sealed = Buffer.from(record.payload, "base64")
            if (sealed.length < IV_BYTES + TAG_BYTES) throw new Error("record is too short")
            const decipher = createDecipheriv("aes-256-gcm", secret, sealed.subarray(0, IV_BYTES))
            decipher.setAAD(additionalData(record))
            decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES))
            const body = sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)
            return Buffer.concat([decipher.update(body), decipher.final()]).toString("utf8")
          },
          catch: () =>
            new CodecError({
              codec: "aes-256-gcm",
              operation: "decode",
              detail: `session "${record.sessionId}", seq ${record.seq}: authentication failed (wrong key or tampered record)`
            })
        })),
    encodeBlob: (blob) =>
      Effect.try({
        try: () => {
          const iv = randomBytes(IV_BYTES)
          const cipher = createCipheriv("aes-256-gcm", secret, iv)
          cipher.setAAD(blobAdditionalData(blob))
          return Buffer.concat([iv, cipher.update(blob.data), cipher.final(), cipher.getAuthTag()])
        },
        catch: (cause) => new CodecError({ codec: "aes-256-gcm", operation: "encode", detail: String(cause) })
      }),
    decodeBlob: (blob) =>
      Effect.try({
        try: () => {
          const sealed = blob.data
          if (sealed.length < IV_BYTES + TAG_BYTES) throw new Error("blob is too short")
          const open = (additional: Buffer) => {
            const decipher = createDecipheriv("aes-256-gcm", secret, sealed.subarray(0, IV_BYTES))
            decipher.setAAD(additional)
            decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES))
            return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES, sealed.length - TAG_BYTES)), decipher.final()])
          }
          try {
            return open(blobAdditionalData(blob))
          } catch (error) {
            // A blob written before blobs were bound to their hash alone (read only to be moved into the shared store).
            if (blob.sessionId === undefined) throw error
            return open(sessionBlobAdditionalData(blob))
          }
        },
        catch: () =>
          new CodecError({
            codec: "aes-256-gcm",
            operation: "decode",
            detail: `${blobName(blob)}: authentication failed (wrong key or tampered blob)`
          })
      })
  }
}

/** Layers for Effect users: provide one to `FileCheckpointer.layer`. */
export const layerJson: Layer.Layer<LogCodec> = Layer.succeed(LogCodec, jsonCodec)
export const layerGzip: Layer.Layer<LogCodec> = Layer.sync(LogCodec, gzipCodec)
export const layerAes256Gcm = (key: Uint8Array): Layer.Layer<LogCodec, ConfigurationError> =>
  Layer.effect(
    LogCodec,
    Effect.try({
      try: () => aes256gcmCodec(key),
      catch: (error) =>
        error instanceof ConfigurationError ? error : new ConfigurationError({ option: "codec", detail: String(error) })
    })
  )
