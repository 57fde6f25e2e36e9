/**
 * The parts' rules written out by hand for the hot paths: building an event (its class's
 * constructor) and replaying one (the stored-event reader). Each event kind's own checker, in
 * its declaration, is made of these.
 *
 * The schemas stay the definition. A checker recognises the values the schema accepts in their
 * usual shapes and returns them as the schema would build them (known keys only, as the schemas
 * drop unknown ones); for anything it cannot vouch for it answers `undefined`, and the caller
 * goes through the schema, which also words the error. A checker may be stricter than its schema
 * (-0, very deep values, anything unusual go the slow way), never looser:
 * test/eventShapes.test.ts holds every kind's checker and the reader to the schemas.
 *
 * JSON values (tool inputs) are kept as they are, not copied: a constructor's caller hands them
 * over, and a reader's JSON was just parsed from storage and is shared with no one.
 */
import type {
  AssistantBlock,
  BlobState,
  FileAfterState,
  FileSnapshotState,
  JsonValue,
  StoredArgument,
  TextBlock,
  TokenUsage,
  ToolUseBlock,
  UserContent
} from "../events/parts.js"

export type Fields = { readonly [key: string]: unknown }

export const isFields = (value: unknown): value is Fields => typeof value === "object" && value !== null && !Array.isArray(value)
/**
 * A plain object whose keys can be copied as they are. An own `__proto__` key (JSON.parse makes
 * one) is left to the schema, which does not keep it as a key.
 */
const isPlainRecord = (value: unknown): value is Fields =>
  isFields(value) && Object.getPrototypeOf(value) === Object.prototype && !Object.hasOwn(value, "__proto__")
export const isString = (value: unknown): value is string => typeof value === "string"
export const isNonEmptyString = (value: unknown): value is string => typeof value === "string" && value.length > 0
const isInt = (value: unknown): value is number => typeof value === "number" && Number.isSafeInteger(value)
/** A safe integer >= 0, and not -0 (which the slow path may treat differently). */
export const isCount = (value: unknown): value is number => isInt(value) && value >= 0 && !Object.is(value, -0)
export const isPositiveInt = (value: unknown): value is number => isInt(value) && value > 0
export const isIntOrNull = (value: unknown): value is number | null => value === null || isInt(value)
export const isFileMode = (value: unknown): value is number => isCount(value) && value <= 0o7777
const SHA256_HEX = /^[0-9a-f]{64}$/
const isSha256 = (value: unknown): value is string => typeof value === "string" && SHA256_HEX.test(value)

/** Absent and present-with-a-good-value are fine; present with anything else is not. */
export const optional = <A>(value: unknown, check: (value: unknown) => value is A): value is A | undefined =>
  value === undefined || check(value)

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

export const isStringRecord = (value: unknown): value is { readonly [key: string]: string } => {
  if (!isPlainRecord(value)) return false
  for (const key in value) if (!Object.hasOwn(value, key) || !isString(value[key])) return false
  return true
}

const textBlock = (value: unknown): TextBlock | undefined =>
  isFields(value) && value["type"] === "text" && isString(value["text"]) ? { type: "text", text: value["text"] } : undefined

export const userContent = (value: unknown): UserContent | undefined => {
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

export const assistantBlock = (value: unknown): AssistantBlock | undefined => {
  if (!isFields(value)) return undefined
  return value["type"] === "text" ? textBlock(value) : value["type"] === "tool_use" ? toolUseBlock(value) : undefined
}

export const tokenUsage = (value: unknown): TokenUsage | undefined =>
  isFields(value) && isCount(value["inputTokens"]) && isCount(value["outputTokens"])
    ? { inputTokens: value["inputTokens"], outputTokens: value["outputTokens"] }
    : undefined

/**
 * A snapshot's state. Inline bytes (`content`) are vouched for only as bytes (a constructor's
 * argument); as stored JSON (base64, from logs older than the snapshot store) they go the slow way.
 */
export const snapshotState = (value: unknown): FileSnapshotState | undefined => {
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

/** A snapshot state that is never `unavailable`. */
export const blobState = (value: unknown): BlobState | undefined => {
  const state = snapshotState(value)
  return state === undefined || state._tag === "unavailable" ? undefined : state
}

export const afterState = (value: unknown): FileAfterState | undefined => {
  if (!isFields(value)) return undefined
  if (value["_tag"] === "absent") return { _tag: "absent" }
  return value["_tag"] === "file" && isSha256(value["sha256"]) && isCount(value["size"]) && isFileMode(value["mode"])
    ? { _tag: "file", sha256: value["sha256"], size: value["size"], mode: value["mode"] }
    : undefined
}
