/**
 * The edits the terminal shows as diffs: what a file tool call did (before, read as the call
 * starts; after, as it ends). What one is about to do is tools/editDiffs.ts's.
 */
import type { JsonValue } from "../core/events.js"
import { unifiedDiff } from "../core/textDiff.js"
import { editedPath, readText } from "../tools/editDiffs.js"

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
