/**
 * Whether a tool call may run. The rules are pure (`ruleFor`): read-only tools always run;
 * `disallowedTools` and `plan` mode refuse; `allowedTools` (by tool, or by tool and what the call
 * is about: permissionRules.ts), a tool the session remembered (one of the file tools that write
 * remembers them all), and
 * `acceptEdits` for the file tools allow; `bypassPermissions` runs everything; anything else is
 * asked — of `canUseTool` when there is one, and refused when there is no one to ask. The asking
 * (`decide`) is the one effect: the callback may answer with a value, a promise or an Effect.
 * Every decision but "needed none" becomes a `PermissionDecided` event (the turn appends it).
 */
import { Cause, Effect, Either, HashSet, ParseResult, Schema } from "effect"
import type { JsonValue } from "../core/events.js"
import { PermissionDecided, PermissionMode } from "../core/events.js"
import { described, expecting, Flag, recognised } from "../core/internal/options.js"
import type * as Session from "../core/session.js"
import type { Emit } from "./AgentEvents.js"
import { parseToolRule, ruleMatches, type ToolRule } from "./permissionRules.js"
import { proposedDiffField } from "../tools/editDiffs.js"
import { TOOL_NAMES } from "./tools.js"

/** Tools that only read: they run in every mode without a decision (unless disallowed). */
export const READ_ONLY_TOOLS: ReadonlySet<string> = new Set(["read_file", "list_files"])
/** The file tools `acceptEdits` allows without asking (`shell` is still asked about). */
export const EDIT_TOOLS: ReadonlySet<string> = new Set(["write_file", "edit_file", "delete_file", "chmod_file"])
/** Tools that can change the workspace: the file tools that write, and `shell`. */
export const CHANGING_TOOLS: ReadonlySet<string> = new Set([...EDIT_TOOLS, "shell"])

/** What `canUseTool` answers. */
export const PermissionResult = Schema.Union(
  Schema.Struct({
    behavior: Schema.Literal("allow"),
    /** Allow this tool for the rest of the session without asking again (recorded, so a resumed session remembers). */
    remember: Schema.optional(Flag)
  }),
  Schema.Struct({
    behavior: Schema.Literal("deny"),
    /** What the model is told (default: that the user denied it). */
    message: Schema.optional(Schema.String),
    /** Stop the turn too: the calls after this one do not run, and no model call follows. */
    interrupt: Schema.optional(Flag)
  })
)
export type PermissionResult = typeof PermissionResult.Type

export interface PermissionContext {
  readonly sessionId: string
  readonly toolUseId: string
  /** The directory the tools work in (where a file tool's path is). */
  readonly workdir: string
  /** The mode in force. */
  readonly mode: PermissionMode
  /** Aborted when the turn is interrupted while the question is pending. */
  readonly signal: AbortSignal
}

/** Asked before a tool call that needs permission; answers with a value, a promise of one, or an Effect. */
export type CanUseTool = (
  toolName: string,
  input: JsonValue,
  context: PermissionContext
) => PermissionResult | PromiseLike<PermissionResult> | Effect.Effect<PermissionResult>

/** A rule: a tool's name, or a tool's name and a pattern (`shell(git status*)`, `write_file(src/**)`); see permissionRules.ts. */
const ToolRuleText = Schema.String.pipe(Schema.filter((text) => {
  const rule = parseToolRule(text, TOOL_NAMES)
  return typeof rule === "string" ? rule : true
}))

/** The agent's permission options (in `createLiteAgent`'s and the layers' options). */
export const permissionOptionFields = {
  /**
   * `default`: ask before `shell`, writes and deletes; `acceptEdits`: the file tools run, `shell`
   * is asked about; `bypassPermissions`: everything runs; `plan`: read-only tools only. Default:
   * `default` when `canUseTool` is given, else `bypassPermissions` (nothing could be asked).
   */
  permissionMode: Schema.optional(expecting(PermissionMode, `one of ${PermissionMode.literals.map((mode) => `"${mode}"`).join(", ")}`)),
  /**
   * Tools that run without asking, whatever the mode (but `plan`): a name (`shell`), or a name and
   * what the call is about (`shell(git status*)`, `write_file(src/**)`).
   */
  allowedTools: Schema.optional(described(Schema.Array(ToolRuleText), "an array of tool rules (a tool name, or tool(pattern))")),
  /** Tools, or calls of them (`shell(rm *)`), that never run, whatever the mode; the model is told so. */
  disallowedTools: Schema.optional(described(Schema.Array(ToolRuleText), "an array of tool rules (a tool name, or tool(pattern))")),
  /** Asked about each call that needs permission (see `permissionMode`). */
  canUseTool: Schema.optional(recognised<CanUseTool>(
    "a function (toolName, input, context) => decision",
    (value): value is CanUseTool => typeof value === "function"
  ))
}

