/**
 * Compaction: replace the older part of a session's conversation with a summary, in stages that
 * each report progress — measure, archive, normalize, summarize, project, persist — and write
 * exactly one `Compaction` event at the end, with the head it planned from as the expected
 * head. Until then nothing is written, so an abort, a model failure or a crash leaves the log
 * as it was; nothing is ever deleted (the summarized events stay in the log, readable).
 *
 * The caller (the agent) holds the maintenance lock around it: compaction needs the agent idle.
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as Prompt from "@effect/ai/Prompt"
import { Clock, Effect, Ref, Schema } from "effect"
import { Checkpointer } from "../core/Checkpointer.js"
import type { CheckpointerError, ConfigurationError, InvalidSessionIdError } from "../core/errors.js"
import { Compaction } from "../core/events.js"
import { AbortSignalOption, AnyString, described, NonNegativeInteger, PositiveInteger } from "../core/internal/options.js"
import * as Session from "../core/session.js"
import type { SessionStatesService } from "../tools/SessionStates.js"
import { type AgentBusyError, CompactionCancelledError, ModelError } from "./errors.js"
import { modelError } from "./modelResponse.js"
import { promptOf } from "./prompt.js"
import {
  eventCharacters,
  normalizeTranscript,
  planCompaction,
  SUMMARIZER_SYSTEM_PROMPT,
  summarizerRequest,
  summaryAppendix,
  summaryText,
  type TranscriptItem,
  transcriptItems
} from "./compactionPlan.js"
import { estimateTokens, measurePrompt, promptCharacters, type TokenFigure, type TokenMethod } from "./tokens.js"

export const COMPACTION_STAGES = ["measure", "archive", "normalize", "summarize", "project", "persist"] as const
export type CompactionStage = (typeof COMPACTION_STAGES)[number]
export type CompactionPhase = "start" | "progress" | "done" | "error" | "cancelled"

/** Messages kept verbatim after the summary, at most (estimated tokens), unless `keepRecentTokens` says otherwise. */
export const DEFAULT_KEEP_RECENT_TOKENS = 20_000

/** Archive progress is reported about this many times, whatever the size. */
const ARCHIVE_REPORTS = 20

export const CompactOptions = Schema.Struct({
  /** Compact this session instead of the current one. */
  sessionId: Schema.optional(AnyString),
  /** Abort: the compaction ends `cancelled` and writes nothing (unless it is already writing its event). */
  signal: Schema.optional(AbortSignalOption),
  /** Keep at most this many (estimated) tokens of the latest messages verbatim. Default 20 000; 0 summarizes everything it can. */
  keepRecentTokens: Schema.optional(NonNegativeInteger)
})
export interface CompactOptions extends Schema.Schema.Type<typeof CompactOptions> {}

/**
 * Automatic compaction: `false`, or compact (the same way, with the same events) before a
 * model call whose context would pass `thresholdTokens`.
 */
export const AutoCompact = Schema.Union(
  Schema.Literal(false),
  described(
    Schema.Struct({
      thresholdTokens: PositiveInteger,
      /** As `compact`'s option (default 20 000). */
      keepRecentTokens: Schema.optional(NonNegativeInteger)
    }),
    "{ thresholdTokens, keepRecentTokens? }"
  )
)
export type AutoCompact = Schema.Schema.Type<typeof AutoCompact>

/** The default threshold: this share of the model's context window. */
export const AUTO_COMPACT_SHARE = 0.8

/** Compact before the context passes 80% of the model's window, when the window is known; never otherwise. */
export const defaultAutoCompact = (contextTokens: number | undefined): AutoCompact =>
  contextTokens === undefined || !Number.isFinite(contextTokens) || contextTokens <= 0
    ? false
    : { thresholdTokens: Math.max(1, Math.floor(contextTokens * AUTO_COMPACT_SHARE)) }

export interface CompactionResult {
  readonly sessionId: string
  /** Tokens of the context the model saw before. */
  readonly before: number
  /** Tokens of the context the model sees from now on (`before` when nothing was written). */
  readonly after: number
  /** `measured` when the provider counted both figures, `estimated` otherwise. */
  readonly method: TokenMethod
  /** Whether a `Compaction` event was written. */
  readonly compacted: boolean
  /** Seq of the `Compaction` event, when one was written. */
  readonly seq?: number
  /** Why nothing was written, when nothing was. */
  readonly reason?: string
}

