/**
 * Who let a tool call run, or stopped it. A call that needed no decision (a read-only tool, or
 * any tool in `bypassPermissions` mode) has none; every other call's decision is in the log
 * before its result, so an audit or a resumed session shows why a command ran or did not.
 */
import { Schema } from "effect"
import { isFields, isNonEmptyString, isString, optional } from "../internal/eventChecks.js"
import { EventClass } from "../internal/eventKind.js"

export const PermissionMode = Schema.Literal("default", "acceptEdits", "bypassPermissions", "plan")
export type PermissionMode = typeof PermissionMode.Type

export const PERMISSION_MODES: ReadonlyArray<PermissionMode> = PermissionMode.literals

/**
 * Who decided: the permission `mode` (acceptEdits allows edits, plan refuses changes, default
 * with no one to ask refuses), a `rule` (allowedTools / disallowedTools), an earlier decision
 * that allowed the tool for the rest of the session (`remembered`), or the `canUseTool`
 * callback (the user, in the terminal).
 */
export const PermissionDecider = Schema.Literal("mode", "rule", "remembered", "callback")
export type PermissionDecider = typeof PermissionDecider.Type

const isBehavior = (value: unknown): value is "allow" | "deny" => value === "allow" || value === "deny"
const isMode = (value: unknown): value is PermissionMode =>
  value === "default" || value === "acceptEdits" || value === "bypassPermissions" || value === "plan"
const isDecider = (value: unknown): value is PermissionDecider =>
  value === "mode" || value === "rule" || value === "remembered" || value === "callback"
const isTrue = (value: unknown): value is true => value === true

export class PermissionDecided extends EventClass<PermissionDecided>()("PermissionDecided", {
  /** The tool call decided on (its `tool_use` block in the assistant message before). */
  toolUseId: Schema.NonEmptyString,
  toolName: Schema.NonEmptyString,
  behavior: Schema.Literal("allow", "deny"),
  decidedBy: PermissionDecider,
  /** The mode in force when it was decided. */
  mode: PermissionMode,
  /** Why (a denial's message is what the model is told). */
  message: Schema.optionalWith(Schema.String, { exact: true }),
  /** Allowed for the rest of the session: later calls of this tool are not asked about. */
  remember: Schema.optionalWith(Schema.Literal(true), { exact: true }),
  /** Denied and the turn stopped: the calls after it in the same message did not run either. */
  interrupt: Schema.optionalWith(Schema.Literal(true), { exact: true })
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { behavior, decidedBy, interrupt, message, mode, remember, toolName, toolUseId } = json
    if (!isNonEmptyString(toolUseId) || !isNonEmptyString(toolName) || !isBehavior(behavior)) return undefined
    if (!isDecider(decidedBy) || !isMode(mode) || !optional(message, isString)) return undefined
    if (!optional(remember, isTrue) || !optional(interrupt, isTrue)) return undefined
    return {
      toolUseId,
      toolName,
      behavior,
      decidedBy,
      mode,
      ...(message === undefined ? {} : { message }),
      ...(remember === undefined ? {} : { remember }),
      ...(interrupt === undefined ? {} : { interrupt })
    }
  }
}) {}
