/**
 * The event schemas' rules, written out by hand for the hot paths: building an event (its
 * class's constructor) and replaying one (the stored-event reader).
 *
 * The schemas (events.ts) stay the definition. Each checker here recognises the fields the
 * schema accepts in their usual shapes and returns them as the schema would build them (known
 * keys only, as the schemas drop unknown ones); for anything it cannot vouch for it answers
 * `undefined`, and the caller goes through the schema, which also words the error. A checker
 * may be stricter than its schema (-0, very deep values, anything unusual go the slow way),
 * never looser: test/eventShapes.test.ts checks that what they accept, the schema accepts and
 * builds equally.
 *
 * JSON values (tool inputs) are kept as they are, not copied: a constructor's caller hands them
 * over, and a reader's JSON was just parsed from storage and is shared with no one.
 */
import type {
  AssistantBlock,
  AssistantMessageFields,
  BackgroundCompletedFields,
  CompactionFields,
  FileAfterState,
  FileChangeFields,
  FileSnapshotFields,
  FileSnapshotState,
  JsonValue,
  RestoreBefore,
  RestoreEndedFields,
  RestoreFile,
  RestoreStartedFields,
  RuntimeMessageFields,
  SessionMetadataFields,
  StoredArgument,
  TextBlock,
  TokenUsage,
  ToolResultFields,
  ToolUseBlock,
  UserContent,
  UserMessageFields
} from "./events.js"

type Fields = { readonly [key: string]: unknown }

const isFields = (value: unknown): value is Fields => typeof value === "object" && value !== null && !Array.isArray(value)
/**
 * A plain object whose keys can be copied as they are. An own `__proto__` key (JSON.parse makes
 * one) is left to the schema, which does not keep it as a key.
 */
const isPlainRecord = (value: unknown): value is Fields =>
  isFields(value) && Object.getPrototypeOf(value) === Object.prototype && !Object.hasOwn(value, "__proto__")
const isNonEmptyString = (value: unknown): value is string => typeof value === "string" && value.length > 0
/** A safe integer >= 0 (and not -0, which the slow path may treat differently). */
const isInt = (value: unknown): value is number => typeof value === "number" && Number.isSafeInteger(value)
const isCount = (value: unknown): value is number => isInt(value) && value >= 0 && !Object.is(value, -0)
const isPositiveInt = (value: unknown): value is number => isInt(value) && value > 0
const isIntOrNull = (value: unknown): value is number | null => value === null || isInt(value)
const isFileMode = (value: unknown): value is number => isCount(value) && value <= 0o7777
const SHA256_HEX = /^[0-9a-f]{64}$/
const isSha256 = (value: unknown): value is string => typeof value === "string" && SHA256_HEX.test(value)

/** Absent and present-with-a-good-value are fine; present with anything else is not. */
const optional = <A>(value: unknown, check: (value: unknown) => value is A): value is A | undefined =>
  value === undefined || check(value)

const isString = (value: unknown): value is string => typeof value === "string"

const isJsonValue = (value: unknown, depth = 0): value is JsonValue => {
  switch (typeof value) {
    case "string":
    case "boolean":
      return true
    case "number":
      return Number.isFinite(value) && !Object.is(value, -0)
    case "object": {
      if (value === null) return true
      // Very deep values are rare; leave them to the schema rather than recurse far.
      if (depth > 64) return false
      if (Array.isArray(value)) {
        // By index: a hole (never in parsed JSON) is undefined, not skipped.
        for (let index = 0; index < value.length; index++) if (!isJsonValue(value[index], depth + 1)) return false
        return true
      }
      if (!isPlainRecord(value)) return false
      for (const key in value) {
        if (!Object.hasOwn(value, key) || !isJsonValue(value[key], depth + 1)) return false
      }
      return true
    }
    default:
      return false
  }
}

const textBlock = (value: unknown): TextBlock | undefined =>
  isFields(value) && value["type"] === "text" && isString(value["text"]) ? { type: "text", text: value["text"] } : undefined

const userContent = (value: unknown): UserContent | undefined => {
  if (typeof value === "string") return value
  if (!Array.isArray(value)) return undefined
  const blocks: Array<TextBlock> = []
  for (const item of value) {
    const block = textBlock(item)
    if (block === undefined) return undefined
    blocks.push(block)
  }
  return blocks
}

const storedArgument = (value: unknown): StoredArgument | undefined =>
  isFields(value) && isNonEmptyString(value["key"]) && isSha256(value["sha256"]) && isCount(value["size"])
    ? { key: value["key"], sha256: value["sha256"], size: value["size"] }
    : undefined