/** What `compact` reports, in order: one `start`, `progress` per stage, then one of `done`, `error`, `cancelled`. */
export interface CompactionEvent {
  readonly type: "compaction"
  readonly sessionId: string
  readonly phase: CompactionPhase
  readonly stage: CompactionStage
  /** archive: messages collected so far and in all; summarize: 0 of 1 while the model works, then 1 of 1. */
  readonly completed?: number
  readonly total?: number
  /** measure: the context before; project: the context after. */
  readonly tokens?: TokenFigure
  /** done: the result. */
  readonly result?: CompactionResult
  /** normalize: what was cut and closed; done without a write: why; error: the error's message. */
  readonly detail?: string
  /** error: the error itself. */
  readonly error?: CompactError
}

export type CompactError =
  | CheckpointerError
  | ModelError
  | AgentBusyError
  | InvalidSessionIdError
  | ConfigurationError
  | CompactionCancelledError

export interface CompactionSettings {
  readonly systemPrompt: string | undefined
  readonly states: SessionStatesService
}

type Control = "running" | "persisting" | "persisted" | "cancelled"

/** Resolves when `signal` aborts (at once if it already has); never without one. */
const abortOf = (signal: AbortSignal | undefined): Effect.Effect<void> =>
  signal === undefined
    ? Effect.never
    : Effect.async<void>((resume) => {
      if (signal.aborted) return resume(Effect.void)
      const onAbort = () => resume(Effect.void)
      signal.addEventListener("abort", onAbort, { once: true })
      return Effect.sync(() => signal.removeEventListener("abort", onAbort))
    })

/** The last model call's usage (input and output) plus the estimate of the messages after it; undefined when none since the last compaction reported usage. */
const usageAnchored = (state: Session.SessionState): number | undefined => {
  const { entries } = Session.conversation(state)
  const compactedAt = state.compaction?.seq ?? 0
  let after = 0
  for (let index = entries.length - 1; index >= 0; index--) {
    const { event, seq } = entries[index]!
    if (seq <= compactedAt) return undefined
    if (event._tag === "AssistantMessage" && event.usage !== undefined) {
      return event.usage.inputTokens + event.usage.outputTokens + estimateTokens(after)
    }
    after += eventCharacters(event)
  }
  return undefined
}

