/**
 * The `lite-agent` command (main.ts loads it once it is not a request for help or the version).
 * Without `-p`, an interactive session in the terminal
 * (interactive.ts); print mode (`-p "prompt"`) runs one turn and prints the answer as text, one
 * JSON document, or one JSON object per event (`stream-json`). Never loaded by the library's
 * entry points.
 *
 * `lite-agent serve` serves sessions (and, with `--model`, an agent) over HTTP: see
 * src/server/SessionServer.ts. `lite-agent store du|gc` looks after the store: storeCommands.ts.
 *
 * Exit codes: 0 done; 1 the turn failed (the error on stderr); 2 the command line cannot run
 * as given (the message says why); 130 interrupted (Ctrl-C).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Context, Effect, Either, Exit, Layer, ManagedRuntime, Option, Random } from "effect"
import { LiteAgent } from "../agent/LiteAgent.js"
import { ConfigurationError } from "../core/errors.js"
import type { PermissionMode } from "../core/events.js"
import { sessionIdProblem } from "../core/sessionId.js"
import { workdirProblem } from "../tools/Workspace.js"
import { parseOptions, type ParsedOptions } from "./args.js"
import { answeredHelpOrVersion, MAIN_OPTIONS, OPTIONS, SERVE_OPTIONS } from "./help.js"
import { makeTerminalPermissions } from "./permissionPrompt.js"
import { namedSession, runPrint } from "./print.js"
import { storeCommand } from "./storeCommands.js"
import { stdinIsTerminal } from "./terminal.js"
import { agentLayer, checkpointerLayer, CliUsageError, describeError, modelProvider, toolList } from "./setup.js"

const DEFAULT_PORT = 7321
export type OutputFormat = (typeof OPTIONS.outputFormat.takes)[number]

// The option table (help.ts) imports nothing, so it spells the permission modes out: they must be the library's.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
const permissionModesAgree: Same<(typeof OPTIONS.permissionMode.takes)[number], PermissionMode> = true
void permissionModesAgree

/** `--allowed-tools` or `--disallowed-tools`, checked: every name a tool. */
const tools = (flag: string, value: string | undefined) =>
  value === undefined
    ? Effect.succeed(undefined)
    : Either.match(toolList(flag, value), { onLeft: Effect.fail, onRight: Effect.succeed })

