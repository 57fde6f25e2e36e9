/**
 * A restore's changes to the workspace: each file written (atomically, by the workspace) or
 * deleted in turn, remembering what it replaced, and on any failure, abort or interruption
 * before the commit is through, every changed file put back — a rollback in this process, not
 * a transaction: a crash part-way is left to the restore's intent in the log.
 */
import { posix } from "node:path"
import { Cause, Data, Effect } from "effect"
import { messageOf } from "../backends/internal/causes.js"
import type { CheckpointerError } from "../core/errors.js"
import type * as Session from "../core/session.js"
import { RestoreFailedError, WorkspaceIOError } from "./errors.js"
import { type EntryState, isWriteTemp, type WorkspaceService } from "./Workspace.js"

/** One change to the workspace: write these bytes, make a link or a directory, or delete what is there. */
export type FileOperation =
  | { readonly path: string; readonly kind: "write"; readonly data: Uint8Array; readonly mode: number }
  | { readonly path: string; readonly kind: "link"; readonly target: string }
  | { readonly path: string; readonly kind: "directory"; readonly mode: number }
  | { readonly path: string; readonly kind: "delete" }

export interface ApplyOptions {
  /** The restore, for its error and progress. */
  readonly sessionId: string
  readonly seq: number
  /** Run once every file is in place: it either commits with them in place or fails and they are put back. */
  readonly commit: Effect.Effect<void, CheckpointerError>
  readonly signal: AbortSignal | undefined
  /** Run after a failure when every file could be put back; what it returns is added to the error's detail. */
  readonly afterPutBack: Effect.Effect<string | undefined>
  readonly onProgress: (completed: number, total: number, path: string) => Effect.Effect<unknown>
  readonly onFailure: (error: RestoreFailedError) => Effect.Effect<unknown>
}

export interface Applied {
  /** Directories to delete that were left because they still hold something the restore does not cover. */
  readonly keptDirectories: ReadonlyArray<string>
  /**
   * Paths that no longer held what the restore put there when it looked again, right before its
   * commit (another process wrote them meanwhile): not restored, and what is there now.
   */
  readonly changedMeanwhile: ReadonlyArray<{ readonly path: string; readonly now: string }>
}

export interface FileApplier {
  /**
   * Apply `operations` in order, then `commit`. A failure, an abort or an interruption before
   * the commit is through puts every file changed back as it was, runs `afterPutBack` (when all
   * of them could be) and fails with `RestoreFailedError`.
   */
  readonly apply: (operations: ReadonlyArray<FileOperation>, options: ApplyOptions) => Effect.Effect<Applied, RestoreFailedError>
  /**
   * Remove the temporary files that writes cut short by a crash left beside `paths` (a restore
   * that completes leaves none). Best effort: one that cannot be listed or removed is left.
   */
  readonly removeWriteTemps: (paths: ReadonlyArray<string>) => Effect.Effect<void>
}

