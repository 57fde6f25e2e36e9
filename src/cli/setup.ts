/**
 * What the command line names, turned into the agent's layers: the model (`anthropic`, or
 * `scripted:<turns.json>` for offline use), the checkpointer (`file:<dir>`, `sqlite:<file>`,
 * `postgres:<url>`, or the default file backend) and the session (`--session <id>`, `--continue`). Every mistake
 * is a `CliUsageError` with a message that says what to do; the command exits with code 2.
 */
import { readFileSync } from "node:fs"
import { resolve } from "node:path"
import { Data, Effect, Either, Layer } from "effect"
import { ConfigurationError } from "../core/errors.js"
import * as FileCheckpointer from "../backends/file/FileCheckpointer.js"
import type { Checkpointer } from "../core/Checkpointer.js"
import { defaultAutoCompact } from "../agent/compaction.js"
import { parseToolRule, splitRules } from "../agent/permissionRules.js"
import * as LiteAgent from "../agent/LiteAgent.js"
import { storeIgnorePatterns } from "../tools/WorkspaceCapture.js"
import type { ModelProvider } from "../provider/ModelProvider.js"
import { scripted } from "../provider/scripted.js"
import type { LanguageModel } from "@effect/ai"
import type { CanUseTool } from "../agent/permissions.js"
import { TOOL_NAMES } from "../agent/tools.js"
import type { PermissionMode } from "../core/events.js"


/** A command line that cannot run as given: the message says why and what to do. */
export class CliUsageError extends Data.TaggedError("CliUsageError")<{ readonly message: string }> {}

const usage = (message: string) => new CliUsageError({ message })

/**
 * `--allowed-tools` / `--disallowed-tools`: rules separated by commas — a tool name, or a tool
 * name and a pattern (`shell(git status*)`, `write_file(src/**)`); plain names may be separated by
 * spaces too.
 */
export const toolList = (flag: string, value: string): Either.Either<ReadonlyArray<string>, CliUsageError> => {
  const rules = splitRules(value).flatMap((rule) => (rule.includes("(") ? [rule] : rule.split(/\s+/)))
  for (const rule of rules) {
    const parsed = parseToolRule(rule, TOOL_NAMES)
    if (typeof parsed === "string") return Either.left(usage(`${flag}: ${parsed}`))
  }
  return Either.right(rules)
}

/** An error as the command shows it: `<Tag>: <message>` for the library's tagged errors. */
export const describeError = (error: unknown): string => {
  const tag = typeof error === "object" && error !== null && "_tag" in error ? `${String(error._tag)}: ` : ""
  const message = error instanceof Error ? error.message : String(error)
  // An error that says nothing itself (the HTTP server's failure to listen) says what caused it.
  const cause = message === "" && typeof error === "object" && error !== null && "cause" in error ? error.cause : undefined
  return `${tag}${cause === undefined ? message : cause instanceof Error ? cause.message : String(cause)}`
}

/** `anthropic` (default) or `scripted:<turns.json>`. */
export const modelProvider = (spec: string): Effect.Effect<ModelProvider, CliUsageError> =>
  Effect.suspend(() => {
    if (spec === "anthropic") {
      const key = process.env.ANTHROPIC_API_KEY
      if (key === undefined || key.trim() === "") {
        return Effect.fail(usage(
          "--model anthropic needs an API key: set ANTHROPIC_API_KEY (export ANTHROPIC_API_KEY=sk-ant-…), " +
            "or run offline with --model scripted:<turns.json>"
        ))
      }
      // Loaded only when asked for: the Anthropic client is a large module.
      return Effect.tryPromise({
        try: () => import("../provider/anthropic.js").then((module) => module.anthropic()),
        catch: (error) => usage(`--model anthropic: ${String(error)}`)
      })
    }
    if (spec.startsWith("scripted:")) {
      const file = spec.slice("scripted:".length)
      if (file === "") return Effect.fail(usage("--model scripted:<turns.json> needs a file: a JSON array of turns { text?, toolCalls? }"))
      return Effect.try({
        try: () => scripted(JSON.parse(readFileSync(resolve(file), "utf8"))),
        catch: (error) => usage(`--model ${spec}: ${error instanceof Error ? error.message : String(error)}`)
      })
    }
    return Effect.fail(usage(`--model ${JSON.stringify(spec)}: expected anthropic or scripted:<turns.json>`))
  })