export interface PermissionSettings {
  readonly mode: PermissionMode
  readonly allowedTools: ReadonlyArray<ToolRule>
  readonly disallowedTools: ReadonlyArray<ToolRule>
  readonly canUseTool: CanUseTool | undefined
}

/** Rules as given (checked already by the options' schema). */
const rulesOf = (texts: ReadonlyArray<string> | undefined): Array<ToolRule> =>
  (texts ?? []).flatMap((text) => {
    const rule = parseToolRule(text, TOOL_NAMES)
    return typeof rule === "string" ? [] : [rule]
  })

export const permissionSettings = (options: {
  readonly permissionMode?: PermissionMode | undefined
  readonly allowedTools?: ReadonlyArray<string> | undefined
  readonly disallowedTools?: ReadonlyArray<string> | undefined
  readonly canUseTool?: CanUseTool | undefined
}): PermissionSettings => ({
  mode: options.permissionMode ?? (options.canUseTool === undefined ? "bypassPermissions" : "default"),
  allowedTools: rulesOf(options.allowedTools),
  disallowedTools: rulesOf(options.disallowedTools),
  canUseTool: options.canUseTool
})

/** What the rules say about a call: run it (no decision needed), decided, or ask. */
export type Rule =
  | { readonly _tag: "free" }
  | {
    readonly _tag: "decided"
    readonly behavior: "allow" | "deny"
    readonly decidedBy: "mode" | "rule" | "remembered"
    readonly message?: string
  }
  | { readonly _tag: "ask" }

/** Whether the session remembered an "always" for this tool: for one of the file tools that write, for all of them. */
const remembered = (state: Session.SessionState, toolName: string) =>
  HashSet.has(state.rememberedTools, toolName) ||
  (EDIT_TOOLS.has(toolName) && [...EDIT_TOOLS].some((tool) => HashSet.has(state.rememberedTools, tool)))

/** The rules, in order; pure. */
export const ruleFor = (settings: PermissionSettings, state: Session.SessionState, toolName: string, input: JsonValue = null): Rule => {
  const mode = settings.mode
  const denied = settings.disallowedTools.find((rule) => ruleMatches(rule, toolName, input, false))
  if (denied !== undefined) {
    return {
      _tag: "decided",
      behavior: "deny",
      decidedBy: "rule",
      message: denied.pattern === undefined ? `the tool "${toolName}" is disallowed in this session` : `${denied.text} is disallowed in this session`
    }
  }
  if (READ_ONLY_TOOLS.has(toolName)) return { _tag: "free" }
  if (mode === "plan") {
    return {
      _tag: "decided",
      behavior: "deny",
      decidedBy: "mode",
      message: `plan mode: only ${[...READ_ONLY_TOOLS].join(" and ")} run; describe the change instead of making it`
    }
  }
  if (settings.allowedTools.some((rule) => ruleMatches(rule, toolName, input, true))) return { _tag: "decided", behavior: "allow", decidedBy: "rule" }
  if (remembered(state, toolName)) return { _tag: "decided", behavior: "allow", decidedBy: "remembered" }
  if (mode === "bypassPermissions") return { _tag: "free" }
  if (mode === "acceptEdits" && EDIT_TOOLS.has(toolName)) return { _tag: "decided", behavior: "allow", decidedBy: "mode" }
  return { _tag: "ask" }
}

export interface PendingCall {
  readonly sessionId: string
  readonly toolUseId: string
  readonly workdir: string
  readonly name: string
  readonly input: JsonValue
}

const decodeResult = Schema.decodeUnknownEither(PermissionResult, { onExcessProperty: "error" })

