/**
 * The agent's concurrency rules, as a Layer (swap it to change them; compaction takes the same
 * lock):
 * - turns on one session run one at a time; a second turn of a busy session waits its turn;
 * - maintenance (restore, deleting a session) needs the whole agent idle — no turn running or
 *   waiting, no background task running — and fails at once with `AgentBusyError` otherwise;
 * - while maintenance runs, a turn fails at once with `AgentBusyError` (reason "maintenance").
 *
 * Within one process only: across processes, appends with an expected head are what keep two
 * writers from interleaving.
 */
import { Context, Effect, Layer, Ref } from "effect"
import { makeKeyedMutex } from "../backends/internal/keyedMutex.js"
import { AgentBusyError } from "./errors.js"

export interface BackgroundTaskInfo {
  readonly taskId: string
  readonly sessionId: string
  readonly command: string
}

export interface MaintenanceLockService {
  /**
   * Run a turn of `sessionId`: refused while maintenance runs, otherwise counted as activity
   * from this moment (so maintenance cannot start while it waits) and run once it holds the
   * session.
   */
  readonly turn: <A, E, R>(
    operation: string,
    sessionId: string,
    effect: Effect.Effect<A, E, R>
  ) => Effect.Effect<A, E | AgentBusyError, R>
  /** Hold `sessionId` for work that is not a turn (logging background completions between turns). */
  readonly withSession: <A, E, R>(sessionId: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Run maintenance if the whole agent is idle; fail at once with the reason otherwise. */
  readonly maintenance: <A, E, R>(
    operation: string,
    sessionId: string,
    effect: Effect.Effect<A, E, R>
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
  /** Turns running or waiting, per session. */
  readonly turns: ReadonlyMap<string, number>
  readonly background: ReadonlyMap<string, BackgroundTaskInfo>
  readonly maintenance: { readonly operation: string; readonly sessionId: string } | undefined
}

const withCount = (turns: ReadonlyMap<string, number>, sessionId: string, delta: number) => {
  const next = new Map(turns)
  const count = (next.get(sessionId) ?? 0) + delta
  if (count <= 0) next.delete(sessionId)
  else next.set(sessionId, count)
  return next
}

/** Why an operation cannot start, or undefined: maintenance blocks everything; `needsIdle` also waits for no turn and no background task. */
const whyBusy = (
  current: Activity,
  needsIdle: boolean
): { readonly reason: AgentBusyError["reason"]; readonly detail: string } | undefined => {
  if (current.maintenance !== undefined) {
    return {
      reason: "maintenance",
      detail: `${current.maintenance.operation} of session "${current.maintenance.sessionId}" is running; retry when it is done`
    }
  }
  if (!needsIdle) return undefined
  if (current.turns.size > 0) {
    return { reason: "run_in_flight", detail: `turns are running or waiting in session(s) ${[...current.turns.keys()].join(", ")}` }
  }
  if (current.background.size > 0) {
    const tasks = [...current.background.values()].map((task) => `${task.taskId} (${task.command})`)
    return { reason: "background_task", detail: `background task(s) still running: ${tasks.join(", ")}` }
  }
  return undefined
}

/** The rules above, for the fibers of this process. */
export const make: Effect.Effect<MaintenanceLockService> = Effect.gen(function*() {
  const activity = yield* Ref.make<Activity>({ turns: new Map(), background: new Map(), maintenance: undefined })
  // One holder per session at a time; idle sessions are forgotten.
  const sessions = makeKeyedMutex()

  /** Start `operation` if nothing forbids it, changing the activity in the same step. */
  const claim = (operation: string, sessionId: string, needsIdle: boolean, change: (current: Activity) => Activity) =>
    Effect.flatten(Ref.modify(activity, (current): [Effect.Effect<void, AgentBusyError>, Activity] => {
      const busy = whyBusy(current, needsIdle)
      return busy === undefined
        ? [Effect.void, change(current)]
        : [Effect.fail(new AgentBusyError({ operation, sessionId, ...busy })), current]
    }))

  return {
    turn: (operation, sessionId, effect) =>
      Effect.acquireUseRelease(
        claim(operation, sessionId, false, (current) => ({ ...current, turns: withCount(current.turns, sessionId, 1) })),
        () => sessions.withKey(sessionId, effect),
        () => Ref.update(activity, (current) => ({ ...current, turns: withCount(current.turns, sessionId, -1) }))
      ),
    withSession: sessions.withKey,
    maintenance: (operation, sessionId, effect) =>
      Effect.acquireUseRelease(
        claim(operation, sessionId, true, (current) => ({ ...current, maintenance: { operation, sessionId } })),
        () => effect,
        () => Ref.update(activity, (current) => ({ ...current, maintenance: undefined }))
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
