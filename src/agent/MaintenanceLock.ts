/**
 * The agent's concurrency rules, as a Layer (swap it to change them; compaction takes the same
 * lock):
 * - turns on one session run one at a time; a second turn of a busy session waits its turn;
 * - maintenance of a session (restore, undo, fork, delete, label, compact) fails at once with
 *   `AgentBusyError` while a turn of that session runs, asks or waits, while a turn of any other
 *   session is working, or while a background task runs;
 * - a turn waiting for a permission answer (or queued behind one) is not working: the sessions of
 *   an agent share its workdir, and what must not happen is a restore rewriting files while a
 *   tool or a capture of another turn is using them. A turn that asks runs nothing until it has
 *   its answer; then it waits for maintenance under way to end, and records what changed while it
 *   asked as the user's edits (a checkpoint capture, turn.ts) before its next tool runs. A
 *   question that nobody answers thus never holds up other sessions' maintenance. A turn that
 *   gets its session while such maintenance runs waits for it to end before its first step;
 * - maintenance over every session (pruning) needs every turn over, asking or not;
 * - while maintenance runs, a turn fails at once with `AgentBusyError` (reason "maintenance").
 *
 * Within one process only: across processes, appends with an expected head are what keep two
 * writers from interleaving.
 */
import { Context, Deferred, Effect, Exit, Layer, Ref } from "effect"
import { makeKeyedMutex } from "../backends/internal/keyedMutex.js"
import { AgentBusyError } from "./errors.js"

export interface BackgroundTaskInfo {
  readonly taskId: string
  readonly sessionId: string
  readonly command: string
}

export interface MaintenanceOptions {
  /** The maintenance touches every session (pruning): it needs every turn over, asking or not. */
  readonly everySession?: boolean
}

