/**
 * The persisted vocabulary of a session. The format is ours and versioned
 * (`EVENT_FORMAT_VERSION`); it does not depend on any model vendor's message types,
 * which are mapped at the edge.
 */
import { Schema } from "effect"
import {
  assistantMessageFields,
  backgroundCompletedFields,
  compactionFields,
  fileChangeFields,
  fileSnapshotFields,
  restoreEndedFields,
  restoreStartedFields,
  runtimeMessageFields,
  sessionMetadataFields,
  toolResultFields,
  userMessageFields
} from "./eventShapes.js"

/**
 * What an event constructor hands its schema class. Event constructors validate with the
 * hand-written checkers of eventShapes.ts when they vouch for the fields (the common case, tens
 * of times cheaper): the fields they built, validation off. Otherwise the schema validates
 * (which also words the error), as it does when the caller asked for no validation at all.
 */
const constructorArguments = <P, F extends P>(
  check: (props: unknown) => F | undefined,
  props: P,
  options: Schema.MakeOptions | undefined
): readonly [P, Schema.MakeOptions | undefined] => {
  const validating = options === undefined || options === false || (typeof options === "object" && options.disableValidation !== true)
  const fields = validating ? check(props) : undefined
  return fields === undefined ? [props, options] : [fields, true]
}

/**
 * The version of this event vocabulary, written in `SessionMetadata.formatVersion`. A record
 * this reader does not understand is refused by its schema (`EventDecodeError`).
 */
export const EVENT_FORMAT_VERSION = 1

// ---------------------------------------------------------------------------
// JSON values (tool inputs): finite numbers only, so every value survives JSON.
// ---------------------------------------------------------------------------

export type JsonValue =
  | null
  | boolean
  | number
  | string
  | ReadonlyArray<JsonValue>
  | { readonly [key: string]: JsonValue }

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

// ---------------------------------------------------------------------------
// Content blocks
// ---------------------------------------------------------------------------

export const TextBlock = Schema.Struct({
  type: Schema.Literal("text"),
  text: Schema.String
}).annotations({ identifier: "TextBlock" })
export type TextBlock = typeof TextBlock.Type

const Count = Schema.NonNegativeInt
const Sha256Hex = Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/), Schema.annotations({ identifier: "Sha256Hex" }))

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

/** POSIX permission bits (and the file-type bits are never stored). */
const FileMode = Schema.Int.pipe(Schema.between(0, 0o7777), Schema.annotations({ identifier: "FileMode" }))

// ---------------------------------------------------------------------------
// Messages
// ---------------------------------------------------------------------------

/**
 * A message from the user. `origin: "user"` is the explicit marker that a person
 * typed it; every such message is a checkpoint. Records written before the marker
 * existed have no `origin` and go through {@link isUserCheckpoint}.
 */
const userMessageFieldSchemas = {
  content: UserContent,
  origin: Schema.optionalWith(Schema.Literal("user"), { exact: true })
}
/** The fields of a `UserMessage`, as its schema builds them. */
export type UserMessageFields = Schema.Struct.Type<typeof userMessageFieldSchemas>
export class UserMessage extends Schema.TaggedClass<UserMessage>()("UserMessage", userMessageFieldSchemas) {
  constructor(props: Schema.Struct.Constructor<typeof userMessageFieldSchemas>, options?: Schema.MakeOptions) {
    super(...constructorArguments(userMessageFields, props, options))
  }
}

/** Words the runtime injects in the user's turn. Never a checkpoint. */
export const RuntimeMessageKind = Schema.Literal("reminder", "repair", "background_completion")
export type RuntimeMessageKind = typeof RuntimeMessageKind.Type

const runtimeMessageFieldSchemas = {
  kind: RuntimeMessageKind,
  content: UserContent
}
/** The fields of a `RuntimeMessage`, as its schema builds them. */
export type RuntimeMessageFields = Schema.Struct.Type<typeof runtimeMessageFieldSchemas>
export class RuntimeMessage extends Schema.TaggedClass<RuntimeMessage>()("RuntimeMessage", runtimeMessageFieldSchemas) {
  constructor(props: Schema.Struct.Constructor<typeof runtimeMessageFieldSchemas>, options?: Schema.MakeOptions) {
    super(...constructorArguments(runtimeMessageFields, props, options))
  }
}

export const TokenUsage = Schema.Struct({
  inputTokens: Count,
  outputTokens: Count
}).annotations({ identifier: "TokenUsage" })
export type TokenUsage = typeof TokenUsage.Type

