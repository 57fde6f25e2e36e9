/**
 * Background `shell` tasks: started by a tool call, run in the agent's scope, and reported in
 * their session's log as a `BackgroundCompleted` record. A completion waits in an inbox until
 * whoever holds the session logs it: the running turn at its next step, or the task itself
 * once the session is free.
 */
import { randomBytes } from "node:crypto"
import { Effect, type Scope } from "effect"
import type { CheckpointerError } from "../core/errors.js"
import { BackgroundCompleted } from "../core/events.js"
import type { MaintenanceLockService } from "./MaintenanceLock.js"
import type { Emit } from "./AgentEvents.js"
import type { SessionWriter } from "./SessionWriter.js"
import { type CommandOutcome, describeStopped, runCommand } from "./Shell.js"
import type { WorkspaceCaptureService } from "../tools/WorkspaceCapture.js"

export interface BackgroundTasks {
  /** Start `command`; returns its task id at once. */
  readonly start: (sessionId: string, command: string, timeoutMs: number | undefined) => Effect.Effect<string>
  /** Log the completions waiting for the writer's session. The caller holds the session. */
  readonly drain: (writer: SessionWriter) => Effect.Effect<void, CheckpointerError>
}

export interface BackgroundTasksSettings {
  readonly cwd: string
  /** Timeout of a task whose call gives none. */
  readonly timeoutMs: number
  readonly lock: MaintenanceLockService
  /** The session as a writer that does not run a turn sees it. */
  readonly openSession: (sessionId: string) => Effect.Effect<SessionWriter, CheckpointerError>
  readonly publish: Emit
  /** Where the tasks run: closing it stops them. */
  readonly scope: Scope.Scope
  /** Workspace captures: what a task changed is captured, as its, when its completion is logged. */
  readonly capture: WorkspaceCaptureService | undefined
}

const completionOf = (taskId: string, command: string, outcome: CommandOutcome, defaultTimeoutMs: number) => {
  // A task ends with its command too: what it left running (`server &`) was stopped, and the model is told.
  const stopped = describeStopped(outcome)
  return new BackgroundCompleted({
    taskId,
    command,
    exitCode: outcome.exitCode,
    ...(outcome.signal === undefined ? {} : { signal: outcome.signal }),
    output: outcome.spawnError !== undefined
      ? `could not start: ${outcome.spawnError}`
      : outcome.timedOut
      ? `${outcome.output}\n[killed after the ${outcome.timeoutMs ?? defaultTimeoutMs} ms timeout]`
      : stopped !== undefined
      ? `${outcome.output}\n[${stopped}]`
      : outcome.output,
    outputTruncated: outcome.outputTruncated
  })
}

export const makeBackgroundTasks = (settings: BackgroundTasksSettings): BackgroundTasks => {
  const { lock } = settings
  /** Completions not yet in their session's log. */
  const inbox = new Map<string, Array<BackgroundCompleted>>()

  /**
   * Taking the completions from the inbox, appending them and marking their tasks logged
   * happen together or not at all: an interruption in between would lose a completion or
   * leave its task "running" for ever.
   */
  const drain = (writer: SessionWriter) =>
    Effect.gen(function*() {
      const pending = inbox.get(writer.sessionId) ?? []
      if (pending.length === 0) return 0
      // What the tasks changed in the workdir since the last capture, theirs (logged before their completions).
      const taken = settings.capture === undefined
        ? { events: [], problems: [] }
        : yield* settings.capture.capture(writer.sessionId, writer.state, { _tag: "task", taskId: pending[0]!.taskId })
      if (taken.problems.length > 0) {
        yield* Effect.logWarning(`the workspace capture after a background task could not read ${taken.problems.length} path(s); they are recorded as unavailable`)
      }
      const captured = taken.events
      inbox.delete(writer.sessionId)
      const appended = yield* Effect.either(writer.append([...captured, ...pending]))
      if (appended._tag === "Left") {
        inbox.set(writer.sessionId, [...pending, ...(inbox.get(writer.sessionId) ?? [])])
        return yield* Effect.fail(appended.left)
      }
      yield* lock.backgroundLogged(new Set(pending.map((event) => event.taskId)))
      return captured.length + pending.length
    }).pipe(Effect.uninterruptible, Effect.flatMap(writer.foldOwn))

  // Registering a task and forking it happen together: a task listed as running always has a fiber that will report it.
  const start = (sessionId: string, command: string, timeoutMs: number | undefined) =>
    Effect.uninterruptible(Effect.gen(function*() {
      const taskId = `bg_${randomBytes(6).toString("hex")}`
      yield* lock.backgroundStarted({ taskId, sessionId, command })
      yield* runCommand(command, { cwd: settings.cwd, timeoutMs: timeoutMs ?? settings.timeoutMs }).pipe(
        Effect.flatMap((outcome) =>
          Effect.sync(() =>
            inbox.set(sessionId, [...(inbox.get(sessionId) ?? []), completionOf(taskId, command, outcome, settings.timeoutMs)])
          )
        ),
        // If a turn holds the session, it logs the completion at its next step; otherwise this does.
        Effect.zipRight(lock.withSession(sessionId, Effect.flatMap(settings.openSession(sessionId), drain))),
        Effect.catchAllCause((cause) => Effect.logWarning(`background task ${taskId}: could not record its completion`, cause)),
        Effect.interruptible,
        Effect.forkIn(settings.scope)
      )
      yield* settings.publish({ type: "background_started", sessionId, taskId, command })
      return taskId
    }))

  return { start, drain }
}
