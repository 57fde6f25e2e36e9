/**
 * The agent runtime: a tool loop whose every step is an event in the session log. This file
 * composes the parts, each with one job:
 * - `MaintenanceLock` — who may run what when (turns per session, maintenance only when no other work runs);
 * - `turn.ts` — one turn, step by step, through a `SessionWriter` (`SessionWriter.ts`), with the
 *   model's responses mapped by `modelResponse.ts` and the prompt built by `prompt.ts`;
 * - `BackgroundTasks.ts` — background shell tasks and the inbox of their completions;
 * - `AgentEvents.ts` — what the agent reports, to streams and listeners;
 * - `SessionPointer.ts` — which session is current.
 */
import type * as LanguageModel from "@effect/ai/LanguageModel"
import { Clock, Context, Effect, Either, Exit, Layer, Mailbox, Option, Queue, Schema, Stream } from "effect"
import { Checkpointer, type PruneBranchesOptions, type PruneBranchesReport, type SessionInfo, type SessionStats } from "../core/Checkpointer.js"
import { type CheckpointerError, ConfigurationError, type InvalidSessionIdError } from "../core/errors.js"
import type { UserContent } from "../core/events.js"
import {
  AnyString,
  decodeOptions,
  expecting,
  Flag,
  NonNegativeInteger,
  PositiveInteger,
  PositiveMilliseconds,
  quoteValue
} from "../core/internal/options.js"
import type * as Session from "../core/session.js"
import * as FileTools from "../tools/FileTools.js"
import {
  type ForkOptions,
  type ForkResult,
  type InterruptedRestore,
  type MoveOptions,
  type RestoreError,
  type RestoreOptions,
  type RestoreResult,
  TimeTravel
} from "../tools/TimeTravel.js"
import * as TimeTravelModule from "../tools/TimeTravel.js"
import * as SessionStatesModule from "../tools/SessionStates.js"
import * as Workspace from "../tools/Workspace.js"
import * as WorkspaceCapture from "../tools/WorkspaceCapture.js"
import { type AgentEvent, type Emit, type LiteAgentResult, makeAgentEventHub } from "./AgentEvents.js"
import { makeBackgroundTasks } from "./BackgroundTasks.js"
import type { AgentBusyError, SessionsDisabledError } from "./errors.js"
import * as MaintenanceLockModule from "./MaintenanceLock.js"
import { type BackgroundTaskInfo, MaintenanceLock } from "./MaintenanceLock.js"
import { SessionPointer } from "./SessionPointer.js"
import { openSessionWriter } from "./SessionWriter.js"
import { permissionOptionFields, permissionSettings } from "./permissions.js"
import { makeRunTurn, type SendError, type SendOptions } from "./turn.js"
import {
  AutoCompact,
  type CompactError,
  type CompactionEvent,
  type CompactionResult,
  CompactOptions,
  makeCompact
} from "./compaction.js"
import { validateSessionId } from "../core/sessionId.js"

/** What an agent is configured with, wherever it is built (the facade adds its own fields to these). */
export const agentOptionFields = {
  /** Recorded on assistant messages and in the session metadata. */
  modelName: Schema.optional(AnyString),
  systemPrompt: Schema.optional(AnyString),
  /** Model calls per turn at most. Default 25. */
  maxSteps: Schema.optional(PositiveInteger),
  /** Default timeout of a foreground `shell` call. Default 120 000 ms. */
  bashTimeoutMs: Schema.optional(PositiveMilliseconds),
  /** Timeout of a background `shell` task unless the call gives one. Default 30 minutes. */
  backgroundTimeoutMs: Schema.optional(PositiveMilliseconds),
  /** `false`: nothing is meant to persist, and the session methods fail with `SessionsDisabledError`. Default true. */
  sessions: Schema.optional(Flag),
  /** The session to start in (default: a new id). */
  sessionId: Schema.optional(AnyString),
  /**
   * Compact before a model call whose context would pass `thresholdTokens` (`false`: never).
   * `createLiteAgent` defaults to 80% of the provider's context window; the layers to `false`.
   */
  autoCompact: Schema.optional(AutoCompact),
  ...permissionOptionFields
}

