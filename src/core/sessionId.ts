import { Effect } from "effect"
import { InvalidSessionIdError } from "./errors.js"

/** Longest id in UTF-8 bytes; leaves room for side-file suffixes under the usual 255-byte name limit. */
export const MAX_SESSION_ID_BYTES = 200

// C0 and C1 control characters and DEL.
// eslint-disable-next-line no-control-regex
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/

/**
 * Why `sessionId` cannot be used, or `undefined` when it is fine. Ids become file names
 * in the file backend, so anything that could name another file, a hidden file or a
 * directory is refused here, once, for every backend.
 */
export const sessionIdProblem = (sessionId: unknown): string | undefined => {
  if (typeof sessionId !== "string") return `expected a string, got ${typeof sessionId}`
  if (sessionId.length === 0) return "must not be empty"
  const bytes = Buffer.byteLength(sessionId, "utf8")
  if (bytes > MAX_SESSION_ID_BYTES) return `is ${bytes} bytes long; the limit is ${MAX_SESSION_ID_BYTES}`
  if (sessionId.includes("\u0000")) return "must not contain NUL"
  // A lone surrogate has no UTF-8 form: stores would replace it, and two ids would become one.
  if (!sessionId.isWellFormed()) return "must be well-formed Unicode (no lone surrogates)"
  if (CONTROL_CHARACTER.test(sessionId)) return "must not contain control characters"
  if (sessionId.includes("/") || sessionId.includes("\\")) return "must not contain path separators (/ or \\)"
  if (sessionId.includes("..")) return 'must not contain ".."'
  if (sessionId.startsWith(".")) return 'must not start with "."'
  if (sessionId.trim() !== sessionId) return "must not start or end with whitespace"
  return undefined
}

export const validateSessionId = (sessionId: string): Effect.Effect<string, InvalidSessionIdError> => {
  const problem = sessionIdProblem(sessionId)
  return problem === undefined
    ? Effect.succeed(sessionId)
    : Effect.fail(new InvalidSessionIdError({ sessionId: String(sessionId), reason: problem }))
}
