/**
 * One turn (`send`): fold the session, close what a crash left open (repairs), append the
 * user's message, then repeat — build the prompt from the fold, call the model (its text
 * reported as it streams, `text_delta`), append its whole message, run each tool call (file tools record their snapshots and changes themselves),
 * append each result — until the model stops calling tools or the step limit is reached.
 * Nothing is held only in memory between steps: a process that dies mid-turn leaves a log the
 * next turn resumes from.
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import { Effect, Either, Schema } from "effect"
import { displayPath } from "../core/pathNames.js"
import { Checkpointer } from "../core/Checkpointer.js"
import { type CheckpointerError, ConfigurationError, type InvalidSessionIdError } from "../core/errors.js"
import {
  type CaptureCause,
  contentText,
  EVENT_FORMAT_VERSION,
  type SessionEvent,
  SessionMetadata,
  type PermissionDecided,
  type TokenUsage,
  ToolResult,
  type ToolUseBlock,
  UserContent,
  UserMessage
} from "../core/events.js"
import { AnyString, decodeOptions, Flag, PositiveInteger, quoteValue } from "../core/internal/options.js"
import * as Session from "../core/session.js"
import { validateSessionId } from "../core/sessionId.js"
import { RestoreInterruptedError, SessionWorkdirError } from "../tools/errors.js"
import { homeFor, rehomed } from "../tools/sessionWorkdir.js"
import * as FileTools from "../tools/FileTools.js"
import type { SessionStatesService } from "../tools/SessionStates.js"
import type { CaptureProblem, Emit, LiteAgentResult, ToolCallRecord } from "./AgentEvents.js"
import type { BackgroundTasks } from "./BackgroundTasks.js"
import type { AgentBusyError, ModelError } from "./errors.js"
import { MaintenanceLock } from "./MaintenanceLock.js"
import { gatherReply, modelError, modelStepOf } from "./modelResponse.js"
import { promptOf } from "./prompt.js"
import { repairs } from "./repairs.js"
import { openSessionWriter, type SessionWriter } from "./SessionWriter.js"
import type { WorkspaceCaptureService } from "../tools/WorkspaceCapture.js"
import { agentToolkitForModel, runToolCall, type ToolOutcome } from "./tools.js"
// A capture after each call of a tool that can change the workspace records what it did.
import { CHANGING_TOOLS, decide, deniedResult, NOT_RUN_STOPPED, type PermissionSettings } from "./permissions.js"
import type { AutoCompact, makeCompact } from "./compaction.js"

type Compaction = Effect.Effect.Success<ReturnType<typeof makeCompact>>

export const SendOptions = Schema.Struct({
  /** Run in this session instead of the current one (the current one does not change). */
  sessionId: Schema.optional(AnyString),
  /** Override the agent's step limit for this turn. */
  maxSteps: Schema.optional(PositiveInteger),
  /**
   * The session's log names another workdir: make this agent's workdir the session's (recorded as
   * an event; the turn's first capture then takes what differs for the user's edits) rather than
   * refuse with `SessionWorkdirError`. Default false.
   */
  rehome: Schema.optional(Flag)
})
export interface SendOptions extends Schema.Schema.Type<typeof SendOptions> {}

export type SendError =
  | CheckpointerError
  | ModelError
  | AgentBusyError
  | InvalidSessionIdError
  | ConfigurationError
  | RestoreInterruptedError
  | SessionWorkdirError

export interface TurnSettings {
  readonly workdir: string
  readonly modelName: string | undefined
  readonly systemPrompt: string | undefined
  readonly maxSteps: number
  readonly bashTimeoutMs: number
  readonly background: BackgroundTasks
  /** The folds the agent shares with its file tools and time travel. */
  readonly states: SessionStatesService
  readonly compaction: Compaction
  readonly autoCompact: AutoCompact
  /** Who may run which tool (see permissions.ts). */
  readonly permissions: PermissionSettings
  /** Workspace captures (absent: only the file tools' own snapshots, as with `capture: "tools"`). */
  readonly capture: WorkspaceCaptureService | undefined
}


/** A turn (in `currentSessionId` unless the options name another), emitting as it goes; the last event is `{ type: "result" }`. */
export type RunTurn = (
  input: UserContent,
  sendOptions: SendOptions | undefined,
  currentSessionId: string,
  emit: Emit
) => Effect.Effect<LiteAgentResult, SendError>

