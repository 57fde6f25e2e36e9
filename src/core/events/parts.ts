/**
 * The values event fields are made of: JSON tool inputs, content blocks, file states. Shared by
 * several event kinds, declared once here; each kind's own fields are in its declaration.
 */
import { Schema } from "effect"

export type JsonValue =
  | null
  | boolean
  | number
  | string
  | ReadonlyArray<JsonValue>
  | { readonly [key: string]: JsonValue }

// Finite numbers only, so every value survives JSON.
const JsonNumber = Schema.Number.pipe(
  Schema.filter((n) => Number.isFinite(n) && !Object.is(n, -0), {
    message: () => "expected a finite JSON number (not NaN, Infinity or -0)"
  }),
  Schema.annotations({
    arbitrary: () => (fc) => fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => (n === 0 ? 0 : n))
  })
)

export const JsonValue: Schema.Schema<JsonValue> = Schema.Union(
  Schema.Null,
  Schema.Boolean,
  JsonNumber,
  Schema.String,
  Schema.Array(Schema.suspend(() => JsonValue)),
  Schema.Record({ key: Schema.String, value: Schema.suspend(() => JsonValue) })
).annotations({ identifier: "JsonValue" })

export const TextBlock = Schema.Struct({
  type: Schema.Literal("text"),
  text: Schema.String
}).annotations({ identifier: "TextBlock" })
export type TextBlock = typeof TextBlock.Type

export const Count = Schema.NonNegativeInt
export const PositiveInt = Schema.Int.pipe(Schema.positive())
export const Sha256Hex = Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/), Schema.annotations({ identifier: "Sha256Hex" }))

/**
 * A tool-call argument at least this many UTF-8 bytes long (a whole file handed to
 * `write_file`, say) is kept in the session's snapshot store, not in the log: the same bytes
 * are usually snapshotted by the next change to that file, so they are stored once.
 */
export const STORED_ARGUMENT_MIN_BYTES = 16 * 1024

/**
 * A top-level string argument of a tool call that `append` moved into the snapshot store:
 * `input[key]` was the UTF-8 text of the blob named by `sha256`, and is absent from `input`.
 */
export const StoredArgument = Schema.Struct({
  key: Schema.NonEmptyString,
  sha256: Sha256Hex,
  size: Count
}).annotations({ identifier: "StoredArgument" })
export type StoredArgument = typeof StoredArgument.Type

export const ToolUseBlock = Schema.Struct({
  type: Schema.Literal("tool_use"),
  id: Schema.NonEmptyString,
  name: Schema.NonEmptyString,
  input: JsonValue,
  /** Arguments kept in the snapshot store (see `StoredArgument`); absent when none are. */
  storedArguments: Schema.optionalWith(Schema.Array(StoredArgument), { exact: true })
}).annotations({ identifier: "ToolUseBlock" })
export type ToolUseBlock = typeof ToolUseBlock.Type

/** What a user (or the runtime speaking as the user) says: plain text or text blocks. */
export const UserContent = Schema.Union(Schema.String, Schema.Array(TextBlock))
export type UserContent = typeof UserContent.Type

export const AssistantBlock = Schema.Union(TextBlock, ToolUseBlock)
export type AssistantBlock = typeof AssistantBlock.Type

export const TokenUsage = Schema.Struct({
  inputTokens: Count,
  outputTokens: Count
}).annotations({ identifier: "TokenUsage" })
export type TokenUsage = typeof TokenUsage.Type

/** POSIX permission bits (the file-type bits are never stored). */
export const FileMode = Schema.Int.pipe(Schema.between(0, 0o7777), Schema.annotations({ identifier: "FileMode" }))

/** The bytes and mode of a file as it was before a tool changed it. */
export const SnapshotContent = Schema.TaggedStruct("content", {
  data: Schema.Uint8ArrayFromBase64,
  mode: FileMode,
  /** Length and hash of `data` when it was taken, so a damaged snapshot is detected. */
  size: Count,
  sha256: Sha256Hex
})
export type SnapshotContent = typeof SnapshotContent.Type
/**
 * The bytes of a file as it was before a tool changed it, kept in the session's snapshot
 * store (content-addressed: by their SHA-256) rather than in the log. A `content` snapshot
 * handed to `append` is stored as this; logs from before the store keep `content`.
 */
export const SnapshotStored = Schema.TaggedStruct("stored", {
  sha256: Sha256Hex,
  size: Count,
  mode: FileMode
})
export type SnapshotStored = typeof SnapshotStored.Type
/** The path did not exist before the change (restore deletes it). */
export const SnapshotMissing = Schema.TaggedStruct("missing", {})
/** No usable snapshot (too large, unreadable, not a regular file); restore cannot put it back. */
export const SnapshotUnavailable = Schema.TaggedStruct("unavailable", {
  reason: Schema.String,
  size: Schema.optionalWith(Count, { exact: true })
})
export const FileSnapshotState = Schema.Union(SnapshotContent, SnapshotStored, SnapshotMissing, SnapshotUnavailable)
export type FileSnapshotState = typeof FileSnapshotState.Type

/** What a tool left at a path: a file with this hash and mode, or nothing. */
export const FileLeft = Schema.TaggedStruct("file", { sha256: Sha256Hex, size: Count, mode: FileMode })
export const FileAbsent = Schema.TaggedStruct("absent", {})
export const FileAfterState = Schema.Union(FileLeft, FileAbsent)
export type FileAfterState = typeof FileAfterState.Type

/** A file state that may carry bytes (`content`) or name a blob (`stored`): what a blob lens sees. */
export type BlobState = SnapshotContent | SnapshotStored | typeof SnapshotMissing.Type