/** `file:<dir>`, `sqlite:<file>`, `postgres:<url>`, or undefined for the default file backend. */
export const checkpointerLayer = (
  spec: string | undefined,
  maxStoreBytes?: number
): Effect.Effect<Layer.Layer<Checkpointer, unknown>, CliUsageError> =>
  Effect.suspend(() => {
    if (maxStoreBytes !== undefined && maxStoreBytes < 0) {
      return Effect.fail(usage(`--max-store-bytes must be a number of bytes, 0 or more; got ${maxStoreBytes}`))
    }
    // The store's quota (--max-store-bytes), the same option on every backend.
    const store = maxStoreBytes === undefined ? {} : { maxStoreBytes }
    // A store directory that cannot be used is named as the user gave it (or as the default is made), not as an option "dir".
    const fileStore = (options: FileCheckpointer.FileCheckpointerOptions, source: string, hint: string) =>
      FileCheckpointer.layer(options).pipe(
        Layer.mapError((error) => (error instanceof ConfigurationError && error.option === "dir" ? usage(`${source} cannot be used: ${error.detail}${hint}`) : error))
      )
    if (spec === undefined) {
      // As FileCheckpointer.defaultDirectory makes it.
      const home = process.env["LITE_AGENT_HOME"] === undefined ? "~/.lite-agent/sessions" : "$LITE_AGENT_HOME/sessions"
      return Effect.succeed(fileStore(store, `the default session store (${home})`, "; set LITE_AGENT_HOME to a directory this process can write, or give --checkpointer"))
    }
    if (spec.startsWith("file:") && spec.length > "file:".length) {
      return Effect.succeed(fileStore({ dir: resolve(spec.slice("file:".length)), ...store }, `--checkpointer ${spec}`, ""))
    }
    if (spec.startsWith("sqlite:") && spec.length > "sqlite:".length) {
      const file = resolve(spec.slice("sqlite:".length))
      // Loaded only when asked for: better-sqlite3 is an optional peer dependency.
      return Effect.tryPromise({
        try: () => import("../backends/sqlite/SqliteCheckpointer.js").then((module) => module.layer({ file, ...store })),
        catch: (error) => usage(`--checkpointer ${spec}: the SQLite backend could not be loaded (${String(error)}); install better-sqlite3 (12.x)`)
      })
    }
    if (spec.startsWith("postgres:")) {
      // `postgres:postgres://user@host/db`; the bare URL works too. The password is best left to PGPASSWORD.
      const url = spec.startsWith("postgres://") ? spec : spec.slice("postgres:".length)
      return Effect.tryPromise({
        try: () => import("../backends/postgres/PostgresCheckpointer.js"),
        catch: (error) => usage(`--checkpointer postgres:…: the Postgres backend could not be loaded (${String(error)}); install @effect/sql-pg`)
      }).pipe(
        Effect.flatMap((module) =>
          Either.match(module.decodePostgresOptions({ url, ...store }), {
            // Never echo the URL: it may hold a password.
            onLeft: (error) => Effect.fail(usage(`--checkpointer postgres:<url>: ${error.detail}`)),
            onRight: (options) => Effect.succeed(module.layer(options))
          })
        )
      )
    }
    return Effect.fail(usage(`--checkpointer ${JSON.stringify(spec)}: expected file:<dir>, sqlite:<file> or postgres:<url>`))
  })

export interface AgentSettings {
  readonly workdir: string
  readonly model: ModelProvider
  readonly modelName: string | undefined
  readonly maxSteps: number | undefined
  readonly sessionId: string | undefined
  /** What a restore covers (`--capture`). */
  readonly capture: "all" | "tools"
  /** `--checkpointer`, to leave a store inside the workdir out of the workspace capture. */
  readonly checkpointer: string | undefined
  /** `--permission-mode`, `--allowed-tools`, `--disallowed-tools`, and who is asked. */
  readonly permissions: {
    readonly permissionMode?: PermissionMode
    readonly allowedTools?: ReadonlyArray<string>
    readonly disallowedTools?: ReadonlyArray<string>
    readonly canUseTool?: CanUseTool
  }
}

/** Where a `--checkpointer` keeps its files, when they are files. */
const storeOf = (spec: string | undefined): { readonly directory: string } | { readonly file: string } | undefined =>
  spec === undefined
    ? { directory: FileCheckpointer.defaultDirectory() }
    : spec.startsWith("file:")
    ? { directory: resolve(spec.slice("file:".length)) }
    : spec.startsWith("sqlite:")
    ? { file: resolve(spec.slice("sqlite:".length)) }
    : undefined

/** The agent (and its checkpointer, to list sessions) over the chosen model and storage. */
export const agentLayer = (
  settings: AgentSettings,
  checkpointer: Layer.Layer<Checkpointer, unknown>
): Layer.Layer<LiteAgent.LiteAgent | Checkpointer, unknown> => {
  const model: Layer.Layer<LanguageModel.LanguageModel, unknown> = settings.model.layer(settings.modelName)
  return LiteAgent.layerWithWorkdir(settings.workdir, {
    modelName: settings.modelName ?? settings.model.defaultModelName,
    autoCompact: defaultAutoCompact(settings.model.contextTokens),
    ...(settings.maxSteps === undefined ? {} : { maxSteps: settings.maxSteps }),
    workspace: {
      capture: settings.capture,
      ignore: ((store) => (store === undefined ? [] : storeIgnorePatterns(settings.workdir, store)))(storeOf(settings.checkpointer))
    },
    ...(settings.sessionId === undefined ? {} : { sessionId: settings.sessionId }),
    ...settings.permissions
  }).pipe(Layer.provide(model), Layer.provideMerge(checkpointer))
}