const toolUseBlock = (value: Fields): ToolUseBlock | undefined => {
  const { id, input, name, storedArguments } = value
  if (!isNonEmptyString(id) || !isNonEmptyString(name) || !isJsonValue(input)) return undefined
  if (storedArguments === undefined) return { type: "tool_use", id, name, input }
  if (!Array.isArray(storedArguments)) return undefined
  const stored: Array<StoredArgument> = []
  for (const item of storedArguments) {
    const argument = storedArgument(item)
    if (argument === undefined) return undefined
    stored.push(argument)
  }
  return { type: "tool_use", id, name, input, storedArguments: stored }
}

const assistantBlock = (value: unknown): AssistantBlock | undefined => {
  if (!isFields(value)) return undefined
  return value["type"] === "text" ? textBlock(value) : value["type"] === "tool_use" ? toolUseBlock(value) : undefined
}

const tokenUsage = (value: unknown): TokenUsage | undefined =>
  isFields(value) && isCount(value["inputTokens"]) && isCount(value["outputTokens"])
    ? { inputTokens: value["inputTokens"], outputTokens: value["outputTokens"] }
    : undefined

/**
 * A snapshot's state. Inline bytes (`content`) are vouched for only as bytes (a constructor's
 * argument); as stored JSON (base64, from logs older than the snapshot store) they go the slow way.
 */
const snapshotState = (value: unknown): FileSnapshotState | undefined => {
  if (!isFields(value)) return undefined
  switch (value["_tag"]) {
    case "content": {
      const { data, mode, sha256, size } = value
      return data instanceof Uint8Array && isFileMode(mode) && isCount(size) && isSha256(sha256)
        ? { _tag: "content", data, mode, size, sha256 }
        : undefined
    }
    case "stored":
      return isSha256(value["sha256"]) && isCount(value["size"]) && isFileMode(value["mode"])
        ? { _tag: "stored", sha256: value["sha256"], size: value["size"], mode: value["mode"] }
        : undefined
    case "missing":
      return { _tag: "missing" }
    case "unavailable": {
      const { reason, size } = value
      if (!isString(reason) || !optional(size, isCount)) return undefined
      return size === undefined ? { _tag: "unavailable", reason } : { _tag: "unavailable", reason, size }
    }
    default:
      return undefined
  }
}

const afterState = (value: unknown): FileAfterState | undefined => {
  if (!isFields(value)) return undefined
  if (value["_tag"] === "absent") return { _tag: "absent" }
  return value["_tag"] === "file" && isSha256(value["sha256"]) && isCount(value["size"]) && isFileMode(value["mode"])
    ? { _tag: "file", sha256: value["sha256"], size: value["size"], mode: value["mode"] }
    : undefined
}

const isOperation = (value: unknown): value is FileChangeFields["operation"] =>
  value === "write" || value === "edit" || value === "delete" || value === "chmod"
const isRuntimeKind = (value: unknown): value is RuntimeMessageFields["kind"] =>
  value === "reminder" || value === "repair" || value === "background_completion"

const isStringRecord = (value: unknown): value is { readonly [key: string]: string } => {
  if (!isPlainRecord(value)) return false
  for (const key in value) if (!Object.hasOwn(value, key) || !isString(value[key])) return false
  return true
}

export const userMessageFields = (json: unknown): UserMessageFields | undefined => {
  if (!isFields(json)) return undefined
  const content = userContent(json["content"])
  const origin = json["origin"]
  if (content === undefined || (origin !== undefined && origin !== "user")) return undefined
  return origin === undefined ? { content } : { content, origin }
}

export const assistantMessageFields = (json: unknown): AssistantMessageFields | undefined => {
  if (!isFields(json)) return undefined
  const { content, model, stopReason, usage } = json
  if (!Array.isArray(content) || !optional(model, isString) || !optional(stopReason, isString)) return undefined
  const blocks: Array<AssistantBlock> = []
  for (const item of content) {
    const block = assistantBlock(item)
    if (block === undefined) return undefined
    blocks.push(block)
  }
  const tokens = usage === undefined ? undefined : tokenUsage(usage)
  if (usage !== undefined && tokens === undefined) return undefined
  // Built in place, not with spreads of optional parts: the replay reads every assistant message through here.
  const fields: { -readonly [Key in keyof AssistantMessageFields]: AssistantMessageFields[Key] } = { content: blocks }
  if (model !== undefined) fields.model = model
  if (stopReason !== undefined) fields.stopReason = stopReason
  if (tokens !== undefined) fields.usage = tokens
  return fields
}