export const makeCompact = (settings: CompactionSettings) =>
  Effect.gen(function*() {
    const checkpointer = yield* Checkpointer
    const model = yield* LanguageModel.LanguageModel
    const { states, systemPrompt } = settings
    // The counter the model's layer brought, if any, captured now: the calls run in the caller's context.
    const context = yield* Effect.context<never>()

    /**
     * The tokens of the context the model would see for `state` now, as the automatic
     * threshold judges them before every model call — so without a request to the provider:
     * the last call's reported usage (which counts what an estimate cannot: tool definitions,
     * the provider's own framing) plus an estimate of what came after it, or the estimate
     * alone when no call since the last compaction reported usage. The compaction it triggers
     * then measures properly.
     */
    const contextTokens = (state: Session.SessionState): Effect.Effect<TokenFigure> =>
      Effect.sync(() => {
        const estimated = estimateTokens(promptCharacters(promptOf(state, systemPrompt)))
        return { tokens: Math.max(usageAnchored(state) ?? 0, estimated), method: "estimated" }
      })

    const compact = (
      sessionId: string,
      instructions: string | undefined,
      options: CompactOptions,
      emit: (event: CompactionEvent) => Effect.Effect<void>
    ): Effect.Effect<CompactionResult, CompactError> =>
      Effect.gen(function*() {
        const control = yield* Ref.make<Control>("running")
        const stage = yield* Ref.make<CompactionStage>("measure")
        const report = (phase: CompactionPhase, fields: Omit<CompactionEvent, "type" | "sessionId" | "phase" | "stage"> = {}) =>
          Effect.flatMap(Ref.get(stage), (current) => emit({ type: "compaction", sessionId, phase, stage: current, ...fields }))
        /** Cancel now unless the event is already being written: fails with the cancellation, or does nothing. */
        const cancelAt = (at: CompactionStage) =>
          Effect.flatMap(
            Ref.modify(control, (current): [boolean, Control] => (current === "running" ? [true, "cancelled"] : [false, current])),
            (cancelled) => (cancelled ? Effect.fail(new CompactionCancelledError({ sessionId, stage: at })) : Effect.void)
          )
        // Each stage ends by checking the signal, so an abort is seen there and then, in the stage it came in.
        const enter = (next: CompactionStage) =>
          Effect.zipRight(
            Effect.suspend(() => (options.signal?.aborted === true ? Effect.flatMap(Ref.get(stage), cancelAt) : Effect.void)),
            Ref.set(stage, next)
          )
        const measure = (prompt: Prompt.Prompt) => Effect.provide(measurePrompt(prompt), context)

        const finishWithout = (before: TokenFigure, reason: string) =>
          Effect.gen(function*() {
            const result: CompactionResult = {
              sessionId,
              before: before.tokens,
              after: before.tokens,
              method: before.method,
              compacted: false,
              reason
            }
            yield* report("done", { result, detail: reason })
            return result
          })

        const work = Effect.gen(function*() {
          yield* report("start")
          yield* enter("measure")
          const { state } = yield* states.get(sessionId)
          const before = yield* measure(promptOf(state, systemPrompt))
          yield* report("progress", { tokens: before })

          yield* enter("archive")
          const plan = planCompaction(state, options.keepRecentTokens ?? DEFAULT_KEEP_RECENT_TOKENS)
          if ("nothingToReduce" in plan) return yield* finishWithout(before, plan.nothingToReduce)
          const total = plan.summarized.length
          const items: Array<TranscriptItem> = []
          const every = Math.max(1, Math.ceil(total / ARCHIVE_REPORTS))
          yield* report("progress", { completed: 0, total })
          for (let index = 0; index < total; index++) {
            items.push(...transcriptItems(plan.summarized[index]!.event))
            if ((index + 1) % every === 0 || index + 1 === total) {
              yield* report("progress", { completed: index + 1, total })
              // Long archives leave room for an abort between reports.
              yield* Effect.yieldNow()
            }
          }

          yield* enter("normalize")
          const transcript = normalizeTranscript(items)
          yield* report("progress", {
            detail: `${transcript.cut} tool input(s)/output(s) cut for the summarizer, ${transcript.closedCalls} unanswered call(s) closed, ` +
              `${transcript.omitted} item(s) left out for length, ${plan.kept.length} message(s) kept verbatim`
          })

          yield* enter("summarize")
          yield* report("progress", { completed: 0, total: 1 })
          const response = yield* model.generateText({
            prompt: Prompt.make([
              { role: "system", content: SUMMARIZER_SYSTEM_PROMPT },
              { role: "user", content: [{ type: "text", text: summarizerRequest(plan.previousSummary, transcript, instructions) }] }
            ])
          }).pipe(Effect.mapError((error) => modelError(sessionId, error)))
          if (response.text.trim().length === 0) {
            return yield* new ModelError({ sessionId, detail: "the model returned an empty summary" })
          }
          yield* report("progress", { completed: 1, total: 1 })

          yield* enter("project")
          const ts = yield* Clock.currentTimeMillis
          const summary = summaryText(response.text, summaryAppendix(state, plan.keptFromSeq))
          const compactionWith = (tokensAfter: number) =>
            new Compaction({
              summary,
              ...(plan.keptFromSeq === undefined ? {} : { keptFromSeq: plan.keptFromSeq }),
              tokensBefore: before.tokens,
              tokensAfter,
              ...(instructions === undefined ? {} : { instructions })
            })
          const projected = Session.step(state, { seq: state.head + 1, ts, event: compactionWith(0) })
          const after = yield* measure(promptOf(projected, systemPrompt))
          yield* report("progress", { tokens: after })
          if (after.tokens >= before.tokens) {
            return yield* finishWithout(before, `the summary would not make the context smaller (${after.tokens} >= ${before.tokens} tokens)`)
          }

          yield* enter("persist")
          // Past this point an abort is too late: the event is written whole or not at all.
          const seq = yield* Effect.uninterruptible(Effect.gen(function*() {
            const go = yield* Ref.modify(control, (current): [boolean, Control] =>
              current === "cancelled" ? [false, current] : [true, "persisting"])
            if (!go) return undefined
            const head = yield* checkpointer.append(sessionId, [compactionWith(after.tokens)], state.head)
            yield* Ref.set(control, "persisted")
            return head
          }))
          if (seq === undefined) return yield* Effect.interrupt
          const result: CompactionResult = {
            sessionId,
            before: before.tokens,
            after: after.tokens,
            method: before.method === "measured" && after.method === "measured" ? "measured" : "estimated",
            compacted: true,
            seq
          }
          yield* report("done", { result })
          return result
        })

        // An abort while a stage runs (the model call, above all): the race interrupts the work.
        const cancel = abortOf(options.signal).pipe(
          Effect.zipRight(Ref.get(stage)),
          Effect.flatMap(cancelAt),
          Effect.zipRight(Effect.never)
        )

        return yield* Effect.raceFirst(work, cancel).pipe(
          Effect.tapError((error) =>
            error._tag === "CompactionCancelledError"
              ? report("cancelled", { detail: error.message })
              : report("error", { error, detail: error.message })
          ),
          Effect.onInterrupt(() =>
            Effect.flatMap(Ref.get(control), (current) => (current === "persisted" ? Effect.void : report("cancelled", { detail: "interrupted" })))
          )
        )
      })
    return { compact, contextTokens }
  })