export const makeRunTurn = (
  settings: TurnSettings
): Effect.Effect<RunTurn, never, Checkpointer | LanguageModel.LanguageModel | FileTools.FileTools | MaintenanceLock> =>
  Effect.gen(function*() {
    const checkpointer = yield* Checkpointer
    const model = yield* LanguageModel.LanguageModel
    const fileTools = yield* FileTools.FileTools
    const lock = yield* MaintenanceLock
    const { background, modelName } = settings

    /**
     * Commit `events` after a capture attributed to `cause` (when captures are on): all but the
     * last of a large capture's events alone, the last with `events` (so a checkpoint's capture
     * sits right before its prompt). `changedOnly`: no capture event when nothing changed.
     */
    const commitWithCapture = (
      writer: SessionWriter,
      cause: CaptureCause,
      events: ReadonlyArray<SessionEvent>,
      problems: Array<CaptureProblem>,
      changedOnly = false
    ) =>
      Effect.gen(function*() {
        const taken = settings.capture === undefined ? { events: [], problems: [] } : yield* settings.capture.capture(writer.sessionId, writer.state, cause)
        for (const problem of taken.problems) problems.push({ cause, ...problem })
        if (taken.problems.length > 0) {
          const first = taken.problems[0]!
          yield* Effect.logWarning(
            `the workspace capture left ${taken.problems.length} path(s) not covered (${displayPath(first.path).slice(0, 200)}: ${first.detail}); ` +
              "they are recorded as unavailable and in the turn's captureProblems"
          )
        }
        const captured = changedOnly ? taken.events.filter((event) => event.changes.length > 0 || event.failure !== undefined) : taken.events
        for (const event of captured.slice(0, -1)) yield* writer.commit([event])
        yield* writer.commit([...captured.slice(-1), ...events])
      })

    /**
     * A call's result in the log, reported and kept for the turn's result: after a capture of what
     * it did when it ran a changing tool; with `before` (its denial) in the same append when it did not run.
     */
    const commitResult = (
      writer: SessionWriter,
      call: ToolUseBlock,
      outcome: ToolOutcome,
      emit: Emit,
      toolCalls: Array<ToolCallRecord>,
      problems: Array<CaptureProblem>,
      run: { readonly ran: boolean; readonly before?: ReadonlyArray<SessionEvent> } = { ran: true }
    ) =>
      Effect.gen(function*() {
        const { sessionId } = writer
        const result = new ToolResult({ toolUseId: call.id, toolName: call.name, content: outcome.content, isError: outcome.isError })
        if (run.ran && CHANGING_TOOLS.has(call.name)) yield* commitWithCapture(writer, { _tag: "tool", toolUseId: call.id }, [result], problems)
        else yield* writer.commit([...(run.before ?? []), result])
        yield* emit({ type: "tool_end", sessionId, toolUseId: call.id, name: call.name, isError: outcome.isError, output: outcome.content })
        toolCalls.push({ id: call.id, name: call.name, input: call.input, output: outcome.content, isError: outcome.isError })
      })

    const steps = (sessionId: string, input: UserContent, maxSteps: number, rehome: boolean, emit: Emit) =>
      Effect.gen(function*() {
        const writer = yield* openSessionWriter(checkpointer, settings.states, sessionId, emit)
        // A restore cut short left the workspace between two states: the model must not work on it.
        const interrupted = Session.interruptedRestore(writer.state)
        if (interrupted !== undefined) return yield* RestoreInterruptedError.of(sessionId, interrupted)
        // This tree is not the one the session knows: its work, captures and restores would be of another.
        const home = homeFor({ sessionId, state: writer.state, workdir: settings.workdir, operation: "turn", rehome })
        if (home instanceof SessionWorkdirError) return yield* home
        if (home === "rehome") yield* writer.commit([rehomed(settings.workdir)])
        yield* writer.commit(repairs(writer.state))
        yield* background.drain(writer)
        const user = new UserMessage({ content: input, origin: "user" })
        const metadata = writer.state.head === 0
          ? [
            new SessionMetadata({
              formatVersion: EVENT_FORMAT_VERSION,
              workdir: settings.workdir,
              ...(modelName === undefined ? {} : { model: modelName })
            })
          ]
          : []
        if (metadata.length > 0) yield* writer.commit(metadata)
        // The checkpoint's capture: what changed since the last turn (the user's own edits), right before the prompt.
        const captureProblems: Array<CaptureProblem> = []
        yield* commitWithCapture(writer, { _tag: "checkpoint" }, [user], captureProblems)

        const toolCalls: Array<ToolCallRecord> = []
        let usage: TokenUsage = { inputTokens: 0, outputTokens: 0 }
        let text = ""
        let stopReason = "step_limit"
        let step = 0
        // One automatic compaction per turn at most: if it could not reduce, trying again each step would only repeat the model call.
        let autoCompacted = false
        while (step < maxSteps) {
          step++
          yield* background.drain(writer)
          if (!autoCompacted && settings.autoCompact !== false) {
            const { keepRecentTokens, thresholdTokens } = settings.autoCompact
            const context = yield* settings.compaction.contextTokens(writer.state)
            if (context.tokens > thresholdTokens) {
              autoCompacted = true
              const outcome = yield* settings.compaction.compact(
                sessionId,
                undefined,
                keepRecentTokens === undefined ? {} : { keepRecentTokens },
                emit
              ).pipe(Effect.either)
              // The Compaction event is the writer's own: fold it in. A failed one (its `error`
              // event already out) leaves the log as it was, and the turn goes on uncompacted.
              if (Either.isRight(outcome) && outcome.right.compacted) yield* writer.foldOwn(1)
            }
          }
          const reply = yield* gatherReply(
            model.streamText({
              prompt: promptOf(writer.state, settings.systemPrompt),
              toolkit: agentToolkitForModel,
              disableToolCallResolution: true
            }),
            (delta) => emit({ type: "text_delta", sessionId, delta })
          ).pipe(Effect.mapError((error) => modelError(sessionId, error)))
          const modelStep = modelStepOf(reply, modelName)
          usage = {
            inputTokens: usage.inputTokens + modelStep.usage.inputTokens,
            outputTokens: usage.outputTokens + modelStep.usage.outputTokens
          }
          yield* writer.commit([modelStep.message])
          text = modelStep.text

          if (modelStep.toolCalls.length === 0) {
            stopReason = reply.finishReason
            break
          }
          let stopped: PermissionDecided | undefined
          for (const call of modelStep.toolCalls) {
            if (stopped !== undefined) {
              yield* commitResult(writer, call, { content: NOT_RUN_STOPPED, isError: true }, emit, toolCalls, captureProblems, { ran: false })
              continue
            }
            const decision = yield* decide(
              settings.permissions,
              writer.state,
              { sessionId, toolUseId: call.id, workdir: settings.workdir, name: call.name, input: call.input },
              emit,
              (asking) => lock.whileAsking(sessionId, asking)
            )
            // After a question (which may have waited for hours, while the user or a restore of
            // another session changed files): what changed meanwhile is the user's (a `checkpoint`
            // capture, as before a prompt), not the next tool's — so a restore refuses to overwrite
            // it. After a denial too: the calls that follow it in this turn may change files.
            const asked = decision?.decidedBy === "callback"
            if (asked) yield* commitWithCapture(writer, { _tag: "checkpoint" }, [decision], captureProblems, true)
            if (decision?.behavior === "deny") {
              yield* commitResult(writer, call, { content: deniedResult(decision), isError: true }, emit, toolCalls, captureProblems, {
                ran: false,
                before: asked ? [] : [decision]
              })
              if (decision.interrupt === true) stopped = decision
              continue
            }
            if (decision !== undefined && !asked) yield* writer.commit([decision])
            yield* emit({ type: "tool_start", sessionId, toolUseId: call.id, name: call.name, input: call.input })
            const outcome = yield* runToolCall(
              { sessionId, toolUseId: call.id, name: call.name, input: call.input, state: writer.state },
              { workdir: settings.workdir, bashTimeoutMs: settings.bashTimeoutMs, startBackground: background.start }
            ).pipe(Effect.provideService(FileTools.FileTools, fileTools))
            // The file tools appended their snapshot and change records; fold them in first.
            yield* writer.foldToolRecords(call.id)
            yield* commitResult(writer, call, outcome, emit, toolCalls, captureProblems)
          }
          if (stopped !== undefined) {
            stopReason = "permission_denied"
            break
          }
        }
        const result: LiteAgentResult = { sessionId, text, toolCalls, usage, head: writer.state.head, steps: step, stopReason, captureProblems }
        yield* emit({ type: "result", result })
        return result
      })

    return (input, sendOptions, currentSessionId, emit) =>
      Effect.gen(function*() {
        const options = yield* decodeOptions(SendOptions, sendOptions, "send options")
        const sessionId = yield* validateSessionId(options.sessionId ?? currentSessionId)
        // What is wrong with the prompt is the caller's argument, not an event of the log.
        if (!Schema.is(UserContent)(input)) {
          return yield* new ConfigurationError({
            option: "prompt",
            detail: `expected a string or an array of text blocks ({ type: "text", text }), got ${quoteValue(input)}`
          })
        }
        if (contentText(input).trim().length === 0) return yield* new ConfigurationError({ option: "prompt", detail: "the prompt is empty" })
        return yield* lock.turn("send", sessionId, steps(sessionId, input, options.maxSteps ?? settings.maxSteps, options.rehome ?? false, emit))
      })
  })