export interface MaintenanceLockService {
  /**
   * Run a turn of `sessionId`: refused while maintenance runs, otherwise counted as activity
   * from this moment (so maintenance of its session cannot start while it waits) and run once it
   * holds the session and no maintenance runs.
   */
  readonly turn: <A, E, R>(
    operation: string,
    sessionId: string,
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | AgentBusyError, R>
  /**
   * Within a turn of `sessionId`: `effect` waits for a permission answer and does nothing else,
   * so maintenance of other sessions may run meanwhile; when it ends, the turn goes on once no
   * maintenance runs.
   */
  readonly whileAsking: <A, E, R>(sessionId: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Hold `sessionId` for work that is not a turn (logging background completions between turns). */
  readonly withSession: <A, E, R>(sessionId: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Run maintenance of `sessionId` if the rules above allow it; fail at once with the reason otherwise. */
  readonly maintenance: <A, E, R>(
    operation: string,
    sessionId: string,
    effect: Effect.Effect<A, E, R>,
    options?: MaintenanceOptions
  ) => Effect.Effect<A, E | AgentBusyError, R>
  /** A background task is running: maintenance waits for its completion to be logged. */
  readonly backgroundStarted: (task: BackgroundTaskInfo) => Effect.Effect<void>
  /** These tasks' completions are in their session's log. */
  readonly backgroundLogged: (taskIds: ReadonlySet<string>) => Effect.Effect<void>
  /** Background tasks running (or whose completion is not yet in the log). */
  readonly backgroundTasks: Effect.Effect<ReadonlyArray<BackgroundTaskInfo>>
}

export class MaintenanceLock extends Context.Tag("@lite-agent/agent/MaintenanceLock")<
  MaintenanceLock,
  MaintenanceLockService
>() {}

interface Activity {
  /** Turns running, asking or waiting for their session, per session. */
  readonly turns: ReadonlyMap<string, number>
  /** Sessions whose turn holds the session (one at a time per session): it may be working. */
  readonly holding: ReadonlySet<string>
  /** Of those, the sessions whose turn waits for a permission answer: not working. */
  readonly asking: ReadonlySet<string>
  readonly background: ReadonlyMap<string, BackgroundTaskInfo>
  /** The maintenance running, and what completes when it is over. */
  readonly maintenance: { readonly operation: string; readonly sessionId: string; readonly over: Deferred.Deferred<void> } | undefined
}

const withCount = (turns: ReadonlyMap<string, number>, sessionId: string, delta: number) => {
  const next = new Map(turns)
  const count = (next.get(sessionId) ?? 0) + delta
  if (count <= 0) next.delete(sessionId)
  else next.set(sessionId, count)
  return next
}

const withMember = (set: ReadonlySet<string>, sessionId: string, member: boolean) => {
  const next = new Set(set)
  if (member) next.add(sessionId)
  else next.delete(sessionId)
  return next
}

const sessionList = (sessions: Iterable<string>) => [...sessions].map((sessionId) => `"${sessionId}"`).join(", ")

/** What is about to start: a turn (refused only by maintenance), or maintenance of a session or of every session. */
type Starting =
  | { readonly _tag: "turn" }
  | { readonly _tag: "maintenance"; readonly sessionId: string; readonly everySession: boolean }

/** Why an operation cannot start, or undefined. */
const whyBusy = (
  current: Activity,
  starting: Starting
): { readonly reason: AgentBusyError["reason"]; readonly detail: string } | undefined => {
  if (current.maintenance !== undefined) {
    return {
      reason: "maintenance",
      detail: `${current.maintenance.operation} of session "${current.maintenance.sessionId}" is running; retry when it is done`
    }
  }
  if (starting._tag === "turn") return undefined
  if (starting.everySession && current.turns.size > 0) {
    return { reason: "run_in_flight", detail: `turns are running or waiting in session(s) ${sessionList(current.turns.keys())}` }
  }
  if (current.turns.has(starting.sessionId)) {
    return {
      reason: "run_in_flight",
      detail: `a turn of session "${starting.sessionId}" is running, waiting for a permission answer or queued; retry when it is over`
    }
  }
  const working = [...current.holding].filter((sessionId) => !current.asking.has(sessionId))
  if (working.length > 0) {
    return {
      reason: "run_in_flight",
      detail: `turns are running in session(s) ${sessionList(working)} (a turn waiting for a permission answer would not count)`
    }
  }
  if (current.background.size > 0) {
    const tasks = [...current.background.values()].map((task) => `${task.taskId} (${task.command})`)
    return { reason: "background_task", detail: `background task(s) still running: ${tasks.join(", ")}` }
  }
  return undefined
}

/** The rules above, for the fibers of this process. */
export const make: Effect.Effect<MaintenanceLockService> = Effect.gen(function*() {
  const activity = yield* Ref.make<Activity>({
    turns: new Map(),
    holding: new Set(),
    asking: new Set(),
    background: new Map(),
    maintenance: undefined
  })
  // One holder per session at a time; idle sessions are forgotten.
  const sessions = makeKeyedMutex()

  /** Start `operation` if nothing forbids it, changing the activity in the same step. */
  const claim = (operation: string, sessionId: string, starting: Starting, change: (current: Activity) => Activity) =>
    Effect.flatten(Ref.modify(activity, (current): [Effect.Effect<void, AgentBusyError>, Activity] => {
      const busy = whyBusy(current, starting)
      return busy === undefined
        ? [Effect.void, change(current)]
        : [Effect.fail(new AgentBusyError({ operation, sessionId, ...busy })), current]
    }))

  /**
   * Apply `change` once no maintenance runs (in the same step as that check). Only the wait is
   * interruptible, through `restore`: once changed, the caller's uninterruptible region goes on
   * to install what undoes it.
   */
  const whenNoMaintenance = (
    change: (current: Activity) => Activity,
    restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  ): Effect.Effect<void> =>
    Effect.flatMap(
      Ref.modify(activity, (current): [Deferred.Deferred<void> | undefined, Activity] =>
        current.maintenance === undefined ? [undefined, change(current)] : [current.maintenance.over, current]),
      (over) => over === undefined ? Effect.void : Effect.zipRight(restore(Deferred.await(over)), whenNoMaintenance(change, restore))
    )

  /** A turn that holds its session: working from when no maintenance runs until it ends. */
  const holdingSession = <A, E, R>(sessionId: string, effect: Effect.Effect<A, E, R>) =>
    Effect.uninterruptibleMask((restore) =>
      Effect.zipRight(
        whenNoMaintenance((current) => ({ ...current, holding: withMember(current.holding, sessionId, true) }), restore),
        Effect.ensuring(
          restore(effect),
          Ref.update(activity, (current) => ({ ...current, holding: withMember(current.holding, sessionId, false) }))
        )
      )
    )

  return {
    turn: (operation, sessionId, effect) =>
      Effect.acquireUseRelease(
        claim(operation, sessionId, { _tag: "turn" }, (current) => ({ ...current, turns: withCount(current.turns, sessionId, 1) })),
        () => sessions.withKey(sessionId, holdingSession(sessionId, effect)),
        () => Ref.update(activity, (current) => ({ ...current, turns: withCount(current.turns, sessionId, -1) }))
      ),
    whileAsking: (sessionId, effect) =>
      Effect.uninterruptibleMask((restore) =>
        Effect.zipRight(
          Ref.update(activity, (current) => ({ ...current, asking: withMember(current.asking, sessionId, true) })),
          restore(effect).pipe(Effect.onExit((exit) => {
            const working = (current: Activity) => ({ ...current, asking: withMember(current.asking, sessionId, false) })
            // Answered: the turn's next step may touch the workdir, so it waits for maintenance
            // under way to end. Interrupted: the turn is ending and runs no tool.
            return Exit.isInterrupted(exit) ? Ref.update(activity, working) : whenNoMaintenance(working, (wait) => wait)
          }))
        )
      ),
    withSession: sessions.withKey,
    maintenance: (operation, sessionId, effect, options) =>
      Effect.acquireUseRelease(
        Effect.flatMap(Deferred.make<void>(), (over) =>
          Effect.as(
            claim(
              operation,
              sessionId,
              { _tag: "maintenance", sessionId, everySession: options?.everySession === true },
              (current) => ({ ...current, maintenance: { operation, sessionId, over } })
            ),
            over
          )),
        () => effect,
        (over) => Effect.zipRight(Ref.update(activity, (current) => ({ ...current, maintenance: undefined })), Deferred.succeed(over, undefined))
      ),
    backgroundStarted: (task) =>
      Ref.update(activity, (current) => ({ ...current, background: new Map(current.background).set(task.taskId, task) })),
    backgroundLogged: (taskIds) =>
      Ref.update(activity, (current) => ({
        ...current,
        background: new Map([...current.background].filter(([taskId]) => !taskIds.has(taskId)))
      })),
    backgroundTasks: Effect.map(Ref.get(activity), (current) => [...current.background.values()])
  }
})

export const layer: Layer.Layer<MaintenanceLock> = Layer.effect(MaintenanceLock, make)