/** Options of `LiteAgent.layer`. (The promise facade takes `LiteAgentOptions`: a model, a checkpointer and these.) */
export const LiteAgentLayerOptions = Schema.Struct({
  ...agentOptionFields,
  /** Share the current-session pointer with a facade (advanced; `createLiteAgent` uses it). */
  pointer: Schema.optional(expecting(Schema.instanceOf(SessionPointer), "a SessionPointer"))
})
export interface LiteAgentLayerOptions extends Schema.Schema.Type<typeof LiteAgentLayerOptions> {}

/** `LiteAgent.layerWithWorkdir`'s options: the agent's and the file tools'. */
export const LiteAgentWithWorkdirOptions = Schema.Struct({
  ...LiteAgentLayerOptions.fields,
  ...FileTools.fileToolsOptionFields,
  /** What restore covers: the whole workdir (`capture: "all"`, the default) or the file tools' changes only. */
  workspace: Schema.optional(WorkspaceCapture.WorkspaceOptions)
})
export interface LiteAgentWithWorkdirOptions extends Schema.Schema.Type<typeof LiteAgentWithWorkdirOptions> {}

export const PruneOptions = Schema.Struct({
  /** Prune sessions whose last activity is older than this many milliseconds. */
  olderThanMs: Schema.optional(expecting(Schema.Number.pipe(Schema.finite(), Schema.nonNegative()), "a number of milliseconds >= 0")),
  /** Keep this many of the most recently active sessions whatever their age. */
  keepLast: Schema.optional(NonNegativeInteger)
})
export interface PruneOptions extends Schema.Schema.Type<typeof PruneOptions> {}

