/**
 * The agent runtime: a tool loop whose every step is an event in the session log.
 *
 * A turn (`send`) folds the session, closes tool calls a crash left open (repair), appends the
 * user's message, and then repeats: build the prompt from the fold, call the model, append its
 * message, run each tool call (file tools record their snapshots and changes themselves), append
 * each result — until the model stops calling tools or the step limit is reached. Nothing is
 * held only in memory between steps: a process that dies mid-turn leaves a log the next turn
 * resumes from.
 *
 * Concurrency rules (the maintenance lock):
 * - turns on one session run one at a time; a second `send` to a busy session waits its turn;
 * - `restore` needs the whole agent idle — no turn running or waiting, no background task
 *   running — and fails at once with `AgentBusyError` otherwise;
 * - while a restore runs, `send` fails at once with `AgentBusyError` (reason "maintenance");
 * - appends carry the expected head, so a write by another process in the middle of a step
 *   fails the turn with `CheckpointConflictError` instead of interleaving silently.
 */
import type * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import { randomBytes } from "node:crypto"
import {
  Chunk,
  Context,
  Effect,
  Exit,
  Layer,
  Mailbox,
  Option,
  PubSub,
  Queue,
  Ref,
  Schema,
  Stream
} from "effect"
import { Checkpointer, type SessionInfo } from "../core/Checkpointer.js"
import { makeKeyedMutex } from "../core/keyedMutex.js"
import { checkPositiveInteger, checkString, firstProblem } from "../core/optionChecks.js"
import {
  CheckpointConflictError,
  type CheckpointerError,
  ConfigurationError,
  InvalidEventError,
  type InvalidSessionIdError
} from "../core/errors.js"
import { AgentBusyError, ModelError, type SessionsDisabledError } from "./errors.js"
import {
  AssistantMessage,
  type AssistantBlock,
  BackgroundCompleted,
  contentText,
  EVENT_FORMAT_VERSION,
  JsonValue,
  RuntimeMessage,
  type SessionEvent,
  SessionMetadata,
  type StoredEvent,
  type TokenUsage,
  ToolResult,
  type UserContent,
  UserMessage
} from "../core/events.js"
import { validateSessionId } from "../core/sessionId.js"
import * as Session from "../core/session.js"
import * as FileTools from "../tools/FileTools.js"
import { type RestoreError, type RestoreOptions, type RestoreProgress, type RestoreResult, TimeTravel } from "../tools/TimeTravel.js"
import * as TimeTravelModule from "../tools/TimeTravel.js"
import * as Workspace from "../tools/Workspace.js"
import { promptOf } from "./prompt.js"
import { SessionPointer } from "./SessionPointer.js"
import { type CommandOutcome, runCommand } from "./Shell.js"
import { agentToolkitForModel, runToolCall, type ToolOutcome } from "./tools.js"

// ---------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------

/** Options of `LiteAgent.layer`. (The promise facade takes `LiteAgentOptions`: a model, a checkpointer and these.) */
export interface LiteAgentLayerOptions {
  /** Recorded on assistant messages and in the session metadata. */
  readonly modelName?: string
  readonly systemPrompt?: string
  /** Model calls per turn at most. Default 25. */
  readonly maxSteps?: number
  /** Default timeout of a foreground `shell` call. Default 120 000 ms. */
  readonly bashTimeoutMs?: number
  /** Timeout of a background `shell` task unless the call gives one. Default 30 minutes. */
  readonly backgroundTimeoutMs?: number
  /** `false`: nothing is meant to persist, and the session methods fail with `SessionsDisabledError`. Default true. */
  readonly sessions?: boolean
  /** The session to start in (default: a new id). */
  readonly sessionId?: string
  /** Share the current-session pointer with a facade (advanced; `createLiteAgent` uses it). */
  readonly pointer?: SessionPointer
}

/** What is wrong with the agent's options, if anything (checked when the layer is built). */
export const agentOptionsProblem = (options: LiteAgentLayerOptions): ConfigurationError | undefined =>
  firstProblem(
    checkString("modelName", options.modelName),
    checkString("systemPrompt", options.systemPrompt),
    checkPositiveInteger("maxSteps", options.maxSteps),
    checkPositiveInteger("bashTimeoutMs", options.bashTimeoutMs, " of milliseconds"),
    checkPositiveInteger("backgroundTimeoutMs", options.backgroundTimeoutMs, " of milliseconds"),
    checkString("sessionId", options.sessionId)
  )

