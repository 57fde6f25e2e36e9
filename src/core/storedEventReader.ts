/**
 * A fast reader for stored events: the replay hot path. It builds the event a stored record's
 * JSON holds with the hand-written checkers of eventShapes.ts, exactly as the schema would;
 * `undefined` when they cannot vouch for it (the caller then decodes through the schema).
 * Inline snapshot bytes (base64, from logs older than the snapshot store) always go the slow way.
 */
import {
  assistantMessageFields,
  backgroundCompletedFields,
  compactionFields,
  fileChangeFields,
  fileSnapshotFields,
  runtimeMessageFields,
  sessionMetadataFields,
  toolResultFields,
  userMessageFields
} from "./eventShapes.js"
import {
  AssistantMessage,
  BackgroundCompleted,
  Compaction,
  FileChange,
  FileSnapshot,
  RuntimeMessage,
  type SessionEvent,
  SessionMetadata,
  ToolResult,
  UserMessage
} from "./events.js"

/** Built with validation off: the checker just vouched for every field. */
const built = <F, A>(fields: F | undefined, make: (fields: F) => A): A | undefined => (fields === undefined ? undefined : make(fields))

export const readStoredEvent = (json: unknown): SessionEvent | undefined => {
  if (typeof json !== "object" || json === null) return undefined
  switch ("_tag" in json ? json._tag : undefined) {
    case "UserMessage":
      return built(userMessageFields(json), (fields) => new UserMessage(fields, true))
    case "AssistantMessage":
      return built(assistantMessageFields(json), (fields) => new AssistantMessage(fields, true))
    case "ToolResult":
      return built(toolResultFields(json), (fields) => new ToolResult(fields, true))
    case "RuntimeMessage":
      return built(runtimeMessageFields(json), (fields) => new RuntimeMessage(fields, true))
    case "FileSnapshot": {
      const fields = fileSnapshotFields(json)
      return fields === undefined || fields.state._tag === "content" ? undefined : new FileSnapshot(fields, true)
    }
    case "FileChange":
      return built(fileChangeFields(json), (fields) => new FileChange(fields, true))
    case "Compaction":
      return built(compactionFields(json), (fields) => new Compaction(fields, true))
    case "BackgroundCompleted":
      return built(backgroundCompletedFields(json), (fields) => new BackgroundCompleted(fields, true))
    case "SessionMetadata":
      return built(sessionMetadataFields(json), (fields) => new SessionMetadata(fields, true))
    default:
      return undefined
  }
}
