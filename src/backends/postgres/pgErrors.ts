/** PostgreSQL's failures (by SQLSTATE), as the library's errors. */
import { SqlError } from "@effect/sql/SqlError"
import { messageOf } from "../internal/causes.js"
import { type CheckpointerError, CheckpointIntegrityError, ConfigurationError, StorageError } from "../../core/errors.js"

export const pgErrorOf = (error: unknown): { readonly code?: string; readonly message: string } => {
  const cause = error instanceof SqlError ? error.cause : error
  const code = typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined
  return { ...(code === undefined ? {} : { code }), message: messageOf(cause) }
}

const DATA_CORRUPTED = new Set(["XX001", "XX002"])

export const toCheckpointerError = (operation: string) => (error: unknown): CheckpointerError => {
  const { code, message } = pgErrorOf(error)
  if (code !== undefined && DATA_CORRUPTED.has(code)) {
    return new CheckpointIntegrityError({ detail: `${operation}: ${message}` })
  }
  return new StorageError({ operation, detail: code === undefined ? message : `${message} (SQLSTATE ${code})`, cause: error })
}

/** Failures of the connection itself (or authentication), as opposed to a statement's. */
export const connectError = (error: unknown): CheckpointerError | ConfigurationError => {
  const { code, message } = pgErrorOf(error)
  switch (code) {
    case "28P01":
    case "28000":
      return new ConfigurationError({ option: "password", detail: `the server refused the credentials: ${message}` })
    case "3D000":
      return new ConfigurationError({ option: "database", detail: message })
    default:
      return new StorageError({ operation: "connect", detail: message, cause: error })
  }
}