export interface SendOptions {
  /** Run in this session instead of the current one (the current one does not change). */
  readonly sessionId?: string
  /** Override the agent's step limit for this turn. */
  readonly maxSteps?: number
}

export interface ToolCallRecord {
  readonly id: string
  readonly name: string
  readonly input: JsonValue
  readonly output: string
  readonly isError: boolean
}

export interface LiteAgentResult {
  readonly sessionId: string
  /** The text of the model's last message. */
  readonly text: string
  /** Every tool call of the turn, in order, with its result. */
  readonly toolCalls: ReadonlyArray<ToolCallRecord>
  /** Tokens of every model call of the turn, as the provider reported them. */
  readonly usage: TokenUsage
  /** The session's head after the turn. */
  readonly head: number
  /** Model calls made. */
  readonly steps: number
  /** The model's finish reason for its last message ("stop", "length", …), or "step_limit". */
  readonly stopReason: string
}

export interface BackgroundTaskInfo {
  readonly taskId: string
  readonly sessionId: string
  readonly command: string
}

/** What `subscribe` and `query` deliver. */
export type AgentEvent =
  | {
    /** An event persisted in a session's log (user, assistant, tool, file and background records). */
    readonly type: "session_event"
    readonly sessionId: string
    readonly seq: number
    readonly ts: number
    readonly event: SessionEvent
  }
  | { readonly type: "tool_start"; readonly sessionId: string; readonly toolUseId: string; readonly name: string; readonly input: JsonValue }
  | {
    readonly type: "tool_end"
    readonly sessionId: string
    readonly toolUseId: string
    readonly name: string
    readonly isError: boolean
    readonly output: string
  }
  | { readonly type: "background_started"; readonly sessionId: string; readonly taskId: string; readonly command: string }
  | RestoreProgress
  | { readonly type: "result"; readonly result: LiteAgentResult }

export type SendError = CheckpointerError | ModelError | AgentBusyError | InvalidSessionIdError | ConfigurationError

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
  /** Roll back to just before a checkpoint (agent must be idle), then make `sessionId` current. */
  readonly restore: (
    sessionId: string,
    seq: number,
    options?: RestoreOptions
  ) => Effect.Effect<RestoreResult, RestoreError | SessionsDisabledError | AgentBusyError>
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

/** What a tool call left unanswered by a crash gets as its result. */
export const INTERRUPTED_TOOL_RESULT =
  "interrupted: the run stopped before this tool call finished; its effects (if any) are unknown — check before relying on them"

// ---------------------------------------------------------------------------
// Implementation
// ---------------------------------------------------------------------------

interface Activity {
  /** Turns running or waiting, per session. */
  readonly runs: ReadonlyMap<string, number>
  readonly background: ReadonlyMap<string, BackgroundTaskInfo>
  readonly maintenance: { readonly operation: string; readonly sessionId: string } | undefined
}

const withCount = (runs: ReadonlyMap<string, number>, sessionId: string, delta: number) => {
  const next = new Map(runs)
  const count = (next.get(sessionId) ?? 0) + delta
  if (count <= 0) next.delete(sessionId)
  else next.set(sessionId, count)
  return next
}

const toJsonValue = (value: unknown): JsonValue =>
  Option.getOrElse(
    Schema.decodeUnknownOption(JsonValue)(value === undefined ? {} : JSON.parse(JSON.stringify(value)) as unknown),
    (): JsonValue => ({})
  )

const modelError = (sessionId: string, error: AiError.AiError) =>
  new ModelError({
    sessionId,
    detail: error.message,
    cause: error,
    ...(error._tag === "HttpResponseError" ? { status: error.response.status } : {})
  })

/**
 * What a turn that ended abnormally (a crash, a failed model call) left open, closed so the
 * next turn can go on: every tool call without a result gets an error result, and a repair
 * note tells the model what happened. Repair messages are never checkpoints.
 */
