/**
 * The edits the terminal shows as diffs: what a file tool call is about to do (for the
 * permission prompt) and what it did (before, read as the call starts; after, as it ends).
 * Text files up to `MAX_DIFF_BYTES` only; anything else is named, not diffed.
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

/** Files as file tool calls found them when they started, to diff with what they left. */
export const makeEditWatch = (workdir: string) => {
  const started = new Map<string, { readonly path: string; readonly before: string | undefined | null }>()
  return {
    /** A call starts: note its file's content (synchronously, before the tool runs). */
    started: (toolUseId: string, name: string, input: JsonValue) => {
      const path = editedPath(name, input)
      if (path !== undefined) started.set(toolUseId, { path, before: readText(workdir, path) })
    },
    /** A call ended: the diff of what it did (empty when it changed nothing or was not a file tool). */
    ended: (toolUseId: string, isError: boolean): Array<string> => {
      const start = started.get(toolUseId)
      started.delete(toolUseId)
      if (start === undefined || isError) return []
      const after = readText(workdir, start.path)
      if (start.before === null || after === null) return [`(${start.path}: changed — binary, too large or not a file, not shown)`]
      return unifiedDiff(start.path, start.before, after)
    }
  }
}
