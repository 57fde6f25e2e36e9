/**
 * The persisted vocabulary of a session. The format is ours and versioned
 * (`EVENT_FORMAT_VERSION`); it does not depend on any model vendor's message types,
 * which are mapped at the edge.
 *
 * Each event kind is one declaration (src/core/events/*.ts: its fields, its hand-written
 * checker and, when it holds bytes, its blob lens); this module lists the kinds once, and the
 * union, the tags and every per-kind table of the core are derived from that list.
 */
import { Schema } from "effect"
import { FileChange, FileSnapshot } from "./events/files.js"
import { BackgroundCompleted, Compaction, SessionMetadata } from "./events/lifecycle.js"
import { AssistantMessage, RuntimeMessage, ToolResult, UserMessage } from "./events/messages.js"
import type { JsonValue, StoredArgument, ToolUseBlock, UserContent } from "./events/parts.js"
import { PermissionDecided } from "./events/permissions.js"
import { RestoreEnded, RestoreStarted } from "./events/restores.js"
import { BranchesPruned, BranchLabeled, ForkMade, LeafMoved, SessionForked } from "./events/tree.js"
import { WorkspaceCaptured } from "./events/workspace.js"

export { FileChange, FileSnapshot } from "./events/files.js"
export { BackgroundCompleted, Compaction, SessionMetadata } from "./events/lifecycle.js"
export { AssistantMessage, RuntimeMessage, RuntimeMessageKind, ToolResult, UserMessage } from "./events/messages.js"
export {
  AssistantBlock,
  FileAbsent,
  FileAfterState,
  FileLeft,
  FileSnapshotState,
  JsonValue,
  SnapshotContent,
  SnapshotMissing,
  SnapshotStored,
  SnapshotUnavailable,
  STORED_ARGUMENT_MIN_BYTES,
  StoredArgument,
  TextBlock,
  TokenUsage,
  ToolUseBlock,
  UserContent
} from "./events/parts.js"
export { PermissionDecided, PermissionDecider, PermissionMode, PERMISSION_MODES } from "./events/permissions.js"
export { RestoreBefore, RestoreEnded, RestoreFile, RestoreStarted, RestoreTarget } from "./events/restores.js"
export { BranchesPruned, BranchLabeled, ForkMade, LeafMoved, MoveReason, PrunedBranch, SeqRange, SessionForked } from "./events/tree.js"
export { CaptureCause, CapturedPath, CapturedState, DirectoryState, LinkState, WorkspaceCaptured } from "./events/workspace.js"

/**
 * The version of this event vocabulary, written in `SessionMetadata.formatVersion`. A record
 * this reader does not understand is refused by its schema (`EventDecodeError`).
 */
export const EVENT_FORMAT_VERSION = 1

/** Every event kind, once: adding a kind is its declaration, an entry here and its fold step. */
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
  RestoreEnded,
  WorkspaceCaptured,
  LeafMoved,
  BranchLabeled,
  SessionForked,
  ForkMade,
  PermissionDecided,
  BranchesPruned
] as const

export const SessionEvent = Schema.Union(...SESSION_EVENT_CLASSES).annotations({ identifier: "SessionEvent" })
export type SessionEvent = typeof SessionEvent.Type
export type SessionEventEncoded = typeof SessionEvent.Encoded

/** Every `_tag` a reader of this version understands. */
export const SESSION_EVENT_TAGS: ReadonlyArray<SessionEvent["_tag"]> = SESSION_EVENT_CLASSES.map((eventClass) => eventClass._tag)

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