export const repairs = (state: Session.SessionState): ReadonlyArray<SessionEvent> => {
  const dangling = Session.pendingToolCalls(state)
  if (dangling.length > 0) {
    return [
      ...dangling.map((call) =>
        new ToolResult({ toolUseId: call.toolUseId, toolName: call.name, content: INTERRUPTED_TOOL_RESULT, isError: true })
      ),
      new RuntimeMessage({
        kind: "repair",
        content: `The previous turn stopped before ${dangling.length} tool call(s) finished (${
          dangling.map((call) => call.name).join(", ")
        }); their effects are unknown.`
      })
    ]
  }
  const last = state.messages.at(state.messages.length - 1)?.event
  if (last?._tag === "UserMessage") {
    return [new RuntimeMessage({ kind: "repair", content: "The previous prompt got no answer: the run stopped before the model replied." })]
  }
  return []
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
  if (current.runs.size > 0) {
    return { reason: "run_in_flight", detail: `turns are running or waiting in session(s) ${[...current.runs.keys()].join(", ")}` }
  }
  if (current.background.size > 0) {
    const tasks = [...current.background.values()].map((task) => `${task.taskId} (${task.command})`)
    return { reason: "background_task", detail: `background task(s) still running: ${tasks.join(", ")}` }
  }
  return undefined
}