const assistantMessageFieldSchemas = {
  content: Schema.Array(AssistantBlock),
  model: Schema.optionalWith(Schema.String, { exact: true }),
  stopReason: Schema.optionalWith(Schema.String, { exact: true }),
  usage: Schema.optionalWith(TokenUsage, { exact: true })
}
/** The fields of a `AssistantMessage`, as its schema builds them. */
export type AssistantMessageFields = Schema.Struct.Type<typeof assistantMessageFieldSchemas>
export class AssistantMessage extends Schema.TaggedClass<AssistantMessage>()("AssistantMessage", assistantMessageFieldSchemas) {
  constructor(props: Schema.Struct.Constructor<typeof assistantMessageFieldSchemas>, options?: Schema.MakeOptions) {
    super(...constructorArguments(assistantMessageFields, props, options))
  }
}

const toolResultFieldSchemas = {
  toolUseId: Schema.NonEmptyString,
  toolName: Schema.String,
  content: UserContent,
  isError: Schema.Boolean
}
/** The fields of a `ToolResult`, as its schema builds them. */
export type ToolResultFields = Schema.Struct.Type<typeof toolResultFieldSchemas>
export class ToolResult extends Schema.TaggedClass<ToolResult>()("ToolResult", toolResultFieldSchemas) {
  constructor(props: Schema.Struct.Constructor<typeof toolResultFieldSchemas>, options?: Schema.MakeOptions) {
    super(...constructorArguments(toolResultFields, props, options))
  }
}

// ---------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------

/** The bytes and mode of a file as it was before a tool changed it. */
export const SnapshotContent = Schema.TaggedStruct("content", {
  data: Schema.Uint8ArrayFromBase64,
  mode: FileMode,
  /** Length and hash of `data` when it was taken, so a damaged snapshot is detected. */
  size: Count,
  sha256: Sha256Hex
})
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
/** The path did not exist before the change (restore deletes it). */
export const SnapshotMissing = Schema.TaggedStruct("missing", {})
/** No usable snapshot (too large, unreadable, not a regular file); restore cannot put it back. */
export const SnapshotUnavailable = Schema.TaggedStruct("unavailable", {
  reason: Schema.String,
  size: Schema.optionalWith(Count, { exact: true })
})
export const FileSnapshotState = Schema.Union(SnapshotContent, SnapshotStored, SnapshotMissing, SnapshotUnavailable)
export type FileSnapshotState = typeof FileSnapshotState.Type

/** Taken by a mutating file tool before its first change to `path` after a checkpoint. */
const fileSnapshotFieldSchemas = {
  toolUseId: Schema.NonEmptyString,
  /** Relative to the workdir, with `/` separators. */
  path: Schema.NonEmptyString,
  state: FileSnapshotState
}
/** The fields of a `FileSnapshot`, as its schema builds them. */
export type FileSnapshotFields = Schema.Struct.Type<typeof fileSnapshotFieldSchemas>
export class FileSnapshot extends Schema.TaggedClass<FileSnapshot>()("FileSnapshot", fileSnapshotFieldSchemas) {
  constructor(props: Schema.Struct.Constructor<typeof fileSnapshotFieldSchemas>, options?: Schema.MakeOptions) {
    super(...constructorArguments(fileSnapshotFields, props, options))
  }
}

/** What a tool left at a path: a file with this hash and mode, or nothing. */
export const FileLeft = Schema.TaggedStruct("file", { sha256: Sha256Hex, size: Count, mode: FileMode })
export const FileAbsent = Schema.TaggedStruct("absent", {})
export const FileAfterState = Schema.Union(FileLeft, FileAbsent)
export type FileAfterState = typeof FileAfterState.Type

/**
 * Written after every change a file tool makes. `after` is what the tool left; records
 * from before it existed lack it, and restore cannot check those for outside edits.
 */
const fileChangeFieldSchemas = {
  toolUseId: Schema.NonEmptyString,
  path: Schema.NonEmptyString,
  operation: Schema.Literal("write", "edit", "delete", "chmod"),
  after: Schema.optionalWith(FileAfterState, { exact: true })
}
/** The fields of a `FileChange`, as its schema builds them. */
export type FileChangeFields = Schema.Struct.Type<typeof fileChangeFieldSchemas>
export class FileChange extends Schema.TaggedClass<FileChange>()("FileChange", fileChangeFieldSchemas) {
  constructor(props: Schema.Struct.Constructor<typeof fileChangeFieldSchemas>, options?: Schema.MakeOptions) {
    super(...constructorArguments(fileChangeFields, props, options))
  }
}