export const make = (workspace: WorkspaceService): FileApplier => {
  const apply = (operations: ReadonlyArray<FileOperation>, options: ApplyOptions): Effect.Effect<Applied, RestoreFailedError> => {
    const { seq, sessionId, signal } = options
    const total = operations.length
    // What each path held before this restore touched it, to put it back on failure.
    const replaced: Array<{ readonly path: string; readonly kind: FileOperation["kind"]; readonly before: EntryState }> = []
    const keptDirectories: Array<string> = []
    const putBack = Effect.gen(function*() {
      const failed: Array<string> = []
      for (const { before, kind, path } of [...replaced].reverse()) {
        // What is there now is of another kind than what goes back (a directory where a link was): it goes first.
        const cleared = before.kind === "absent" || before.kind === "other"
          ? Effect.void
          : Effect.flatMap(workspace.entry(path), (now) => (now.kind === "absent" || now.kind === before.kind ? Effect.void : workspace.removeEntry(path)))
        const putBackOne = before.kind === "file"
          ? workspace.write(path, before.data, before.mode)
          : before.kind === "absent"
          ? (kind === "write" ? workspace.remove(path) : workspace.removeEntry(path))
          : before.kind === "link"
          ? workspace.writeLink(path, before.target)
          : before.kind === "directory"
          ? workspace.makeDirectory(path, before.mode)
          : Effect.void
        if ((yield* Effect.either(Effect.zipRight(cleared, putBackOne)))._tag === "Left") failed.push(path)
      }
      return failed
    })
    /** A path that holds another kind of thing than the operation puts there (a link where a file goes, …) is cleared first. */
    const clearedFor = (operation: FileOperation, before: EntryState) => {
      const kind = operation.kind === "write" ? "file" : operation.kind
      return before.kind === "absent" || before.kind === kind
        ? Effect.void
        : Effect.flatMap(workspace.removeEntry(operation.path), (removed) =>
          removed
            ? Effect.void
            : Effect.fail(new WorkspaceIOError({ operation: "replace", path: operation.path, detail: "it is a directory that is not empty" })))
    }
    const perform = (operation: FileOperation, before: EntryState) => {
      switch (operation.kind) {
        case "write":
          return Effect.zipRight(clearedFor(operation, before), workspace.write(operation.path, operation.data, operation.mode))
        case "link":
          return Effect.zipRight(clearedFor(operation, before), workspace.writeLink(operation.path, operation.target))
        case "directory":
          return Effect.zipRight(clearedFor(operation, before), workspace.makeDirectory(operation.path, operation.mode))
        case "delete":
          // A file goes through `remove` (its path checked like every file's); a link or a directory through `removeEntry`.
          return before.kind === "file" || before.kind === "absent"
            ? workspace.remove(operation.path)
            : Effect.map(workspace.removeEntry(operation.path), (removed) => {
              if (!removed) keptDirectories.push(operation.path)
            })
      }
    }
    /**
     * Each path looked at again once all are done: a restore says it put back only what is
     * there when it commits. One another process changed meanwhile is left as that process
     * left it (putting it back would undo that process's write) and reported.
     */
    const changedMeanwhile: Array<{ readonly path: string; readonly now: string }> = []
    const verify = Effect.forEach(operations, (operation) =>
      keptDirectories.includes(operation.path) ? Effect.void : Effect.match(workspace.entry(operation.path), {
        onFailure: (error) => void changedMeanwhile.push({ path: operation.path, now: `something that cannot be read (${error.message})` }),
        onSuccess: (now) => {
          if (!holds(now, operation)) changedMeanwhile.push({ path: operation.path, now: describeEntry(now) })
        }
      }), { discard: true })
    const checkAbort = Effect.suspend(() => (signal?.aborted === true ? Effect.fail(new RestoreAborted()) : Effect.void))
    const execute = Effect.gen(function*() {
      let completed = 0
      for (const operation of operations) {
        yield* checkAbort
        const before = yield* workspace.entry(operation.path)
        replaced.push({ path: operation.path, kind: operation.kind, before })
        yield* perform(operation, before)
        completed++
        yield* options.onProgress(completed, total, operation.path)
        // Let listeners, an abort and an interruption in between files.
        yield* Effect.yieldNow()
      }
      yield* checkAbort
      yield* verify
    })
    // The commit runs uninterruptibly once the files are in place, so it either commits with
    // them in place or fails and they are put back.
    return Effect.uninterruptibleMask((restoreInterruptibility) =>
      Effect.gen(function*() {
        const outcome = yield* Effect.exit(Effect.zipRight(restoreInterruptibility(execute), options.commit))
        if (outcome._tag === "Success") return { keptDirectories, changedMeanwhile } satisfies Applied
        const notRolledBack = yield* putBack
        const note = notRolledBack.length === 0 ? yield* options.afterPutBack : undefined
        const error = new RestoreFailedError({
          sessionId,
          seq,
          detail: describeCause(outcome.cause) + (note === undefined ? "" : `; ${note}`),
          notRolledBack,
          cause: Cause.squash(outcome.cause)
        })
        yield* options.onFailure(error)
        return yield* error
      })
    )
  }

  const removeWriteTemps = (paths: ReadonlyArray<string>) =>
    Effect.forEach(
      new Set(paths.map((file) => posix.dirname(file))),
      (directory) =>
        workspace.list(directory).pipe(
          Effect.flatMap((names) =>
            Effect.forEach(
              names.filter(isWriteTemp),
              (name) => workspace.remove(directory === "." ? name : `${directory}/${name}`),
              { discard: true }
            )
          ),
          Effect.ignore
        ),
      { discard: true }
    )

  return { apply, removeWriteTemps }
}

/** What a restore's files left as they are: directories it had to keep, paths another process changed meanwhile. */
export const notRestored = (applied: Applied): Array<Session.NotCovered> => [
  ...applied.keptDirectories.map((path) => ({ path, reason: "a directory that still holds paths the capture does not cover" })),
  ...applied.changedMeanwhile.map(({ now, path }) => ({
    path,
    reason: `another process changed it while the restore ran (it now holds ${now}): left as it is`
  }))
]

/** Of `paths`, those the restore put back: not a directory it had to keep, nor one another process changed meanwhile. */
export const putBack = (paths: ReadonlyArray<string>, applied: Applied): Array<string> => {
  const left = new Set([...applied.keptDirectories, ...applied.changedMeanwhile.map((changed) => changed.path)])
  return paths.filter((path) => !left.has(path))
}

/** Whether what is at the path is what `operation` put there. */
const holds = (now: EntryState, operation: FileOperation): boolean => {
  switch (operation.kind) {
    case "write":
      return now.kind === "file" && now.mode === (operation.mode & 0o7777) && Buffer.from(now.data).equals(Buffer.from(operation.data))
    case "link":
      return now.kind === "link" && now.target === operation.target
    case "directory":
      return now.kind === "directory" && now.mode === (operation.mode & 0o7777)
    case "delete":
      return now.kind === "absent"
  }
}

const describeEntry = (entry: EntryState): string => {
  switch (entry.kind) {
    case "file":
      return `a file of ${entry.data.length} bytes, mode ${entry.mode.toString(8)}`
    case "link":
      return `a link to ${JSON.stringify(entry.target)}`
    case "directory":
      return "a directory"
    case "absent":
      return "nothing"
    case "other":
      return entry.description
  }
}

/** An `AbortSignal` fired: turned into a `RestoreFailedError` after the files are put back. */
class RestoreAborted extends Data.TaggedError("RestoreAborted") {
  override get message() {
    return "aborted"
  }
}

const describeCause = (cause: Cause.Cause<unknown>): string => {
  if (Cause.isInterruptedOnly(cause)) return "interrupted"
  return messageOf(Cause.squash(cause))
}