export interface LiteAgentService {
  /** The session `send` uses when no id is given. */
  readonly sessionId: Effect.Effect<string>
  /** Run one turn to completion. */
  readonly send: (input: UserContent, options?: SendOptions) => Effect.Effect<LiteAgentResult, SendError>
  /** Run one turn, streaming its events; the last one is `{ type: "result" }`. */
  readonly run: (input: UserContent, options?: SendOptions) => Stream.Stream<AgentEvent, SendError>
  /** Make `sessionId` current, when the Effect runs. */
  readonly resume: (sessionId: string) => Effect.Effect<void, SessionsDisabledError | InvalidSessionIdError>
  /** Rotate to a new empty session, when the Effect runs; returns its id. The old transcript is kept. */
  readonly clear: () => Effect.Effect<string, SessionsDisabledError>
  /** Persisted sessions, most recent first. */
  readonly listSessions: () => Effect.Effect<ReadonlyArray<SessionInfo>, CheckpointerError | SessionsDisabledError>
  readonly deleteSession: (sessionId: string) => Effect.Effect<void, CheckpointerError | SessionsDisabledError | AgentBusyError>
  readonly listCheckpoints: (sessionId: string) => Effect.Effect<ReadonlyArray<Session.Checkpoint>, CheckpointerError | SessionsDisabledError>
  /** What a session costs in storage: `{ events, logBytes, snapshotBytes, snapshots }`. */
  readonly sessionStats: (sessionId: string) => Effect.Effect<SessionStats, CheckpointerError | SessionsDisabledError>
  /**
   * Delete the sessions older than `olderThanMs` (by last activity) and/or beyond the `keepLast`
   * most recent — never the current one — when the agent is idle (like `deleteSession`).
   * Resolves to the ids deleted, most recent first.
   */
  readonly pruneSessions: (
    options: PruneOptions
  ) => Effect.Effect<ReadonlyArray<string>, CheckpointerError | SessionsDisabledError | AgentBusyError | ConfigurationError>
  /**
   * Prune the branches restores, undos and switches left behind (`Checkpointer.pruneBranches`) in
   * every session or `options.sessionId`, when the agent is idle (like `pruneSessions`).
   */
  readonly pruneBranches: (
    options: PruneBranchesOptions
  ) => Effect.Effect<PruneBranchesReport, CheckpointerError | SessionsDisabledError | AgentBusyError>
  /** Roll back to just before a checkpoint (agent must be idle, as `MaintenanceLock` says), then make `sessionId` current. */
  readonly restore: (
    sessionId: string,
    seq: number,
    options?: RestoreOptions
  ) => Effect.Effect<RestoreResult, RestoreError | SessionsDisabledError | AgentBusyError>
  /**
   * The session's restore that was cut short (a crash part-way), if any: until it is finished
   * (`restore` to the same checkpoint) or undone (`undoInterruptedRestore`), `send` refuses with
   * `RestoreInterruptedError`.
   */
  readonly interruptedRestore: (sessionId: string) => Effect.Effect<InterruptedRestore | undefined, CheckpointerError | SessionsDisabledError>
  /** Put back every file the session's interrupted restore changed, as it was before it (agent must be idle, as `MaintenanceLock` says). */
  readonly undoInterruptedRestore: (sessionId: string) => Effect.Effect<RestoreResult, RestoreError | SessionsDisabledError | AgentBusyError>
  /**
   * Undo the session's last move — a restore, a switch or a redo — conversation and workspace
   * (agent must be idle, as `MaintenanceLock` says); repeated, it walks the history of moves back. Then `sessionId` is current.
   */
  readonly undo: (sessionId: string, options?: MoveOptions) => Effect.Effect<RestoreResult, RestoreError | SessionsDisabledError | AgentBusyError>
  /** Redo the session's last undo (agent must be idle, as `MaintenanceLock` says). Then `sessionId` is current. */
  readonly redo: (sessionId: string, options?: MoveOptions) => Effect.Effect<RestoreResult, RestoreError | SessionsDisabledError | AgentBusyError>
  /** Switch to another branch of the session, by its tip's seq from `tree` (agent must be idle, as `MaintenanceLock` says). Then `sessionId` is current. */
  readonly switchBranch: (
    sessionId: string,
    leaf: number,
    options?: MoveOptions
  ) => Effect.Effect<RestoreResult, RestoreError | SessionsDisabledError | AgentBusyError>
  /**
   * Fork the session from just before checkpoint `seq` (or from its tip): a new session with the
   * conversation up to there and the workspace as it was there — in this workdir (the files move,
   * as for a restore; then the fork is current) or written into `options.workdir` (this workdir
   * is left alone; run the fork with an agent there). The agent must be idle, as `MaintenanceLock` says.
   */
  readonly fork: (
    sessionId: string,
    seq?: number,
    options?: ForkOptions
  ) => Effect.Effect<ForkResult, RestoreError | SessionsDisabledError | AgentBusyError>
  /** The session's tree: checkpoints on every branch, the branches, the current one, labels, what undo and redo would do. */
  readonly tree: (sessionId: string) => Effect.Effect<Session.SessionTree, CheckpointerError | SessionsDisabledError>
  /** Name a checkpoint or a branch's tip (an empty name removes it); the session must be idle. */
  readonly label: (
    sessionId: string,
    seq: number,
    name: string
  ) => Effect.Effect<void, CheckpointerError | ConfigurationError | SessionsDisabledError | AgentBusyError>
  /**
   * Summarize the older part of the current session's conversation (or `options.sessionId`'s),
   * when the agent is idle; the summarized events stay in the log. Emits `compaction` events.
   */
  readonly compact: (instructions?: string, options?: CompactOptions) => Effect.Effect<CompactionResult, CompactError | SessionsDisabledError>
  /** The same, streaming its `compaction` events (also emitted to every subscriber); the stream ends after the last. */
  readonly compactRun: (instructions?: string, options?: CompactOptions) => Stream.Stream<CompactionEvent, CompactError | SessionsDisabledError>
  /** Background tasks still running (or whose completion is not yet in the log). */
  readonly backgroundTasks: Effect.Effect<ReadonlyArray<BackgroundTaskInfo>>
  /** Every agent event from now on, as a stream. */
  readonly events: Stream.Stream<AgentEvent>
  /** Call `listener` synchronously for every agent event from now on; returns the unsubscribe function. */
  readonly addListener: (listener: (event: AgentEvent) => void) => Effect.Effect<() => void>
}