// ---------------------------------------------------------------------------
// Session lifecycle
// ---------------------------------------------------------------------------

/**
 * The conversation before this record was summarised. The model then sees the summary
 * followed by the messages from `keptFromSeq` on (default: the ones after this record).
 */
const compactionFieldSchemas = {
  summary: Schema.String,
  keptFromSeq: Schema.optionalWith(Schema.Int.pipe(Schema.positive()), { exact: true }),
  tokensBefore: Count,
  tokensAfter: Count,
  instructions: Schema.optionalWith(Schema.String, { exact: true })
}
/** The fields of a `Compaction`, as its schema builds them. */
export type CompactionFields = Schema.Struct.Type<typeof compactionFieldSchemas>
export class Compaction extends Schema.TaggedClass<Compaction>()("Compaction", compactionFieldSchemas) {
  constructor(props: Schema.Struct.Constructor<typeof compactionFieldSchemas>, options?: Schema.MakeOptions) {
    super(...constructorArguments(compactionFields, props, options))
  }
}

/** A background task ended. The model hears about it on its next turn; not a checkpoint. */
const backgroundCompletedFieldSchemas = {
  taskId: Schema.NonEmptyString,
  command: Schema.String,
  exitCode: Schema.NullOr(Schema.Int),
  signal: Schema.optionalWith(Schema.String, { exact: true }),
  output: Schema.String,
  outputTruncated: Schema.Boolean
}
/** The fields of a `BackgroundCompleted`, as its schema builds them. */
export type BackgroundCompletedFields = Schema.Struct.Type<typeof backgroundCompletedFieldSchemas>
export class BackgroundCompleted extends Schema.TaggedClass<BackgroundCompleted>()("BackgroundCompleted", backgroundCompletedFieldSchemas) {
  constructor(props: Schema.Struct.Constructor<typeof backgroundCompletedFieldSchemas>, options?: Schema.MakeOptions) {
    super(...constructorArguments(backgroundCompletedFields, props, options))
  }
}

/** Facts about the session itself. Later values for a key replace earlier ones. */
const sessionMetadataFieldSchemas = {
  formatVersion: Schema.Int.pipe(Schema.positive()),
  title: Schema.optionalWith(Schema.String, { exact: true }),
  workdir: Schema.optionalWith(Schema.String, { exact: true }),
  model: Schema.optionalWith(Schema.String, { exact: true }),
  labels: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.String }), { exact: true })
}
/** The fields of a `SessionMetadata`, as its schema builds them. */
export type SessionMetadataFields = Schema.Struct.Type<typeof sessionMetadataFieldSchemas>
export class SessionMetadata extends Schema.TaggedClass<SessionMetadata>()("SessionMetadata", sessionMetadataFieldSchemas) {
  constructor(props: Schema.Struct.Constructor<typeof sessionMetadataFieldSchemas>, options?: Schema.MakeOptions) {
    super(...constructorArguments(sessionMetadataFields, props, options))
  }
}

// ---------------------------------------------------------------------------
// A restore under way
// ---------------------------------------------------------------------------

/**
 * What a path held when a restore began: its bytes and mode (`content`, kept in the snapshot
 * store as `stored`, like a `FileSnapshot`'s), or nothing.
 */
export const RestoreBefore = Schema.Union(SnapshotContent, SnapshotStored, SnapshotMissing)
export type RestoreBefore = typeof RestoreBefore.Type

/** One file a restore changes: what it held before, and what the restore puts there. */
export const RestoreFile = Schema.Struct({
  /** Relative to the workdir, with `/` separators. */
  path: Schema.NonEmptyString,
  before: RestoreBefore,
  target: FileAfterState
})
export type RestoreFile = typeof RestoreFile.Type

/**
 * A restore's intent, appended before it changes any file. A restore that completes takes it
 * out of the log again (its truncate), or closes it with a `RestoreEnded` when the log has moved
 * past it; one cut short by a crash leaves it, so the session knows its workspace may be half
 * way between two states: the restore can be finished, or undone from each file's `before`.
 * Not a message and not a checkpoint: the model never sees it.
 */
const restoreStartedFieldSchemas = {
  /** The checkpoint (the seq of its prompt) restored to. */
  checkpoint: Schema.Int.pipe(Schema.positive()),
  /** Whether the conversation goes back too (the log cut to just before the checkpoint). */
  conversation: Schema.Boolean,
  /** The files the restore changes (not those already at their target). */
  files: Schema.Array(RestoreFile)
}
/** The fields of a `RestoreStarted`, as its schema builds them. */
export type RestoreStartedFields = Schema.Struct.Type<typeof restoreStartedFieldSchemas>
export class RestoreStarted extends Schema.TaggedClass<RestoreStarted>()("RestoreStarted", restoreStartedFieldSchemas) {
  constructor(props: Schema.Struct.Constructor<typeof restoreStartedFieldSchemas>, options?: Schema.MakeOptions) {
    super(...constructorArguments(restoreStartedFields, props, options))
  }
}

