/**
 * After a restore changed files, the session records what it put there as a capture of its
 * own (`restore`), so that the next capture does not take the restore's work for an outside
 * edit. Built from the operations, not from a walk of the workdir: a restore costs what it
 * changes. A failure loses nothing: the next capture sees the same changes, attributed to
 * nobody — a later restore then refuses them rather than guess.
 */
import { Effect, HashMap, Option } from "effect"
import type { CheckpointerService } from "../core/Checkpointer.js"
import type { CapturedPath, CapturedState } from "../core/events.js"
import { sha256Hex } from "../core/internal/sha256.js"
import * as Session from "../core/session.js"
import type * as RestoreFiles from "./restoreFiles.js"
import type { SessionStatesService } from "./SessionStates.js"
import type { WorkspaceService } from "./Workspace.js"
import { captureEvents, type WorkspaceCaptureService } from "./WorkspaceCapture.js"

export interface RecordRestoreDependencies {
  readonly checkpointer: CheckpointerService
  readonly states: SessionStatesService
  readonly workspace: WorkspaceService
  /** Absent or disabled: captures are off, and a restore has nothing to record. */
  readonly capture: WorkspaceCaptureService | undefined
}

/** Records, as a `restore` capture, what `operations` put in the workdir (never fails: a failure is logged). */
export const makeRecordRestore = ({ capture, checkpointer, states, workspace }: RecordRestoreDependencies) =>
(sessionId: string, operations: ReadonlyArray<RestoreFiles.FileOperation>, applied: RestoreFiles.Applied): Effect.Effect<void> =>
  capture === undefined || !capture.enabled ? Effect.void : Effect.gen(function*() {
    const { state } = yield* states.get(sessionId)
    // A session never captured (or cut back to before its first capture) starts its captures at its next prompt.
    if (state.coveredFrom === undefined || state.coverage === undefined) return
    const kept = new Set(applied.keptDirectories)
    // What another process wrote meanwhile is not recorded: the next capture sees it, as an edit from outside.
    const changedMeanwhile = new Set(applied.changedMeanwhile.map((changed) => changed.path))
    const changes: Array<CapturedPath> = []
    for (const operation of operations.filter((operation) => !changedMeanwhile.has(operation.path))) {
      const done: CapturedState | undefined = operation.kind === "write"
        ? { _tag: "content", data: operation.data, mode: operation.mode, size: operation.data.length, sha256: sha256Hex(operation.data) }
        : operation.kind === "link"
        ? { _tag: "link", target: operation.target }
        : operation.kind === "directory"
        ? { _tag: "directory", mode: operation.mode }
        : kept.has(operation.path)
        ? yield* Effect.map(workspace.entry(operation.path), (entry) => (entry.kind === "directory" ? { _tag: "directory" as const, mode: entry.mode } : undefined))
        : { _tag: "missing" }
      if (done !== undefined && !Session.sameKnownState(Option.getOrUndefined(HashMap.get(state.workspace, operation.path)), Session.knownStateOf(done))) {
        changes.push({ path: operation.path, state: done })
      }
    }
    let head = state.head
    for (const event of captureEvents({ _tag: "restore" }, state.coverage, changes)) {
      head = yield* checkpointer.append(sessionId, [event], head)
    }
  }).pipe(Effect.catchAll((error) => Effect.logWarning(`restore of "${sessionId}": recording what it put back failed`, error)))
