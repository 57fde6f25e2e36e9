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
  restoreEndedFields,
  restoreStartedFields,
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
  RestoreEnded,
  RestoreStarted,
  RuntimeMessage,
  type SessionEvent,
  SessionMetadata,
  ToolResult,
  UserMessage
} from "./events.js"

/**
 * An instance as its class's constructor leaves one (a Data class: its fields, then its tag, as
 * own properties), made directly: the checker just vouched for every field, and the constructor
 * would spend more on merging defaults (there are none) than the read spent on everything else.
 * The property tests compare these instances with the schema's.
 */
const built = <F extends object, A extends SessionEvent>(
  fields: F | undefined,
  eventClass: { readonly prototype: A },
  tag: { readonly _tag: A["_tag"] }
): A | undefined => (fields === undefined ? undefined : Object.assign(Object.create(eventClass.prototype), fields, tag))

/** Each kind's tag as an object to copy from, made once rather than once per event read. */
const TAGS: { readonly [Tag in SessionEvent["_tag"]]: { readonly _tag: Tag } } = {
  UserMessage: { _tag: "UserMessage" },
  AssistantMessage: { _tag: "AssistantMessage" },
  ToolResult: { _tag: "ToolResult" },
  RuntimeMessage: { _tag: "RuntimeMessage" },
  FileSnapshot: { _tag: "FileSnapshot" },
  FileChange: { _tag: "FileChange" },
  Compaction: { _tag: "Compaction" },
  BackgroundCompleted: { _tag: "BackgroundCompleted" },
  SessionMetadata: { _tag: "SessionMetadata" },
  RestoreStarted: { _tag: "RestoreStarted" },
  RestoreEnded: { _tag: "RestoreEnded" }
}

export const readStoredEvent = (json: unknown): SessionEvent | undefined => {
  if (typeof json !== "object" || json === null) return undefined
  switch ("_tag" in json ? json._tag : undefined) {
    case "UserMessage":
      return built(userMessageFields(json), UserMessage, TAGS.UserMessage)
    case "AssistantMessage":
      return built(assistantMessageFields(json), AssistantMessage, TAGS.AssistantMessage)
    case "ToolResult":
      return built(toolResultFields(json), ToolResult, TAGS.ToolResult)
    case "RuntimeMessage":
      return built(runtimeMessageFields(json), RuntimeMessage, TAGS.RuntimeMessage)
    case "FileSnapshot": {
      const fields = fileSnapshotFields(json)
      return fields === undefined || fields.state._tag === "content" ? undefined : built(fields, FileSnapshot, TAGS.FileSnapshot)
    }
    case "FileChange":
      return built(fileChangeFields(json), FileChange, TAGS.FileChange)
    case "Compaction":
      return built(compactionFields(json), Compaction, TAGS.Compaction)
    case "BackgroundCompleted":
      return built(backgroundCompletedFields(json), BackgroundCompleted, TAGS.BackgroundCompleted)
    case "SessionMetadata":
      return built(sessionMetadataFields(json), SessionMetadata, TAGS.SessionMetadata)
    case "RestoreStarted": {
      const fields = restoreStartedFields(json)
      return fields === undefined || fields.files.some((file) => file.before._tag === "content")
        ? undefined
        : built(fields, RestoreStarted, TAGS.RestoreStarted)
    }
    case "RestoreEnded":
      return built(restoreEndedFields(json), RestoreEnded, TAGS.RestoreEnded)
    default:
      return undefined
  }
}