/** The restore begun at `startedSeq` ended with its intent still in the log (the log had moved past it). */
const restoreEndedFieldSchemas = {
  startedSeq: Schema.Int.pipe(Schema.positive()),
  /** `finished`: the files are at the restore's targets; `undone`: back to what they held before it. */
  outcome: Schema.Literal("finished", "undone")
}
/** The fields of a `RestoreEnded`, as its schema builds them. */
export type RestoreEndedFields = Schema.Struct.Type<typeof restoreEndedFieldSchemas>
export class RestoreEnded extends Schema.TaggedClass<RestoreEnded>()("RestoreEnded", restoreEndedFieldSchemas) {
  constructor(props: Schema.Struct.Constructor<typeof restoreEndedFieldSchemas>, options?: Schema.MakeOptions) {
    super(...constructorArguments(restoreEndedFields, props, options))
  }
}

/** The event classes. */
export const SESSION_EVENT_CLASSES = [
  UserMessage,
  RuntimeMessage,
  AssistantMessage,
  ToolResult,
  FileSnapshot,
  FileChange,
  Compaction,
  BackgroundCompleted,
  SessionMetadata,
  RestoreStarted,
  RestoreEnded
] as const

export const SessionEvent = Schema.Union(...SESSION_EVENT_CLASSES).annotations({ identifier: "SessionEvent" })
export type SessionEvent = typeof SessionEvent.Type
export type SessionEventEncoded = typeof SessionEvent.Encoded

/** Every `_tag` a reader of this version understands. */
export const SESSION_EVENT_TAGS = [
  "UserMessage",
  "RuntimeMessage",
  "AssistantMessage",
  "ToolResult",
  "FileSnapshot",
  "FileChange",
  "Compaction",
  "BackgroundCompleted",
  "SessionMetadata",
  "RestoreStarted",
  "RestoreEnded"
] as const satisfies ReadonlyArray<SessionEvent["_tag"]>

/** One event as stored: its 1-based, contiguous position and the time it was appended (epoch ms). */
export const StoredEvent = Schema.Struct({
  seq: Schema.Int.pipe(Schema.positive()),
  ts: Schema.Int.pipe(Schema.nonNegative()),
  event: SessionEvent
}).annotations({ identifier: "StoredEvent" })
export type StoredEvent = typeof StoredEvent.Type
export type StoredEventEncoded = typeof StoredEvent.Encoded

/** The text of user content, blocks joined by newlines. */
export const contentText = (content: UserContent): string =>
  typeof content === "string" ? content : content.map((block) => block.text).join("\n")

/**
 * The snapshot-store blobs an event references: a stored file snapshot's, a tool call's stored
 * arguments, or what the files of a restore under way held before it.
 */
export const blobReferences = (event: SessionEvent): ReadonlyArray<string> => {
  if (event._tag === "FileSnapshot") return event.state._tag === "stored" ? [event.state.sha256] : []
  if (event._tag === "RestoreStarted") return event.files.flatMap((file) => (file.before._tag === "stored" ? [file.before.sha256] : []))
  if (event._tag !== "AssistantMessage") return []
  const hashes: Array<string> = []
  for (const block of event.content) {
    if (block.type === "tool_use" && block.storedArguments !== undefined) {
      for (const argument of block.storedArguments) hashes.push(argument.sha256)
    }
  }
  return hashes
}

/** How a stored argument reads where a conversation is shown (the prompt, a restore plan): its size and hash, not its bytes. */
export const storedArgumentNote = (argument: StoredArgument): string =>
  `[lite-agent: ${argument.size} bytes kept in the session's snapshot store (sha256 ${argument.sha256}), not repeated here]`

/** A tool call's input with each stored argument back in place as its note. */
export const inputWithStoredNotes = (block: ToolUseBlock): JsonValue => {
  if (block.storedArguments === undefined || block.storedArguments.length === 0) return block.input
  const input = block.input !== null && typeof block.input === "object" && !Array.isArray(block.input) ? block.input : {}
  const notes = Object.fromEntries(block.storedArguments.map((argument) => [argument.key, storedArgumentNote(argument)]))
  return { ...input, ...notes }
}
