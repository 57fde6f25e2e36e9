/**
 * What a caught value says: the helpers every edge uses to turn a thrown thing into a typed
 * error's fields. Pure; no I/O.
 */

/** The message of an Error, or the value as text. */
export const messageOf = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

/** The `code` of a Node system error (`ENOENT`, `EEXIST`, …), if it has one. */
export const errnoOf = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause ? String(cause.code) : undefined