/** `--session` must be a session id and `--workdir` a directory this process can use: exit 2 otherwise, before anything starts. */
const checkedSessionAndWorkdir = (session: string | undefined, workdir: string | undefined) =>
  Effect.suspend(() => {
    const idProblem = session === undefined ? undefined : sessionIdProblem(session)
    if (idProblem !== undefined) {
      return Effect.fail(new CliUsageError({ message: `--session ${JSON.stringify(session)} is not a session id: ${idProblem}` }))
    }
    const workdirError = workdir === undefined ? undefined : workdirProblem(workdir)
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

/** `lite-agent [options]`: a session in the terminal, or one turn with `-p`. */
const liteAgent = (args: ParsedOptions<(typeof MAIN_OPTIONS)[number]>) =>
  Effect.gen(function*() {
    const given = [args.session !== undefined && "--session", args.resume !== undefined && "--resume", args.continue && "--continue"].filter((flag) => flag !== false)
    if (given.length > 1) return yield* new CliUsageError({ message: `${given.join(" and ")} cannot be used together` })
    if (args.resume === "" && args.print !== undefined) {
      return yield* new CliUsageError({ message: "--resume without an id opens a picker, in the terminal: with -p, give the session's id (or the start of it)" })
    }
    // The session to continue, which must exist (looked up once the store is open).
    const named = args.session !== undefined
      ? { wanted: args.session, prefix: false }
      : args.resume !== undefined && args.resume !== ""
      ? { wanted: args.resume, prefix: true }
      : undefined
    if (args.maxSteps !== undefined && args.maxSteps <= 0) {
      return yield* new CliUsageError({ message: `--max-steps must be a positive integer, got ${args.maxSteps}` })
    }
    yield* checkedSessionAndWorkdir(args.session, args.workdir)
    // `-p -`: the prompt is what comes on stdin.
    const prompt = args.print === "-" ? yield* promptFromStdin : args.print
    const allowedTools = yield* tools("--allowed-tools", args.allowedTools)
    const disallowedTools = yield* tools("--disallowed-tools", args.disallowedTools)
    const permissionMode = args.permissionMode
    // Someone can be asked: at the interactive prompt, or in print mode on a terminal.
    const canAsk = stdinIsTerminal()
    if (prompt !== undefined && permissionMode === undefined && !canAsk) {
      return yield* new CliUsageError({
        message: "-p without a terminal cannot ask before a tool runs: give --permission-mode " +
          "(bypassPermissions runs everything; acceptEdits runs the file tools; plan only reads; default refuses what it would ask), " +
          "and --allowed-tools for what may run anyway"
      })
    }
    const terminal = makeTerminalPermissions()
    const checkpointer = yield* checkpointerLayer(args.checkpointer, args.maxStoreBytes)
    const model = yield* modelProvider(args.model ?? "anthropic")
    const workdir = args.workdir ?? process.cwd()
    const layer = agentLayer({
      workdir,
      model,
      modelName: args.modelName,
      maxSteps: args.maxSteps,
      sessionId: undefined,
      capture: args.capture ?? "all",
      checkpointer: args.checkpointer,
      permissions: {
        permissionMode: permissionMode ?? "default",
        ...(allowedTools === undefined ? {} : { allowedTools }),
        ...(disallowedTools === undefined ? {} : { disallowedTools }),
        ...(canAsk || prompt === undefined ? { canUseTool: terminal.canUseTool } : {})
      }
    }, checkpointer)
    if (prompt !== undefined) {
      return yield* runPrint(prompt, args.outputFormat ?? "text", args.continue, { terminal, workdir, noColor: args.noColor, rehome: args.rehome, named })
        .pipe(Effect.provide(layer))
    }
    // Interactive: one runtime for the whole conversation; disposing it closes the checkpointer.
    yield* Effect.acquireUseRelease(
      Effect.sync(() => ManagedRuntime.make(layer)),
      (runtime) =>
        Effect.gen(function*() {
          // The agent and its store, built now: what stops them (a store that cannot be opened) is the command's error.
          yield* yield* Effect.promise(() => runtime.runPromiseExit(Effect.asVoid(LiteAgent)))
          const sessionId = named === undefined
            ? undefined
            : yield* yield* Effect.promise(() => runtime.runPromiseExit(namedSession(named, named.prefix ? "--resume" : "--session")))
          return yield* Effect.promise(async () => {
            // Loaded only for a session in the terminal (not for -p).
            const { runInteractive } = await import("./interactive.js")
            return runInteractive(runtime, {
              continueLatest: args.continue,
              terminal,
              workdir,
              noColor: args.noColor,
              rehome: args.rehome,
              resumeId: sessionId,
              pickAtStart: args.resume === ""
            })
          })
        }),
      (runtime) => Effect.promise(() => runtime.dispose())
    )
  })

/** `--permission-timeout <seconds>` as the question registry takes it: 0 is no limit; unset, the registry's default. */
const questionTimeoutMs = (seconds: number | undefined, maxMs: number) =>
  Effect.suspend(() => {
    if (seconds === undefined) return Effect.succeed(undefined)
    if (seconds === 0) return Effect.succeed(Infinity)
    const maxSeconds = Math.floor(maxMs / 1000)
    return seconds > 0 && seconds <= maxSeconds
      ? Effect.succeed(seconds * 1000)
      : Effect.fail(new CliUsageError({
        message: `--permission-timeout takes a number of seconds from 1 to ${maxSeconds}, or 0 to wait without limit; got ${seconds}`
      }))
  })

/** `lite-agent serve [options]`: sessions, and with `--model` an agent, over HTTP. */
const serve = (args: ParsedOptions<(typeof SERVE_OPTIONS)[number]>) =>
  Effect.gen(function*() {
    yield* checkedSessionAndWorkdir(undefined, args.workdir)
    const allowedTools = yield* tools("--allowed-tools", args.allowedTools)
    const disallowedTools = yield* tools("--disallowed-tools", args.disallowedTools)
    // The agent's questions wait for a client's answer over HTTP.
    // Loaded only here: the HTTP server is the one command that needs it.
    const [SessionServer, PermissionRequests] = yield* Effect.promise(() =>
      Promise.all([import("../server/SessionServer.js"), import("../server/PermissionRequests.js")])
    )
    const questions = PermissionRequests.make({ timeoutMs: yield* questionTimeoutMs(args.permissionTimeout, PermissionRequests.MAX_TIMEOUT_MS) })
    const checkpointer = yield* checkpointerLayer(args.checkpointer, args.maxStoreBytes)
    const model = args.serveModel === undefined ? Option.none() : Option.some(yield* modelProvider(args.serveModel))
    const token = args.token ?? process.env["LITE_AGENT_TOKEN"]
    const server = SessionServer.layer({ host: args.host ?? "127.0.0.1", port: args.port ?? DEFAULT_PORT, ...(token === undefined ? {} : { token }) }).pipe(
      Layer.provide(Layer.succeed(PermissionRequests.PermissionRequests, questions))
    )
    const serving = Option.match(model, {
      onNone: () => Layer.provide(server, checkpointer),
      onSome: (provider) =>
        Layer.provide(
          server,
          agentLayer({
            workdir: args.workdir ?? process.cwd(),
            model: provider,
            modelName: args.modelName,
            maxSteps: args.maxSteps,
            sessionId: undefined,
            capture: args.capture ?? "all",
            checkpointer: args.checkpointer,
            permissions: {
              permissionMode: args.permissionMode ?? "default",
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
  )

const exitCodeOf = (exit: Exit.Exit<unknown, unknown>): number => {
  if (Exit.isSuccess(exit)) return 0
  if (Exit.isInterrupted(exit)) return 130
  return 1
}

/** The command the arguments name: `serve`, `store <command>`, or a session (interactive, or `-p`). */
const command = (args: ReadonlyArray<string>): Effect.Effect<void, unknown> => {
  switch (args[0]) {
    case "serve":
      return Either.match(parseOptions("lite-agent serve", SERVE_OPTIONS, args.slice(1)), {
        onLeft: (message) => new CliUsageError({ message }),
        onRight: serve
      })
    case "store":
      return storeCommand(args.slice(1))
    default:
      return Either.match(parseOptions("lite-agent", MAIN_OPTIONS, args), {
        onLeft: (message) => new CliUsageError({ message }),
        onRight: liteAgent
      })
  }
}

/**
 * Run the command with the user's arguments (`process.argv` without node and the script).
 * Loading this module does nothing else, so it can be loaded ahead of time (a startup snapshot).
 */
export const runCli = (args: ReadonlyArray<string>): void => {
  // Asked of a process started from the snapshot too (bin/lite-agent sends these to main.js).
  if (answeredHelpOrVersion(args)) return
  const parsed = command(args)

  // A reader that stops early (`| head`) closes the pipe: not an error of the turn.
  process.stdout.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code !== "EPIPE") throw error
  })

  const main = parsed.pipe(
    Effect.catchAll((error) =>
      Effect.sync(() => {
        if (error instanceof CliUsageError) {
          process.stderr.write(`lite-agent: ${error.message}\n`)
          process.exitCode = 2
        } else {
          process.stderr.write(`lite-agent: ${describeError(error)}\n`)
          process.exitCode = 1
        }
      })
    ),
    // Seeded now: Effect's default seed is taken when it loads, which a startup snapshot would fix for every start.
    Effect.withRandom(Random.make(Math.random()))
  )

  NodeRuntime.runMain(main, {
    disableErrorReporting: true,
    teardown: (exit, onExit) => onExit(Exit.isSuccess(exit) ? (typeof process.exitCode === "number" ? process.exitCode : 0) : exitCodeOf(exit))
  })
}
