/**
 * The `lite-agent` command (main.ts loads it once it is not a request for help or the version).
 * Without `-p`, an interactive session in the terminal
 * (interactive.ts); print mode (`-p "prompt"`) runs one turn and prints the answer as text, one
 * JSON document, or one JSON object per event (`stream-json`). Never loaded by the library's
 * entry points.
 *
 * `lite-agent serve` serves sessions (and, with `--model`, an agent) over HTTP: see
 * src/server/SessionServer.ts.
 *
 * Exit codes: 0 done; 1 the turn failed (the error on stderr); 2 the command line cannot run
 * as given (the message says why); 130 interrupted (Ctrl-C).
 */
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Context, Effect, Either, Exit, Layer, ManagedRuntime, Option, Random } from "effect"
import { ConfigurationError } from "../core/errors.js"
import { PERMISSION_MODES } from "../core/events.js"
import { sessionIdProblem } from "../core/sessionId.js"
import { workdirProblem } from "../tools/Workspace.js"
import { ABOUT, VERSION } from "./help.js"
import { makeTerminalPermissions } from "./permissionPrompt.js"
import { runPrint } from "./print.js"
import { agentLayer, checkpointerLayer, CliUsageError, describeError, modelProvider, toolList } from "./setup.js"

const OUTPUT_FORMATS = ["text", "json", "stream-json"] as const
const DEFAULT_PORT = 7321
export type OutputFormat = (typeof OUTPUT_FORMATS)[number]

const options = {
  print: Options.text("print").pipe(
    Options.withAlias("p"),
    Options.withDescription(ABOUT.print[1]),
    Options.optional
  ),
  outputFormat: Options.choice("output-format", OUTPUT_FORMATS).pipe(
    Options.withDescription(ABOUT.outputFormat[1]),
    Options.withDefault("text" as OutputFormat)
  ),
  workdir: Options.text("workdir").pipe(Options.withDescription(ABOUT.workdir[1]), Options.optional),
  session: Options.text("session").pipe(Options.withDescription(ABOUT.session[1]), Options.optional),
  continue: Options.boolean("continue").pipe(Options.withDescription(ABOUT.continue[1])),
  checkpointer: Options.text("checkpointer").pipe(
    Options.withDescription(ABOUT.checkpointer[1]),
    Options.optional
  ),
  model: Options.text("model").pipe(
    Options.withDescription(ABOUT.model[1]),
    Options.withDefault("anthropic")
  ),
  modelName: Options.text("model-name").pipe(Options.withDescription(ABOUT.modelName[1]), Options.optional),
  maxSteps: Options.integer("max-steps").pipe(Options.withDescription(ABOUT.maxSteps[1]), Options.optional),
  capture: Options.choice("capture", ["all", "tools"] as const).pipe(
    Options.withDescription(ABOUT.capture[1]),
    Options.withDefault("all" as const)
  ),
  permissionMode: Options.choice("permission-mode", PERMISSION_MODES).pipe(
    Options.withDescription(ABOUT.permissionMode[1]),
    Options.optional
  ),
  allowedTools: Options.text("allowed-tools").pipe(Options.withDescription(ABOUT.allowedTools[1]), Options.optional),
  disallowedTools: Options.text("disallowed-tools").pipe(Options.withDescription(ABOUT.disallowedTools[1]), Options.optional),
  noColor: Options.boolean("no-color").pipe(Options.withDescription(ABOUT.noColor[1]))
}

/** `--allowed-tools` or `--disallowed-tools`, checked: every name a tool. */
const tools = (flag: string, value: Option.Option<string>) =>
  Option.match(value, {
    onNone: () => Effect.succeed(undefined),
    onSome: (list) => Either.match(toolList(flag, list), { onLeft: Effect.fail, onRight: Effect.succeed })
  })

/** `--session` must be a session id and `--workdir` a directory this process can use: exit 2 otherwise, before anything starts. */
const checkedSessionAndWorkdir = (session: Option.Option<string>, workdir: Option.Option<string>) =>
  Effect.suspend(() => {
    const idProblem = Option.isSome(session) ? sessionIdProblem(session.value) : undefined
    if (idProblem !== undefined) {
      return Effect.fail(new CliUsageError({ message: `--session ${JSON.stringify(Option.getOrElse(session, () => ""))} is not a session id: ${idProblem}` }))
    }
    const workdirError = Option.isSome(workdir) ? workdirProblem(workdir.value) : undefined
    return workdirError === undefined ? Effect.void : Effect.fail(new CliUsageError({ message: `--workdir: ${workdirError.detail}` }))
  })