export class LiteAgent extends Context.Tag("@lite-agent/agent/LiteAgent")<LiteAgent, LiteAgentService>() {}

export const DEFAULT_MAX_STEPS = 25
export const DEFAULT_BASH_TIMEOUT_MS = 120_000
export const DEFAULT_BACKGROUND_TIMEOUT_MS = 30 * 60_000

export const make = (input: LiteAgentLayerOptions = {}) =>
  Effect.gen(function*() {
    const options = yield* decodeOptions(LiteAgentLayerOptions, input, "agent options")
    const checkpointer = yield* Checkpointer
    const timeTravel = yield* TimeTravel
    const workspace = yield* Workspace.Workspace
    const lock = yield* MaintenanceLock
    const states = yield* SessionStatesModule.fromContextOrNew
    const scope = yield* Effect.scope
    const pointer = options.pointer ?? new SessionPointer(options.sessions !== false, options.sessionId)

    const hub = yield* makeAgentEventHub
    const restoreProgress = yield* timeTravel.subscribe
    yield* Effect.forkIn(Effect.forever(Effect.flatMap(Queue.take(restoreProgress), hub.publish)), scope)

    const capture = Option.getOrUndefined(yield* Effect.serviceOption(WorkspaceCapture.WorkspaceCapture))
    const background = makeBackgroundTasks({
      cwd: workspace.root,
      timeoutMs: options.backgroundTimeoutMs ?? DEFAULT_BACKGROUND_TIMEOUT_MS,
      lock,
      openSession: (sessionId) => openSessionWriter(checkpointer, states, sessionId, hub.publish),
      publish: hub.publish,
      scope,
      capture
    })
    const compaction = yield* makeCompact({ systemPrompt: options.systemPrompt, states })
    const runTurn = yield* makeRunTurn({
      workdir: workspace.root,
      modelName: options.modelName,
      systemPrompt: options.systemPrompt,
      maxSteps: options.maxSteps ?? DEFAULT_MAX_STEPS,
      bashTimeoutMs: options.bashTimeoutMs ?? DEFAULT_BASH_TIMEOUT_MS,
      background,
      states,
      compaction,
      autoCompact: options.autoCompact ?? false,
      permissions: permissionSettings(options),
      capture
    })
    const turn = (input: UserContent, sendOptions: SendOptions | undefined, emit: Emit) =>
      Effect.suspend(() => runTurn(input, sendOptions, pointer.current, emit))
    const compact = (instructions: unknown, input: CompactOptions | undefined, emit: (event: CompactionEvent) => Effect.Effect<void>) =>
      Effect.gen(function*() {
        yield* pointer.requireSessions("compact")
        const compactOptions = yield* decodeOptions(CompactOptions, input, "compact options")
        if (instructions !== undefined && typeof instructions !== "string") {
          return yield* new ConfigurationError({ option: "instructions", detail: `expected a string, got ${quoteValue(instructions)}` })
        }
        const sessionId = yield* validateSessionId(compactOptions.sessionId ?? pointer.current)
        return yield* lock.maintenance("compact", sessionId, compaction.compact(sessionId, instructions, compactOptions, emit))
      })

    /** What `work` emits, as a stream (and to every subscriber), ending with its outcome. */
    const streamed = <A extends AgentEvent, E>(work: (emit: (event: A) => Effect.Effect<void>) => Effect.Effect<unknown, E>) =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const mailbox = yield* Mailbox.make<A, E>()
        yield* work((event) => Effect.zipRight(hub.publish(event), mailbox.offer(event))).pipe(
          Effect.exit,
          Effect.flatMap((exit) => mailbox.done(Exit.asVoid(exit))),
          Effect.forkScoped
        )
        return Mailbox.toStream(mailbox)
      }))

    /** A restore, an undo, a redo or a switch: under the maintenance lock, and the session current after (unless a dry run). */
    const moving = (
      operation: "restore" | "undo" | "redo" | "switchBranch",
      sessionId: string,
      move: Effect.Effect<RestoreResult, RestoreError>
    ) =>
      Effect.gen(function*() {
        yield* pointer.requireSessions(operation)
        const result = yield* lock.maintenance("restore", sessionId, move)
        if (!result.dryRun) pointer.resume(sessionId)
        return result
      })

    const service: LiteAgentService = {
      sessionId: Effect.sync(() => pointer.current),
      send: (input, sendOptions) => turn(input, sendOptions, hub.publish),
      run: (input, sendOptions) => streamed<AgentEvent, SendError>((emit) => turn(input, sendOptions, emit)),
      // The pointer's checks are synchronous (the facade needs them so); an Either is an Effect.
      // Lazy: the current session changes when the Effect runs, not when it is made.
      resume: (sessionId) => Effect.suspend(() => pointer.resume(sessionId)),
      clear: () => Effect.suspend(() => pointer.clear()),
      // The contract lists the most recently active first.
      listSessions: () => Effect.zipRight(pointer.requireSessions("listSessions"), checkpointer.list()),
      deleteSession: (sessionId) =>
        Effect.zipRight(
          pointer.requireSessions("deleteSession"),
          lock.maintenance("deleteSession", sessionId, checkpointer.delete(sessionId))
        ),
      listCheckpoints: (sessionId) => Effect.zipRight(pointer.requireSessions("listCheckpoints"), timeTravel.listCheckpoints(sessionId)),
      sessionStats: (sessionId) => Effect.zipRight(pointer.requireSessions("sessionStats"), checkpointer.stats(sessionId)),
      pruneSessions: (input) =>
        Effect.gen(function*() {
          yield* pointer.requireSessions("pruneSessions")
          const options = yield* decodeOptions(PruneOptions, input, "prune options")
          if (options.olderThanMs === undefined && options.keepLast === undefined) {
            return yield* new ConfigurationError({
              option: "prune options",
              detail: "give olderThanMs, keepLast or both: pruning by nothing would delete every session"
            })
          }
          return yield* lock.maintenance("pruneSessions", pointer.current, Effect.gen(function*() {
            const now = yield* Clock.currentTimeMillis
            const sessions = yield* checkpointer.list()
            const doomed = sessions.filter((session, index) =>
              session.id !== pointer.current &&
              (options.keepLast === undefined || index >= options.keepLast) &&
              (options.olderThanMs === undefined || session.mtime.getTime() < now - options.olderThanMs)
            )
            // A session whose events a fork still shares stays (a fork pruned too goes first).
            const deleted = new Set<string>()
            let pending = doomed
            while (pending.length > 0) {
              const kept: Array<(typeof doomed)[number]> = []
              for (const session of pending) {
                const outcome = yield* Effect.either(checkpointer.delete(session.id))
                if (Either.isRight(outcome)) deleted.add(session.id)
                else if (outcome.left._tag === "SessionForkedError") kept.push(session)
                else return yield* outcome.left
              }
              if (kept.length === pending.length) break
              pending = kept
            }
            return doomed.filter((session) => deleted.has(session.id)).map((session) => session.id)
          }), { everySession: true })
        }),
      pruneBranches: (options) =>
        Effect.zipRight(
          pointer.requireSessions("pruneBranches"),
          lock.maintenance("pruneBranches", options.sessionId ?? pointer.current, checkpointer.pruneBranches(options), { everySession: options.sessionId === undefined })
        ),
      restore: (sessionId, seq, restoreOptions) => moving("restore", sessionId, timeTravel.restore(sessionId, seq, restoreOptions)),
      interruptedRestore: (sessionId) =>
        Effect.zipRight(pointer.requireSessions("interruptedRestore"), timeTravel.interruptedRestore(sessionId)),
      undoInterruptedRestore: (sessionId) =>
        Effect.zipRight(
          pointer.requireSessions("undoInterruptedRestore"),
          lock.maintenance("restore", sessionId, timeTravel.undoInterruptedRestore(sessionId))
        ),
      undo: (sessionId, moveOptions) => moving("undo", sessionId, timeTravel.undo(sessionId, moveOptions)),
      redo: (sessionId, moveOptions) => moving("redo", sessionId, timeTravel.redo(sessionId, moveOptions)),
      switchBranch: (sessionId, leaf, moveOptions) =>
        moving("switchBranch", sessionId, timeTravel.switchBranch(sessionId, leaf, moveOptions)),
      fork: (sessionId, seq, forkOptions) =>
        Effect.gen(function*() {
          yield* pointer.requireSessions("fork")
          const result = yield* lock.maintenance("fork", sessionId, timeTravel.fork(sessionId, seq, forkOptions))
          // In this workdir the files are now the fork's: so is the agent.
          if (!result.dryRun && result.workdir === workspace.root) pointer.resume(result.sessionId)
          return result
        }),
      tree: (sessionId) => Effect.zipRight(pointer.requireSessions("tree"), timeTravel.tree(sessionId)),
      label: (sessionId, seq, name) =>
        Effect.zipRight(pointer.requireSessions("label"), lock.maintenance("label", sessionId, timeTravel.label(sessionId, seq, name))),
      compact: (instructions, compactOptions) => compact(instructions, compactOptions, hub.publish),
      compactRun: (instructions, compactOptions) =>
        streamed<CompactionEvent, CompactError | SessionsDisabledError>((emit) => compact(instructions, compactOptions, emit)),
      backgroundTasks: lock.backgroundTasks,
      events: hub.events,
      addListener: hub.addListener
    }
    return service
  })

