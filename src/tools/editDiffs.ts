/**
 * The diff a file tool call would make, from what its file holds now: what a permission question
 * shows (the terminal's, the server's to its clients). Text files up to `MAX_DIFF_BYTES` only;
 * anything else is named, not diffed.
 */
import { readFileSync, statSync } from "node:fs"
import { isAbsolute, relative, resolve } from "node:path"
import type { JsonValue } from "../core/events.js"
import { unifiedDiff } from "../core/textDiff.js"

export const MAX_DIFF_BYTES = 256 * 1024

/** What a path holds as text: `undefined` when nothing is there; `null` when it cannot be shown (binary, too large, outside the workdir). */
export const readText = (workdir: string, path: string): string | undefined | null => {
  const full = resolve(workdir, path)
  const inside = relative(workdir, full)
  if (inside.startsWith("..") || isAbsolute(inside)) return null
  try {
    const stat = statSync(full)
    if (!stat.isFile() || stat.size > MAX_DIFF_BYTES) return null
    const bytes = readFileSync(full)
    return bytes.includes(0) ? null : bytes.toString("utf8")
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT" ? undefined : null
  }
}

/** A string field of a tool call's input, if it has one. */
export const stringField = (input: JsonValue, key: string): string | undefined => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return undefined
  const value = (input as { readonly [key: string]: JsonValue })[key]
  return typeof value === "string" ? value : undefined
}

/** The path a file tool call names, if it is one. */
export const editedPath = (name: string, input: JsonValue): string | undefined =>
  ["write_file", "edit_file", "delete_file"].includes(name) ? stringField(input, "path") : undefined

/** The diff a file tool call would make, as lines (empty: nothing to show); a note when it cannot be shown. */
export const proposedDiff = (workdir: string, name: string, input: JsonValue): Array<string> => {
  const path = editedPath(name, input)
  if (path === undefined) return []
  const before = readText(workdir, path)
  if (before === null) return [`(${path}: not shown — binary, too large or not a file)`]
  switch (name) {
    case "write_file":
      return unifiedDiff(path, before, stringField(input, "content") ?? "")
    case "edit_file": {
      const oldString = stringField(input, "old_string") ?? ""
      const newString = stringField(input, "new_string") ?? ""
      if (before === undefined || oldString === "" || before.split(oldString).length !== 2) {
        return unifiedDiff(path, oldString, newString)
      }
      return unifiedDiff(path, before, before.replace(oldString, () => newString))
    }
    default:
      return unifiedDiff(path, before, undefined)
  }
}

/** The proposed diff as an event's optional field: absent when there is nothing to show. */
export const proposedDiffField = (workdir: string, name: string, input: JsonValue): { readonly diff?: ReadonlyArray<string> } => {
  const diff = proposedDiff(workdir, name, input)
  return diff.length === 0 ? {} : { diff }
}