/** The whole of stdin, as the prompt of `-p -`; an empty one is a usage error. */
const promptFromStdin = Effect.flatMap(
  Effect.promise(async () => {
    const chunks: Array<Buffer> = []
    for await (const chunk of process.stdin) chunks.push(Buffer.from(chunk))
    return Buffer.concat(chunks).toString("utf8")
  }),
  (text) => text.trim() === "" ? Effect.fail(new CliUsageError({ message: "-p -: stdin held no prompt" })) : Effect.succeed(text)
)

const liteAgent = Command.make("lite-agent", options, (args) =>
  Effect.gen(function*() {
    if (Option.isSome(args.session) && args.continue) {
      return yield* new CliUsageError({ message: "--session and --continue cannot be used together" })
    }
    if (Option.isSome(args.maxSteps) && args.maxSteps.value <= 0) {
      return yield* new CliUsageError({ message: `--max-steps must be a positive integer, got ${args.maxSteps.value}` })
    }
    yield* checkedSessionAndWorkdir(args.session, args.workdir)
    // `-p -`: the prompt is what comes on stdin.
    const prompt = Option.isSome(args.print) && args.print.value === "-" ? yield* promptFromStdin : Option.getOrUndefined(args.print)
    const allowedTools = yield* tools("--allowed-tools", args.allowedTools)
    const disallowedTools = yield* tools("--disallowed-tools", args.disallowedTools)
    const permissionMode = Option.getOrUndefined(args.permissionMode)
    // Someone can be asked: at the interactive prompt, or in print mode on a terminal.
    const canAsk = process.stdin.isTTY === true
    if (prompt !== undefined && permissionMode === undefined && !canAsk) {
      return yield* new CliUsageError({
        message: "-p without a terminal cannot ask before a tool runs: give --permission-mode " +
          "(bypassPermissions runs everything; acceptEdits runs the file tools; plan only reads; default refuses what it would ask), " +
          "and --allowed-tools for what may run anyway"
      })
    }
    const terminal = makeTerminalPermissions()
    const checkpointer = yield* checkpointerLayer(Option.getOrUndefined(args.checkpointer))
    const model = yield* modelProvider(args.model)
    const layer = agentLayer({
      workdir: Option.getOrElse(args.workdir, () => process.cwd()),
      model,
      modelName: Option.getOrUndefined(args.modelName),
      maxSteps: Option.getOrUndefined(args.maxSteps),
      sessionId: Option.getOrUndefined(args.session),
      capture: args.capture,
      checkpointer: Option.getOrUndefined(args.checkpointer),
      permissions: {
        permissionMode: permissionMode ?? "default",
        ...(allowedTools === undefined ? {} : { allowedTools }),
        ...(disallowedTools === undefined ? {} : { disallowedTools }),
        ...(canAsk || prompt === undefined ? { canUseTool: terminal.canUseTool } : {})
      }
    }, checkpointer)
    const workdir = Option.getOrElse(args.workdir, () => process.cwd())
    if (prompt !== undefined) {
      return yield* runPrint(prompt, args.outputFormat, args.continue, { terminal, workdir, noColor: args.noColor }).pipe(Effect.provide(layer))
    }
    // Interactive: one runtime for the whole conversation; disposing it closes the checkpointer.
    yield* Effect.acquireUseRelease(
      Effect.sync(() => ManagedRuntime.make(layer)),
      (runtime) =>
        Effect.promise(async () => {
          // Loaded only for a session in the terminal (not for -p).
          const { runInteractive } = await import("./interactive.js")
          return runInteractive(runtime, { continueLatest: args.continue, terminal, workdir, noColor: args.noColor })
        }),
      (runtime) => Effect.promise(() => runtime.dispose())
    )
  }))

const serveOptions = {
  host: Options.text("host").pipe(Options.withDescription(ABOUT.host[1]), Options.withDefault("127.0.0.1")),
  port: Options.integer("port").pipe(Options.withDescription(ABOUT.port[1]), Options.withDefault(DEFAULT_PORT)),
  token: Options.text("token").pipe(
    Options.withDescription(ABOUT.token[1]),
    Options.optional
  ),
  checkpointer: options.checkpointer,
  model: Options.text("model").pipe(
    Options.withDescription(ABOUT.serveModel[1]),
    Options.optional
  ),
  modelName: options.modelName,
  maxSteps: options.maxSteps,
  workdir: options.workdir,
  capture: options.capture,
  permissionMode: options.permissionMode,
  allowedTools: options.allowedTools,
  disallowedTools: options.disallowedTools
}