export const toolResultFields = (json: unknown): ToolResultFields | undefined => {
  if (!isFields(json)) return undefined
  const { isError, toolName, toolUseId } = json
  const content = userContent(json["content"])
  if (!isNonEmptyString(toolUseId) || !isString(toolName) || content === undefined || typeof isError !== "boolean") return undefined
  return { toolUseId, toolName, content, isError }
}

export const runtimeMessageFields = (json: unknown): RuntimeMessageFields | undefined => {
  if (!isFields(json)) return undefined
  const kind = json["kind"]
  const content = userContent(json["content"])
  return isRuntimeKind(kind) && content !== undefined ? { kind, content } : undefined
}

export const fileSnapshotFields = (json: unknown): FileSnapshotFields | undefined => {
  if (!isFields(json)) return undefined
  const { path, toolUseId } = json
  const state = snapshotState(json["state"])
  return isNonEmptyString(toolUseId) && isNonEmptyString(path) && state !== undefined ? { toolUseId, path, state } : undefined
}

export const fileChangeFields = (json: unknown): FileChangeFields | undefined => {
  if (!isFields(json)) return undefined
  const { after, operation, path, toolUseId } = json
  const left = after === undefined ? undefined : afterState(after)
  if (!isNonEmptyString(toolUseId) || !isNonEmptyString(path) || !isOperation(operation)) return undefined
  if (after !== undefined && left === undefined) return undefined
  return { toolUseId, path, operation, ...(left === undefined ? {} : { after: left }) }
}

export const compactionFields = (json: unknown): CompactionFields | undefined => {
  if (!isFields(json)) return undefined
  const { instructions, keptFromSeq, summary, tokensAfter, tokensBefore } = json
  if (!isString(summary) || !isCount(tokensBefore) || !isCount(tokensAfter)) return undefined
  if (!optional(keptFromSeq, isPositiveInt) || !optional(instructions, isString)) return undefined
  return {
    summary,
    ...(keptFromSeq === undefined ? {} : { keptFromSeq }),
    tokensBefore,
    tokensAfter,
    ...(instructions === undefined ? {} : { instructions })
  }
}

export const backgroundCompletedFields = (json: unknown): BackgroundCompletedFields | undefined => {
  if (!isFields(json)) return undefined
  const { command, exitCode, output, outputTruncated, signal, taskId } = json
  if (!isNonEmptyString(taskId) || !isString(command) || !isString(output) || typeof outputTruncated !== "boolean") return undefined
  if (!isIntOrNull(exitCode) || !optional(signal, isString)) return undefined
  return { taskId, command, exitCode, ...(signal === undefined ? {} : { signal }), output, outputTruncated }
}

export const sessionMetadataFields = (json: unknown): SessionMetadataFields | undefined => {
  if (!isFields(json)) return undefined
  const { formatVersion, labels, model, title, workdir } = json
  if (!isPositiveInt(formatVersion) || !optional(title, isString) || !optional(workdir, isString)) return undefined
  if (!optional(model, isString) || !optional(labels, isStringRecord)) return undefined
  return {
    formatVersion,
    ...(title === undefined ? {} : { title }),
    ...(workdir === undefined ? {} : { workdir }),
    ...(model === undefined ? {} : { model }),
    ...(labels === undefined ? {} : { labels: { ...labels } })
  }
}

/** What a file held before a restore: a snapshot state, never `unavailable`. */
const restoreBefore = (value: unknown): RestoreBefore | undefined => {
  const state = snapshotState(value)
  return state === undefined || state._tag === "unavailable" ? undefined : state
}

export const restoreStartedFields = (json: unknown): RestoreStartedFields | undefined => {
  if (!isFields(json)) return undefined
  const { checkpoint, conversation, files } = json
  if (!isPositiveInt(checkpoint) || typeof conversation !== "boolean" || !Array.isArray(files)) return undefined
  const built: Array<RestoreFile> = []
  for (const file of files) {
    if (!isFields(file)) return undefined
    const { path } = file
    const before = restoreBefore(file["before"])
    const target = afterState(file["target"])
    if (!isNonEmptyString(path) || before === undefined || target === undefined) return undefined
    built.push({ path, before, target })
  }
  return { checkpoint, conversation, files: built }
}

export const restoreEndedFields = (json: unknown): RestoreEndedFields | undefined => {
  if (!isFields(json)) return undefined
  const { outcome, startedSeq } = json
  return isPositiveInt(startedSeq) && (outcome === "finished" || outcome === "undone") ? { startedSeq, outcome } : undefined
}
