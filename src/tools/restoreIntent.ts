/**
 * A restore's intent in the log. `RestoreStarted` (each file's bytes before, and its target) is
 * appended with the expected head before any file changes; the commit closes it — the move of the
 * session's leaf names it, or a `RestoreEnded` marks it ended. A crash part-way leaves it pending: the
 * session refuses other restores (and turns) until the same restore finishes it or its files
 * are put back from it.
 */
import { Chunk, Effect, Stream } from "effect"
import type { CheckpointerService } from "../core/Checkpointer.js"
import { type CheckpointerError, type Refusal, SnapshotBlobError } from "../core/errors.js"
import { LeafMoved, type MoveReason, RestoreEnded, type RestoreFile, RestoreStarted } from "../core/events.js"
import { interruptedRestoreOf, type PendingRestore, type RecordedState } from "../core/session.js"
import { RestoreInterruptedError, type WorkspaceIOError } from "./errors.js"
import type { FileOperation } from "./restoreFiles.js"
import { beforeStateOf, blobRefusal, inApplyOrder, type Preflight } from "./restorePreflight.js"

/**
 * Why a pending intent blocks this restore: it is finished only by the same restore (same
 * checkpoint and conversation, with its files); none when there is no pending intent.
 */
export const pendingRefusals = (
  sessionId: string,
  pending: PendingRestore | undefined,
  request:
    | { readonly checkpoint: number; readonly conversation: boolean; readonly files: boolean }
    | { readonly move: { readonly reason: MoveReason; readonly to: number } }
): ReadonlyArray<Refusal> => {
  if (pending === undefined) return []
  const intent = pending.event
  const same = "move" in request
    ? intent.move?.reason === request.move.reason && intent.move.to === request.move.to
    : intent.checkpoint === request.checkpoint && intent.conversation === request.conversation && request.files
  if (same) return []
  return [{ reason: "restore_interrupted", detail: RestoreInterruptedError.of(sessionId, interruptedRestoreOf(pending)).message }]
}

/** What each file of a pending intent held when its restore began (an empty map without one). */
export const statesBefore = (pending: PendingRestore | undefined): ReadonlyMap<string, RecordedState> =>
  new Map(pending?.event.files.map((file) => [file.path, beforeStateOf(file.before)]) ?? [])

export interface RestoreIntents {
  /** Append the intent with the expected head; its seq. */
  readonly start: (
    sessionId: string,
    intent: (
      | { readonly checkpoint: number }
      | { readonly move: { readonly reason: MoveReason; readonly to: number } }
    ) & { readonly conversation: boolean; readonly files: ReadonlyArray<RestoreFile> },
    expectedHead: number
  ) => Effect.Effect<number, CheckpointerError>
  /** Close the intent at `startedSeq` after its files were finished or put back: mark it ended. */
  readonly close: (sessionId: string, startedSeq: number, outcome: "finished" | "undone", head: number) => Effect.Effect<void, CheckpointerError>
  /**
   * The commit point: the session's leaf moved from `leafBefore` back to `leafAfter` (closing the
   * intent; what it leaves stays in the log as a branch), or, files only, the intent closed.
   */
  readonly commit: (
    sessionId: string,
    restore: {
      readonly conversation: boolean
      readonly reason: MoveReason
      readonly leafBefore: number
      readonly leafAfter: number
      readonly startedSeq: number | undefined
      readonly head: number
    }
  ) => Effect.Effect<void, CheckpointerError>
  /**
   * After a failed restore put its files back: close its intent as undone, or say why it stays
   * (a note for the error's detail).
   */
  readonly closeAfterPutBack: (sessionId: string, startedSeq: number) => Effect.Effect<string | undefined>
  /**
   * What undoing a pending intent takes: each file that holds the restore's target put back to
   * what it held before (one already there needs nothing); refused when a file is at neither
   * state or its bytes are gone from the snapshot store.
   */
  readonly planUndo: (
    sessionId: string,
    pending: PendingRestore
  ) => Effect.Effect<
    { readonly refusals: ReadonlyArray<Refusal>; readonly operations: ReadonlyArray<FileOperation> },
    CheckpointerError | WorkspaceIOError
  >
}

export const make = (checkpointer: CheckpointerService, preflight: Preflight): RestoreIntents => {
  const close: RestoreIntents["close"] = (sessionId, startedSeq, outcome, head) =>
    Effect.asVoid(checkpointer.append(sessionId, [new RestoreEnded({ startedSeq, outcome })], head))

  return {
    start: (sessionId, intent, expectedHead) => checkpointer.append(sessionId, [new RestoreStarted(intent)], expectedHead),
    close,
    commit: (sessionId, { conversation, head, leafAfter, leafBefore, reason, startedSeq }) => {
      const committed = conversation
        ? Effect.asVoid(checkpointer.append(
          sessionId,
          [new LeafMoved({ from: leafBefore, to: leafAfter, reason, ...(startedSeq === undefined ? {} : { restoreStarted: startedSeq }) })],
          head
        ))
        : startedSeq === undefined
        ? Effect.void
        : close(sessionId, startedSeq, "finished", head)
      if (startedSeq === undefined) return committed
      // Another process may have finished this very restore meanwhile (it found it under way and
      // took it for one a crash cut short): its commit is this one's, and the files are what both
      // wrote — putting back what this one found would undo the other's work.
      const finishedByAnother = Effect.map(Stream.runCollect(checkpointer.read(sessionId, { sinceSeq: head })), (events) =>
        Chunk.some(events, ({ event }) =>
          conversation
            ? event._tag === "LeafMoved" && event.restoreStarted === startedSeq && event.to === leafAfter
            : event._tag === "RestoreEnded" && event.startedSeq === startedSeq && event.outcome === "finished"))
      return Effect.catchTag(committed, "CheckpointConflictError", (conflict) =>
        Effect.flatMap(finishedByAnother, (finished) => (finished ? Effect.void : Effect.fail(conflict))))
    },
    closeAfterPutBack: (sessionId, startedSeq) =>
      Effect.flatMap(checkpointer.head(sessionId), (now) => close(sessionId, startedSeq, "undone", now)).pipe(
        Effect.as(undefined),
        Effect.catchAll((error) => Effect.succeed(`its intent stays in the log (${error.message}): undoInterruptedRestore closes it`))
      ),
    planUndo: (sessionId, pending) =>
      Effect.gen(function*() {
        const refusals: Array<Refusal> = []
        const operations: Array<FileOperation> = []
        for (const file of pending.event.files) {
          const checked = yield* preflight.check(file.path, beforeStateOf(file.before), [file.target], "the interrupted restore")
          if (checked.kind === "refused") refusals.push(checked.refusal)
          if (checked.kind !== "ready") continue
          if (file.before._tag === "missing") {
            operations.push({ path: file.path, kind: "delete" })
            continue
          }
          if (file.before._tag === "link" || file.before._tag === "directory") {
            operations.push(
              file.before._tag === "link"
                ? { path: file.path, kind: "link", target: file.before.target }
                : { path: file.path, kind: "directory", mode: file.before.mode }
            )
            continue
          }
          const data = file.before._tag === "content" ? file.before.data : yield* preflight.storedBytes(sessionId, file.before.sha256)
          if (data instanceof SnapshotBlobError) refusals.push(blobRefusal(file.path, data))
          else operations.push({ path: file.path, kind: "write", data, mode: file.before.mode })
        }
        return { refusals, operations: inApplyOrder(operations) }
      })
  }
}