/** The callback's answer, whatever shape it came in; a throw, a rejection or a malformed answer is a denial saying so. */
const ask = (canUseTool: CanUseTool, call: PendingCall, mode: PermissionMode): Effect.Effect<PermissionResult> =>
  Effect.async<unknown, unknown>((resume, signal) => {
    try {
      const answer = canUseTool(call.name, call.input, { sessionId: call.sessionId, toolUseId: call.toolUseId, workdir: call.workdir, mode, signal })
      if (Effect.isEffect(answer)) resume(answer)
      else if (answer !== null && typeof answer === "object" && "then" in answer && typeof answer.then === "function") {
        answer.then((value) => resume(Effect.succeed(value)), (error: unknown) => resume(Effect.fail(error)))
      } else resume(Effect.succeed(answer))
    } catch (error) {
      resume(Effect.fail(error))
    }
  }).pipe(
    Effect.map((answer): PermissionResult =>
      Either.getOrElse(decodeResult(answer), (error) => ({
        behavior: "deny",
        message: `canUseTool answered something that is not a decision: ${ParseResult.TreeFormatter.formatErrorSync(error)}`
      }))
    ),
    // A failure or a defect of the callback (not an interruption of the turn) is a denial saying so.
    Effect.catchAllCause((cause) =>
      Cause.isInterruptedOnly(cause) ? Effect.interrupt : Effect.succeed<PermissionResult>({
        behavior: "deny",
        message: `canUseTool failed: ${describeFailure(Cause.squash(cause))}`
      })
    )
  )

const describeFailure = (error: unknown) => (error instanceof Error ? error.message : String(error))

/**
 * The decision on one call: `undefined` when none was needed (it runs, and nothing is logged),
 * else the event to log. Announces a question (`permission_request`) before asking it, and waits
 * for the answer through `whileAsking` (the turn tells its lock that it is only waiting).
 */
export const decide = (
  settings: PermissionSettings,
  state: Session.SessionState,
  call: PendingCall,
  emit: Emit,
  whileAsking: (asking: Effect.Effect<PermissionResult>) => Effect.Effect<PermissionResult> = (asking) => asking
): Effect.Effect<PermissionDecided | undefined> =>
  Effect.gen(function*() {
    const mode = settings.mode
    const base = { toolUseId: call.toolUseId, toolName: call.name, mode }
    const rule = ruleFor(settings, state, call.name, call.input)
    if (rule._tag === "free") return undefined
    if (rule._tag === "decided") {
      return new PermissionDecided({
        ...base,
        behavior: rule.behavior,
        decidedBy: rule.decidedBy,
        ...(rule.message === undefined ? {} : { message: rule.message })
      })
    }
    if (settings.canUseTool === undefined) {
      return new PermissionDecided({
        ...base,
        behavior: "deny",
        decidedBy: "mode",
        message: `"${call.name}" needs permission in ${mode} mode and there is no canUseTool to ask`
      })
    }
    yield* emit({
      type: "permission_request",
      requestId: call.toolUseId,
      sessionId: call.sessionId,
      toolUseId: call.toolUseId,
      name: call.name,
      input: call.input,
      mode,
      // What an edit would change, read as it is asked: a UI shows it beside the question.
      ...proposedDiffField(call.workdir, call.name, call.input)
    })
    const answer = yield* whileAsking(ask(settings.canUseTool, call, mode))
    return answer.behavior === "allow"
      ? new PermissionDecided({ ...base, behavior: "allow", decidedBy: "callback", ...(answer.remember === true ? { remember: true } : {}) })
      : new PermissionDecided({
        ...base,
        behavior: "deny",
        decidedBy: "callback",
        message: answer.message ?? `the user denied "${call.name}"`,
        ...(answer.interrupt === true ? { interrupt: true } : {})
      })
  })

/** The tool result a denied call gets: what the model reads. */
export const deniedResult = (decision: PermissionDecided): string =>
  `permission denied: ${decision.message ?? `"${decision.toolName}" was not allowed`}; the tool did not run`

/** The tool result of a call after one whose denial stopped the turn. */
export const NOT_RUN_STOPPED = "not run: the turn was stopped when an earlier tool call was denied"
