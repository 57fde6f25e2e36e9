/**
 * The tools the agent offers the model: the file tools (which snapshot before they write) and
 * `shell` (commands run with bash -c). The model sees them through `@effect/ai` tool definitions; the runtime runs every call
 * itself (`disableToolCallResolution`), so that each call's records and result land in the
 * session log in order.
 *
 * Parameters are declared to the model with JSON Schema types but decoded leniently by
 * `@effect/ai`: a call with a missing or mistyped argument must reach our own validation and
 * come back to the model as a tool error it can correct, not fail the whole model call.
 */
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import { Effect, ParseResult, Schema } from "effect"
import { type CheckpointerError } from "../core/errors.js"
import { ToolInputError, type UnsafePathError, type WorkspaceIOError } from "../tools/errors.js"
import type { JsonValue } from "../core/events.js"
import type * as Session from "../core/session.js"
import { FileTools } from "../tools/FileTools.js"
import { describeOutcome, runCommand } from "./Shell.js"

const param = (type: "string" | "integer" | "boolean", description: string) =>
  Schema.Unknown.annotations({ jsonSchema: { type, description } })
const optionalParam = (type: "string" | "integer" | "boolean", description: string) =>
  Schema.optional(param(type, description))

const PATH = "Path relative to the working directory."

export const agentToolkit = Toolkit.make(
  Tool.make("read_file", {
    description: "Read a text file from the working directory.",
    parameters: { path: param("string", PATH) }
  }),
  Tool.make("list_files", {
    description: "List a directory of the working directory (directories end with /).",
    parameters: { path: optionalParam("string", `${PATH} Default: the working directory itself.`) }
  }),
  Tool.make("write_file", {
    description: "Create or replace a file with the given content. Parent directories are created.",
    parameters: {
      path: param("string", PATH),
      content: param("string", "The whole new content of the file."),
      mode: optionalParam("integer", "POSIX permission bits, e.g. 420 for 0o644. Default: keep the current mode, or 0o644.")
    }
  }),
  Tool.make("edit_file", {
    description: "Replace the one occurrence of old_string in a file with new_string.",
    parameters: {
      path: param("string", PATH),
      old_string: param("string", "Exact text to replace; it must occur exactly once."),
      new_string: param("string", "The replacement text.")
    }
  }),
  Tool.make("delete_file", {
    description: "Delete a file.",
    parameters: { path: param("string", PATH) }
  }),
  Tool.make("chmod_file", {
    description: "Change a file's permission bits.",
    parameters: { path: param("string", PATH), mode: param("integer", "POSIX permission bits, e.g. 493 for 0o755.") }
  }),
  // Not "bash": @effect/ai-anthropic turns every tool_use named "bash" into its built-in AnthropicBash tool.
  Tool.make("shell", {
    description: "Run a shell command in the working directory. " +
      "The call ends with the command: whatever it leaves running (`cmd &`, nohup, setsid) is stopped when it exits. " +
      "For servers, watchers and other long-running commands use background: true: it returns at once and " +
      "its completion is reported in a later message.",
    parameters: {
      command: param("string", "The command, run with bash -c."),
      timeout_ms: optionalParam("integer", "Kill the command after this many milliseconds."),
      background: optionalParam("boolean", "Run in the background (for long-running commands) and report completion later.")
    }
  })
)

export type AgentTools = Toolkit.Tools<typeof agentToolkit>

/**
 * The toolkit as `generateText` takes it. Its handler is never called: the runtime resolves
 * calls itself, so reaching it is a bug.
 */
export const agentToolkitForModel: Toolkit.WithHandler<AgentTools> = {
  tools: agentToolkit.tools,
  handle: (name) => Effect.dieMessage(`tool ${String(name)} was resolved by @effect/ai; lite-agent runs tools itself`)
}

export const TOOL_NAMES: ReadonlyArray<string> = Object.keys(agentToolkit.tools)

// ---------------------------------------------------------------------------
// Running a call
// ---------------------------------------------------------------------------

const Path = Schema.String.pipe(Schema.minLength(1))
const Mode = Schema.Int.pipe(Schema.between(0, 0o7777))
const InputSchemas = {
  read_file: Schema.Struct({ path: Path }),
  list_files: Schema.Struct({ path: Schema.optional(Path) }),
  write_file: Schema.Struct({ path: Path, content: Schema.String, mode: Schema.optional(Mode) }),
  edit_file: Schema.Struct({ path: Path, old_string: Schema.String, new_string: Schema.String }),
  delete_file: Schema.Struct({ path: Path }),
  chmod_file: Schema.Struct({ path: Path, mode: Mode }),
  shell: Schema.Struct({
    command: Schema.String.pipe(Schema.minLength(1)),
    timeout_ms: Schema.optional(Schema.Int.pipe(Schema.positive())),
    background: Schema.optional(Schema.Boolean)
  })
} as const