export const make = (options: LiteAgentLayerOptions = {}) =>
  Effect.gen(function*() {
    const problem = agentOptionsProblem(options)
    if (problem !== undefined) return yield* problem
    const checkpointer = yield* Checkpointer
    const model = yield* LanguageModel.LanguageModel
    const timeTravel = yield* TimeTravel
    const workspace = yield* Workspace.Workspace
    const fileTools = yield* FileTools.FileTools
    const scope = yield* Effect.scope

    const pointer = options.pointer ?? new SessionPointer(options.sessions !== false, options.sessionId)
    const maxStepsDefault = options.maxSteps ?? DEFAULT_MAX_STEPS
    const bashTimeoutMs = options.bashTimeoutMs ?? DEFAULT_BASH_TIMEOUT_MS
    const backgroundTimeoutMs = options.backgroundTimeoutMs ?? DEFAULT_BACKGROUND_TIMEOUT_MS

    const activity = yield* Ref.make<Activity>({ runs: new Map(), background: new Map(), maintenance: undefined })
    // One turn or drain per session at a time; idle sessions are forgotten.
    const sessionMutex = makeKeyedMutex()
    /** Background completions not yet in their session's log. */
    const inbox = new Map<string, Array<BackgroundCompleted>>()

    // Events: a PubSub for Effect streams, plus synchronous listeners for the promise facade.
    const hub = yield* PubSub.unbounded<AgentEvent>()
    const listeners = new Set<(event: AgentEvent) => void>()
    const publish = (event: AgentEvent) =>
      Effect.zipRight(
        Effect.sync(() => {
          for (const listener of listeners) {
            try {
              listener(event)
            } catch {
              // A listener's own failure must not break the run that published.
            }
          }
        }),
        PubSub.publish(hub, event)
      )
    const restoreProgress = yield* timeTravel.subscribe
    yield* Effect.forkIn(Effect.forever(Effect.flatMap(Queue.take(restoreProgress), publish)), scope)

    const requireSessions = (operation: string) => pointer.requireSessions(operation)

    // -- the session as the running turn sees it ------------------------------------------

    /** A turn's view of its session: the fold up to `state.head`, advanced by what the turn itself appends. */
    interface Cursor {
      readonly sessionId: string
      state: Session.SessionState
      readonly emit: (event: AgentEvent) => Effect.Effect<void>
    }

    const emitStored = (cursor: Cursor, stored: StoredEvent) =>
      cursor.emit({ type: "session_event", sessionId: cursor.sessionId, seq: stored.seq, ts: stored.ts, event: stored.event })

    const advance = (cursor: Cursor, stored: StoredEvent) => {
      cursor.state = Session.step(cursor.state, stored)
      return emitStored(cursor, stored)
    }

    /**
     * Append at the head the cursor knows — a write by anyone else since is a conflict — and
     * fold in exactly what was appended (not what others may have added after it).
     */
    const commit = (cursor: Cursor, events: ReadonlyArray<SessionEvent>) =>
      events.length === 0
        ? Effect.void
        : Effect.flatMap(
          checkpointer.append(cursor.sessionId, events, cursor.state.head),
          () => readOwn(cursor, events.length)
        )

    const readOwn = (cursor: Cursor, count: number) =>
      Stream.runForEach(
        Stream.take(checkpointer.read(cursor.sessionId, { sinceSeq: cursor.state.head }), count),
        (stored) => advance(cursor, stored)
      )

    /**
     * Fold in the records a tool call appended itself (file snapshots and changes carrying its
     * tool-use id). Anything else means another writer got in: the turn stops with a conflict
     * rather than interleave with it.
     */
    const foldToolRecords = (cursor: Cursor, toolUseId: string) =>
      Effect.gen(function*() {
        const expected = cursor.state.head
        const records = yield* Stream.runCollect(checkpointer.read(cursor.sessionId, { sinceSeq: expected }))
        const foreign = Chunk.findFirst(records, (stored) =>
          !((stored.event._tag === "FileSnapshot" || stored.event._tag === "FileChange") && stored.event.toolUseId === toolUseId))
        if (Option.isSome(foreign)) {
          const actual = Option.match(Chunk.last(records), { onNone: () => expected, onSome: (stored) => stored.seq })
          return yield* new CheckpointConflictError({ sessionId: cursor.sessionId, expected, actual })
        }
        for (const stored of records) yield* advance(cursor, stored)
      })

    /**
     * Log this session's background completions, by whoever holds its lock. Taking them from
     * the inbox, appending them and marking their tasks done happen together or not at all: an
     * interruption in between would lose a completion or leave its task "running" for ever.
     */
    const drainInbox = (cursor: Cursor) =>
      Effect.gen(function*() {
        const pending = inbox.get(cursor.sessionId) ?? []
        if (pending.length === 0) return
        inbox.delete(cursor.sessionId)
        const appended = yield* Effect.either(checkpointer.append(cursor.sessionId, pending, cursor.state.head))
        if (appended._tag === "Left") {
          inbox.set(cursor.sessionId, [...pending, ...(inbox.get(cursor.sessionId) ?? [])])
          return yield* Effect.fail(appended.left)
        }
        const done = new Set(pending.map((event) => event.taskId))
        yield* Ref.update(activity, (current) => ({
          ...current,
          background: new Map([...current.background].filter(([taskId]) => !done.has(taskId)))
        }))
        return pending.length
      }).pipe(
        Effect.uninterruptible,
        Effect.flatMap((appended) => (appended === undefined ? Effect.void : readOwn(cursor, appended)))
      )

    const openCursor = (sessionId: string, emit: (event: AgentEvent) => Effect.Effect<void>) =>
      Effect.map(
        Stream.runFold(checkpointer.read(sessionId), Session.emptySessionState, Session.step),
        (state): Cursor => ({ sessionId, state, emit })
      )

    // -- background tasks ----------------------------------------------------------------

    const completionOf = (taskId: string, command: string, outcome: CommandOutcome) =>
      new BackgroundCompleted({
        taskId,
        command,
        exitCode: outcome.exitCode,
        ...(outcome.signal === undefined ? {} : { signal: outcome.signal }),
        output: outcome.spawnError !== undefined
          ? `could not start: ${outcome.spawnError}`
          : outcome.timedOut
          ? `${outcome.output}\n[killed after the ${outcome.timeoutMs ?? backgroundTimeoutMs} ms timeout]`
          : outcome.output,
        outputTruncated: outcome.outputTruncated
      })

    // Registering a task and forking it happen together: a task listed as running always has a fiber that will report it.
    const startBackground = (sessionId: string, command: string, timeoutMs: number | undefined) =>
      Effect.uninterruptible(Effect.gen(function*() {
        const taskId = `bg_${randomBytes(6).toString("hex")}`
        yield* Ref.update(activity, (current) => ({
          ...current,
          background: new Map(current.background).set(taskId, { taskId, sessionId, command })
        }))
        yield* runCommand(command, { cwd: workspace.root, timeoutMs: timeoutMs ?? backgroundTimeoutMs }).pipe(
          Effect.flatMap((outcome) =>
            Effect.sync(() => inbox.set(sessionId, [...(inbox.get(sessionId) ?? []), completionOf(taskId, command, outcome)]))
          ),
          // If a turn holds the session, it logs the completion at its next step; otherwise this does.
          Effect.zipRight(sessionMutex.withKey(sessionId, Effect.flatMap(openCursor(sessionId, publish), drainInbox))),
          Effect.catchAllCause((cause) => Effect.logWarning(`background task ${taskId}: could not record its completion`, cause)),
          Effect.interruptible,
          Effect.forkIn(scope)
        )
        yield* publish({ type: "background_started", sessionId, taskId, command })
        return taskId
      }))

    // -- one turn ------------------------------------------------------------------------

    /**
     * Start `operation` if nothing forbids it, changing the activity in the same step: a turn
     * only needs no maintenance running; maintenance needs the whole agent idle.
     */
    const claim = (operation: string, sessionId: string, needsIdle: boolean, change: (current: Activity) => Activity) =>
      Effect.flatten(Ref.modify(activity, (current): [Effect.Effect<void, AgentBusyError>, Activity] => {
        const busy = whyBusy(current, needsIdle)
        return busy === undefined
          ? [Effect.void, change(current)]
          : [Effect.fail(new AgentBusyError({ operation, sessionId, ...busy })), current]
      }))
    const admit = (operation: string, sessionId: string) =>
      claim(operation, sessionId, false, (current) => ({ ...current, runs: withCount(current.runs, sessionId, 1) }))
    const release = (sessionId: string) =>
      Ref.update(activity, (current) => ({ ...current, runs: withCount(current.runs, sessionId, -1) }))

    const turn = (
      input: UserContent,
      sendOptions: SendOptions,
      emit: (event: AgentEvent) => Effect.Effect<void>
    ): Effect.Effect<LiteAgentResult, SendError> =>
      Effect.gen(function*() {
        const sessionId = yield* validateSessionId(sendOptions.sessionId ?? pointer.current)
        if (contentText(input).trim().length === 0) {
          return yield* new InvalidEventError({ sessionId, index: 0, detail: "the prompt is empty" })
        }
        const maxSteps = sendOptions.maxSteps ?? maxStepsDefault
        if (!(Number.isInteger(maxSteps) && maxSteps >= 1)) {
          return yield* new ConfigurationError({ option: "maxSteps", detail: `must be a positive integer, got ${maxSteps}` })
        }
        const locked = sessionMutex.withKey(sessionId, Effect.gen(function*() {
          const cursor = yield* openCursor(sessionId, emit)

          yield* commit(cursor, repairs(cursor.state))
          yield* drainInbox(cursor)
          const user = new UserMessage({ content: input, origin: "user" })
          yield* commit(
            cursor,
            cursor.state.head === 0
              ? [
                new SessionMetadata({
                  formatVersion: EVENT_FORMAT_VERSION,
                  workdir: workspace.root,
                  ...(options.modelName === undefined ? {} : { model: options.modelName })
                }),
                user
              ]
              : [user]
          )

          const toolCalls: Array<ToolCallRecord> = []
          let usage: TokenUsage = { inputTokens: 0, outputTokens: 0 }
          let text = ""
          let stopReason = "step_limit"
          let steps = 0
          while (steps < maxSteps) {
            steps++
            yield* drainInbox(cursor)
            const response = yield* model.generateText({
              prompt: promptOf(cursor.state, options.systemPrompt),
              toolkit: agentToolkitForModel,
              disableToolCallResolution: true
            }).pipe(Effect.mapError((error) => modelError(sessionId, error)))

            const blocks: Array<AssistantBlock> = []
            for (const part of response.content) {
              // Providers reject empty and whitespace-only text blocks.
              if (part.type === "text" && part.text.trim().length > 0) blocks.push({ type: "text", text: part.text })
              if (part.type === "tool-call") blocks.push({ type: "tool_use", id: part.id, name: part.name, input: toJsonValue(part.params) })
            }
            const stepUsage = {
              inputTokens: Math.max(0, Math.round(response.usage.inputTokens ?? 0)),
              outputTokens: Math.max(0, Math.round(response.usage.outputTokens ?? 0))
            }
            usage = { inputTokens: usage.inputTokens + stepUsage.inputTokens, outputTokens: usage.outputTokens + stepUsage.outputTokens }
            yield* commit(cursor, [
              new AssistantMessage({
                content: blocks,
                stopReason: response.finishReason,
                usage: stepUsage,
                ...(options.modelName === undefined ? {} : { model: options.modelName })
              })
            ])
            text = response.text

            const calls = blocks.filter((block) => block.type === "tool_use")
            if (calls.length === 0) {
              stopReason = response.finishReason
              break
            }
            for (const call of calls) {
              yield* emit({ type: "tool_start", sessionId, toolUseId: call.id, name: call.name, input: call.input })
              const outcome: ToolOutcome = yield* runToolCall(
                { sessionId, toolUseId: call.id, name: call.name, input: call.input, state: cursor.state },
                { workdir: workspace.root, bashTimeoutMs, startBackground }
              ).pipe(Effect.provideService(FileTools.FileTools, fileTools))
              // The file tools appended their snapshot and change records; fold them in first.
              yield* foldToolRecords(cursor, call.id)
              yield* commit(cursor, [
                new ToolResult({ toolUseId: call.id, toolName: call.name, content: outcome.content, isError: outcome.isError })
              ])
              yield* emit({
                type: "tool_end",
                sessionId,
                toolUseId: call.id,
                name: call.name,
                isError: outcome.isError,
                output: outcome.content
              })
              toolCalls.push({ id: call.id, name: call.name, input: call.input, output: outcome.content, isError: outcome.isError })
            }
          }
          const result: LiteAgentResult = { sessionId, text, toolCalls, usage, head: cursor.state.head, steps, stopReason }
          yield* emit({ type: "result", result })
          return result
        }))
        // Counted from admission, so a restore cannot start while this turn waits for the session.
        return yield* Effect.acquireUseRelease(admit("send", sessionId), () => locked, () => release(sessionId))
      })

    // -- maintenance ---------------------------------------------------------------------

    /** Enter maintenance for `operation` if the whole agent is idle; fail with the reason otherwise. */
    const enterMaintenance = (operation: string, sessionId: string) =>
      claim(operation, sessionId, true, (current) => ({ ...current, maintenance: { operation, sessionId } }))
    const leaveMaintenance = Ref.update(activity, (current) => ({ ...current, maintenance: undefined }))

    const service: LiteAgentService = {
      sessionId: Effect.sync(() => pointer.current),
      send: (input, sendOptions = {}) => turn(input, sendOptions, publish),
      run: (input, sendOptions = {}) =>
        Stream.unwrapScoped(Effect.gen(function*() {
          const mailbox = yield* Mailbox.make<AgentEvent, SendError>()
          yield* turn(input, sendOptions, (event) => Effect.zipRight(publish(event), mailbox.offer(event))).pipe(
            Effect.exit,
            Effect.flatMap((exit) => mailbox.done(Exit.asVoid(exit))),
            Effect.forkScoped
          )
          return Mailbox.toStream(mailbox)
        })),
      // The pointer's checks are synchronous (the facade needs them so); an Either is an Effect.
      // Lazy: the current session changes when the Effect runs, not when it is made.
      resume: (sessionId) => Effect.suspend(() => pointer.resume(sessionId)),
      clear: () => Effect.suspend(() => pointer.clear()),
      listSessions: () =>
        Effect.zipRight(
          requireSessions("listSessions"),
          // The contract lists the most recently active first.
          checkpointer.list()
        ),
      deleteSession: (sessionId) =>
        Effect.gen(function*() {
          yield* requireSessions("deleteSession")
          yield* Effect.acquireUseRelease(enterMaintenance("deleteSession", sessionId), () => checkpointer.delete(sessionId), () => leaveMaintenance)
        }),
      listCheckpoints: (sessionId) => Effect.zipRight(requireSessions("listCheckpoints"), timeTravel.listCheckpoints(sessionId)),
      restore: (sessionId, seq, restoreOptions) =>
        Effect.gen(function*() {
          yield* requireSessions("restore")
          const result = yield* Effect.acquireUseRelease(
            enterMaintenance("restore", sessionId),
            () => timeTravel.restore(sessionId, seq, restoreOptions),
            () => leaveMaintenance
          )
          if (!result.dryRun) pointer.resume(sessionId)
          return result
        }),
      backgroundTasks: Effect.map(Ref.get(activity), (current) => [...current.background.values()]),
      events: Stream.fromPubSub(hub),
      addListener: (listener) =>
        Effect.sync(() => {
          listeners.add(listener)
          return () => {
            listeners.delete(listener)
          }
        })
    }
    return service
  })

/** `LiteAgent` from a checkpointer, a model, the file tools and time travel. */
export const layer = (
  options: LiteAgentLayerOptions = {}
): Layer.Layer<
  LiteAgent,
  ConfigurationError,
  Checkpointer | LanguageModel.LanguageModel | TimeTravel | Workspace.Workspace | FileTools.FileTools
> =>
  Layer.scoped(LiteAgent, make(options))

/**
 * `LiteAgent` with its file tools and time travel working in `workdir`: what is left to
 * provide is the `Checkpointer` and the `LanguageModel` — swap either by swapping its layer.
 */
export const layerWithWorkdir = (
  workdir: string,
  options: LiteAgentLayerOptions & FileTools.FileToolsOptions = {}
) =>
  layer(options).pipe(
    Layer.provide(Layer.mergeAll(FileTools.layer(options), TimeTravelModule.layer)),
    Layer.provideMerge(Workspace.layer(workdir))
  )