const serve = Command.make("serve", serveOptions, (args) =>
  Effect.gen(function*() {
    yield* checkedSessionAndWorkdir(Option.none(), args.workdir)
    const allowedTools = yield* tools("--allowed-tools", args.allowedTools)
    const disallowedTools = yield* tools("--disallowed-tools", args.disallowedTools)
    // The agent's questions wait for a client's answer over HTTP.
    // Loaded only here: the HTTP server is the one command that needs it.
    const [SessionServer, PermissionRequests] = yield* Effect.promise(() =>
      Promise.all([import("../server/SessionServer.js"), import("../server/PermissionRequests.js")])
    )
    const questions = PermissionRequests.make()
    const checkpointer = yield* checkpointerLayer(Option.getOrUndefined(args.checkpointer))
    const model = Option.isSome(args.model) ? Option.some(yield* modelProvider(args.model.value)) : Option.none()
    const token = Option.getOrUndefined(Option.orElse(args.token, () => Option.fromNullable(process.env["LITE_AGENT_TOKEN"])))
    const server = SessionServer.layer({ host: args.host, port: args.port, ...(token === undefined ? {} : { token }) }).pipe(
      Layer.provide(Layer.succeed(PermissionRequests.PermissionRequests, questions))
    )
    const serving = Option.match(model, {
      onNone: () => Layer.provide(server, checkpointer),
      onSome: (provider) =>
        Layer.provide(
          server,
          agentLayer({
            workdir: Option.getOrElse(args.workdir, () => process.cwd()),
            model: provider,
            modelName: Option.getOrUndefined(args.modelName),
            maxSteps: Option.getOrUndefined(args.maxSteps),
            sessionId: undefined,
            capture: args.capture,
            checkpointer: Option.getOrUndefined(args.checkpointer),
            permissions: {
              permissionMode: Option.getOrElse(args.permissionMode, () => "default" as const),
              ...(allowedTools === undefined ? {} : { allowedTools }),
              ...(disallowedTools === undefined ? {} : { disallowedTools }),
              canUseTool: questions.canUseTool
            }
          }, checkpointer)
        )
    })
    yield* Effect.scoped(
      Effect.gen(function*() {
        const info = Context.get(yield* Layer.build(serving), SessionServer.SessionServerInfo)
        process.stdout.write(`lite-agent serve: listening on ${info.url}${Option.isSome(model) ? " (sessions and an agent)" : " (sessions)"}\n`)
        if (info.tokenGenerated) process.stdout.write(`token: ${info.token}\n`)
        return yield* Effect.never
      })
    )
  }).pipe(
    Effect.catchIf(
      (error): error is ConfigurationError => error instanceof ConfigurationError,
      (error) => Effect.fail(new CliUsageError({ message: `serve: ${error.message}` }))
    )
  ))

const exitCodeOf = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit)) return 0
  if (Exit.isInterrupted(exit)) return 130
  return 1
}

/**
 * Run the command with the user's arguments (`process.argv` without node and the script).
 * Loading this module does nothing else, so it can be loaded ahead of time (a startup snapshot).
 */
export const runCli = (args: ReadonlyArray<string>): void => {
  // `serve` is dispatched by hand: as an @effect/cli subcommand, every unknown option of the main
  // command would be reported as an invalid subcommand. (@effect/cli skips two leading entries.)
  const isServe = args[0] === "serve"
  const parsed = isServe
    ? Command.run(serve, { name: "lite-agent serve", version: VERSION })(["node", "lite-agent", ...args.slice(1)])
    : Command.run(liteAgent, { name: "lite-agent", version: VERSION })(["node", "lite-agent", ...args])

  // A reader that stops early (`| head`) closes the pipe: not an error of the turn.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error
  })

  const main = parsed.pipe(
    Effect.catchAll((error) =>
      Effect.sync(() => {
        if (ValidationError.isValidationError(error)) {
          // @effect/cli has printed what was wrong.
          process.exitCode = 2
        } else if (error instanceof CliUsageError) {
          process.stderr.write(`lite-agent: ${error.message}\n`)
          process.exitCode = 2
        } else {
          process.stderr.write(`lite-agent: ${describeError(error)}\n`)
          process.exitCode = 1
        }
      })
    ),
    Effect.provide(Layer.mergeAll(NodeContext.layer)),
    // Seeded now: Effect's default seed is taken when it loads, which a startup snapshot would fix for every start.
    Effect.withRandom(Random.make(Math.random()))
  )

  NodeRuntime.runMain(main, {
    disableErrorReporting: true,
    teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) ? (typeof process.exitCode === "number" ? process.exitCode : 0) : exitCodeOf(exit))
  })
}