const decodeInput = <A, I>(tool: string, schema: Schema.Schema<A, I>, input: JsonValue) =>
  Schema.decodeUnknown(schema, { onExcessProperty: "error" })(input).pipe(
    Effect.mapError((error) =>
      new ToolInputError({ tool, detail: `invalid input: ${ParseResult.TreeFormatter.formatErrorSync(error)}` })
    )
  )

export interface ToolCall {
  readonly sessionId: string
  /** The session folded to its head, passed on to the file tools (see `ToolCallContext.state`). */
  readonly state?: Session.SessionState
  readonly toolUseId: string
  readonly name: string
  readonly input: JsonValue
}

export interface ToolOutcome {
  readonly content: string
  readonly isError: boolean
}

export interface ToolRunSettings {
  readonly workdir: string
  /** Default timeout of a foreground `shell` call. */
  readonly bashTimeoutMs: number
  /** Hands a `shell` call with `background: true` to the runtime; resolves to the task id. */
  readonly startBackground: (sessionId: string, command: string, timeoutMs: number | undefined) => Effect.Effect<string>
}

/** Longest tool output handed back to the model; the rest is cut with a note. */
export const MAX_TOOL_OUTPUT_CHARS = 100_000

const capped = (text: string) =>
  text.length <= MAX_TOOL_OUTPUT_CHARS
    ? text
    : `${text.slice(0, MAX_TOOL_OUTPUT_CHARS)}\n[output truncated: ${text.length - MAX_TOOL_OUTPUT_CHARS} more characters]`

const ok = (content: string): ToolOutcome => ({ content: capped(content), isError: false })

const isCheckpointerError = (error: { readonly _tag: string }): error is CheckpointerError =>
  !["ToolInputError", "UnsafePathError", "WorkspaceIOError"].includes(error._tag)

/**
 * Run one tool call. Bad input, unsafe paths and I/O failures become an error result for the
 * model; a failing checkpointer fails the run, because nothing more can be recorded safely.
 */
export const runToolCall = (
  call: ToolCall,
  settings: ToolRunSettings
): Effect.Effect<ToolOutcome, CheckpointerError, FileTools> =>
  Effect.gen(function*() {
    const files = yield* FileTools
    const context = call.state === undefined
      ? { sessionId: call.sessionId, toolUseId: call.toolUseId }
      : { sessionId: call.sessionId, toolUseId: call.toolUseId, state: call.state }
    switch (call.name) {
      case "read_file": {
        const input = yield* decodeInput("read_file", InputSchemas.read_file, call.input)
        return ok(yield* files.readFile(input))
      }
      case "list_files": {
        const input = yield* decodeInput("list_files", InputSchemas.list_files, call.input)
        const entries = yield* files.listFiles(input.path === undefined ? {} : { path: input.path })
        return ok(entries.length === 0 ? "(empty directory)" : entries.join("\n"))
      }
      case "write_file": {
        const { content, mode, path } = yield* decodeInput("write_file", InputSchemas.write_file, call.input)
        const result = yield* files.writeFile(context, mode === undefined ? { path, content } : { path, content, mode })
        return ok(`wrote ${result.path} (${Buffer.byteLength(content)} bytes)`)
      }
      case "edit_file": {
        const input = yield* decodeInput("edit_file", InputSchemas.edit_file, call.input)
        return ok(`edited ${(yield* files.editFile(context, input)).path}`)
      }
      case "delete_file": {
        const input = yield* decodeInput("delete_file", InputSchemas.delete_file, call.input)
        return ok(`deleted ${(yield* files.deleteFile(context, input)).path}`)
      }
      case "chmod_file": {
        const input = yield* decodeInput("chmod_file", InputSchemas.chmod_file, call.input)
        const result = yield* files.chmodFile(context, input)
        return ok(`changed the mode of ${result.path} to 0o${input.mode.toString(8)}`)
      }
      case "shell": {
        const input = yield* decodeInput("shell", InputSchemas.shell, call.input)
        if (input.background === true) {
          const taskId = yield* settings.startBackground(call.sessionId, input.command, input.timeout_ms)
          return ok(`started background task ${taskId}; its completion will be reported in a later message`)
        }
        const outcome = yield* runCommand(input.command, {
          cwd: settings.workdir,
          timeoutMs: input.timeout_ms ?? settings.bashTimeoutMs
        })
        return { content: capped(describeOutcome(outcome)), isError: outcome.exitCode !== 0 }
      }
      default:
        return yield* new ToolInputError({ tool: call.name, detail: `no such tool; the tools are ${TOOL_NAMES.join(", ")}` })
    }
  }).pipe(
    Effect.catchIf(
      (error): error is ToolInputError | UnsafePathError | WorkspaceIOError => !isCheckpointerError(error),
      (error) => Effect.succeed<ToolOutcome>({ content: capped(error.message), isError: true })
    )
  )