/** `LiteAgent` with every service it uses left to provide, its `MaintenanceLock` included (to swap the concurrency rules). */
export const layerWithoutDependencies = (
  options: LiteAgentLayerOptions = {}
): Layer.Layer<
  LiteAgent,
  ConfigurationError,
  Checkpointer | LanguageModel.LanguageModel | TimeTravel | Workspace.Workspace | FileTools.FileTools | MaintenanceLock
> =>
  Layer.scoped(LiteAgent, make(options))

/** `LiteAgent` from a checkpointer, a model, the file tools and time travel, with the default `MaintenanceLock`. */
export const layer = (
  options: LiteAgentLayerOptions = {}
): Layer.Layer<
  LiteAgent,
  ConfigurationError,
  Checkpointer | LanguageModel.LanguageModel | TimeTravel | Workspace.Workspace | FileTools.FileTools
> =>
  layerWithoutDependencies(options).pipe(Layer.provide(MaintenanceLockModule.layer))

/**
 * `LiteAgent` with its file tools and time travel working in `workdir`: what is left to
 * provide is the `Checkpointer` and the `LanguageModel` — swap either by swapping its layer.
 */
export const layerWithWorkdir = (
  workdir: string,
  input: LiteAgentWithWorkdirOptions = {}
) =>
  Layer.unwrapEffect(Effect.map(
    decodeOptions(LiteAgentWithWorkdirOptions, input, "agent options"),
    ({ snapshotMaxBytes, workspace, ...agentOptions }) =>
      layer(agentOptions).pipe(
        Layer.provide(Layer.mergeAll(
          FileTools.layer(snapshotMaxBytes === undefined ? {} : { snapshotMaxBytes }),
          TimeTravelModule.layer
        )),
        Layer.provideMerge(WorkspaceCapture.layer(workdir, {
          ...(snapshotMaxBytes === undefined ? {} : { maxFileBytes: snapshotMaxBytes }),
          ...workspace
        })),
        Layer.provideMerge(Workspace.layer(workdir)),
        // One fold cache for the agent, its file tools and time travel.
        Layer.provide(SessionStatesModule.layer)
      )
  ))
