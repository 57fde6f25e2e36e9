/**
 * Interactive mode: a prompt in the terminal. A line is a turn, printed as it happens (the
 * model's text, each tool call and its result, background tasks, a status line); a line
 * starting with `/` is a command. Ctrl-C stops what is running (a turn, a compaction) and
 * leaves the session usable; at an empty prompt, twice, or Ctrl-D, it exits.
 */
import { realpathSync } from "node:fs"
import { displayPath } from "../core/pathNames.js"
import { createInterface, type Interface } from "node:readline"
import { Cause, Effect, Exit, Fiber, type ManagedRuntime, Stream } from "effect"
import type { AgentEvent } from "../agent/AgentEvents.js"
import { LiteAgent, type LiteAgentService } from "../agent/LiteAgent.js"
import { Checkpointer } from "../core/Checkpointer.js"
import { RestoreInterruptedError, SessionWorkdirError } from "../tools/errors.js"
import { choiceOfLine, type makeTerminalPermissions, readChoice, readLine } from "./permissionPrompt.js"
import { BRACKETED_PASTE_OFF, BRACKETED_PASTE_ON, type PromptLines, promptLines } from "./promptLines.js"
import { eventLine, makeRenderer, shorten } from "./render.js"
import { makeSessionCommands } from "./sessionCommands.js"
import { describeError } from "./setup.js"
import { colorsWanted, type Key, makePaint, makeSpinner, takeKeypresses } from "./terminal.js"
import { choosesRow as choosesRowKey, LABEL_USAGE, leavesList, makeTimeTravelCommands } from "./timeTravelCommands.js"
import { makeTreeCommands } from "./treeCommands.js"

const HELP = [
  "commands:",
  "  /compact [instructions]          summarize the older conversation (Ctrl-C cancels)",
  "  /checkpoints                     this session's checkpoints",
  "  /rewind                          pick a prompt to go back to before (or Esc Esc at an empty prompt)",
  "  /restore <seq> [--conversation-only | --files-only] [--include-user-edits] [--yes]",
  "                                   go back to just before a checkpoint (shows the plan, asks first);",
  "                                   the same restore finishes one a crash cut short",
  "  /restore --undo [--yes]          put back the files of a restore a crash cut short",
  "  /undo [--yes]                    undo the last restore, switch or redo; else the last turn",
  "  /redo [--yes]                    redo the last undo",
  "  /tree                            every branch, where it parts, and where you are: restore, switch, fork",
  "  /switch <tip> [--yes]            move to another branch (from /tree), files too",
  `  ${LABEL_USAGE.padEnd(33)}name a checkpoint or a branch's tip`,
  "  /fork [seq] [--to <dir>] [--yes] a new session from before a checkpoint (or the tip), here or in <dir>",
  "  /sessions                        the sessions, most recent first",
  "  /resume [id]                     continue another session (the start of its id is enough; none: pick one)",
  "  /clear                           start a new session (the old one is kept)",
  "  /help                            this list",
  "  /exit                            leave (or Ctrl-D, or Ctrl-C twice at an empty prompt)"
].join("\n")

interface Running {
  readonly cancel: () => void
}

export interface InteractiveSettings {
  readonly continueLatest: boolean
  /** Where the agent's permission questions are asked: this terminal, once it is set up. */
  readonly terminal: ReturnType<typeof makeTerminalPermissions>
  readonly workdir: string
  readonly noColor: boolean
  /** `--rehome`: a session whose log names another workdir is moved here (by its next turn or move) rather than refused. */
  readonly rehome: boolean
  /** `--session` or `--resume` named this session (it exists): it is continued, and where it belongs is said at the start. */
  readonly resumeId?: string | undefined
  /** `--resume` without an id: the picker of this directory's sessions opens first. */
  readonly pickAtStart?: boolean | undefined
}

export const runInteractive = async (
  runtime: ManagedRuntime.ManagedRuntime<LiteAgent | Checkpointer, unknown>,
  settings: InteractiveSettings
): Promise<void> => {
  const { continueLatest } = settings
  const agent: LiteAgentService = await runtime.runPromise(LiteAgent)
  const checkpointer = await runtime.runPromise(Checkpointer)
  const paint = makePaint(colorsWanted(process.stdout, settings.noColor))
  const spinner = makeSpinner(process.stdout, paint)
  const renderer = makeRenderer({ paint, spinner, write: (text) => process.stdout.write(text), workdir: settings.workdir })
  const print = (line: string) => {
    spinner.stop()
    process.stdout.write(`${line}\n`)
  }
  let resumedLatest = false
  if (settings.resumeId !== undefined) await runtime.runPromise(agent.resume(settings.resumeId))
  if (continueLatest) {
    const [latest] = await runtime.runPromise(checkpointer.list())
    if (latest !== undefined) await runtime.runPromise(agent.resume(latest.id))
    resumedLatest = latest !== undefined
  }
  const current = () => runtime.runPromise(agent.sessionId)
  print(`lite-agent — session ${await current()} — /help for commands, Ctrl-D to exit`)

  // A line editor on a terminal; from a pipe, plain lines (one prompt each, no cursor escapes written).
  const rl: Interface = createInterface({ input: process.stdin, output: process.stdout, terminal: process.stdin.isTTY === true, prompt: "> " })
  /** Leaving was asked for (/exit, Ctrl-C twice): what is queued is not run. Input that ends (Ctrl-D, a pipe's end) runs what came first. */
  let leaving = false
  const leave = () => {
    leaving = true
    rl.close()
  }
  let running: Running | undefined
  let interruptedOnce = false
  // The prompt's lines (set up below); Ctrl-C drops a prompt begun with a trailing \.
  let prompts: PromptLines | undefined
  rl.on("SIGINT", () => {
    if (running !== undefined) {
      running.cancel()
      return
    }
    const halfTyped = rl.line.length > 0
    // Ctrl-C on a half-typed line clears it, as shells do.
    if (halfTyped) rl.write(null, { ctrl: true, name: "u" })
    if (prompts?.discard() === true) {
      print("\n(the prompt begun is dropped)")
      rl.setPrompt("> ")
      rl.prompt()
      interruptedOnce = false
      return
    }
    if (halfTyped) {
      interruptedOnce = false
      return
    }
    if (interruptedOnce) {
      leave()
      return
    }
    interruptedOnce = true
    print("\n(Ctrl-C again to exit, or Ctrl-D)")
    rl.prompt()
  })

  // Background tasks report to every subscriber, not to the turn's stream: their starts are
  // shown from here; a completion is too when it is logged between turns (during a turn, the
  // turn's stream carries it).
  await runtime.runPromise(agent.addListener((event) => {
    renderer.beforeTool(event)
    const completedBetweenTurns = running === undefined && event.type === "session_event" && event.event._tag === "BackgroundCompleted"
    if (event.type !== "background_started" && !completedBetweenTurns) return
    const line = eventLine(event, paint)
    if (line === undefined) return
    if (running !== undefined) return print(line)
    process.stdout.write(`\n${line}\n`)
    rl.prompt(true)
  }))

  const ask = (question: string) => new Promise<string>((resolve) => rl.question(question, resolve))

  // Permission questions: one key on a terminal, else a line (y, n, t, a, s).
  settings.terminal.attach({
    paint,
    workdir: settings.workdir,
    print: (line) => {
      renderer.pause()
      print(line)
    },
    choose: process.stdin.isTTY
      ? (signal, ready) => readChoice(process.stdin, signal, ready)
      : async (_signal, ready) => {
        ready()
        for (;;) {
          const choice = choiceOfLine(await ask("  y/n/t/a/s: "))
          if (choice !== undefined) return choice
        }
      },
    readLine: process.stdin.isTTY
      ? (question, signal) => {
        process.stdout.write(question)
        return readLine(process.stdin, (text) => process.stdout.write(text), signal)
      }
      : async (question) => (await ask(question)).trim(),
    diffShown: renderer.diffShown
  }, renderer.reached)

  /** Run `effect` until it ends or Ctrl-C stops it: by interrupting it, unless `cancel` says how. */
  const interruptible = async <A>(effect: Effect.Effect<A, unknown>, cancel?: () => void): Promise<Exit.Exit<A, unknown>> => {
    const fiber = runtime.runFork(effect)
    running = { cancel: cancel ?? (() => runtime.runFork(Fiber.interrupt(fiber))) }
    try {
      return await runtime.runPromise(Fiber.await(fiber))
    } finally {
      running = undefined
    }
  }

  const printEvents = (stream: Stream.Stream<AgentEvent, unknown>) =>
    Stream.runForEach(stream, (event) => Effect.sync(() => renderer.show(event)))

  const turn = async (text: string) => {
    renderer.turnStarted()
    const exit = await interruptible(printEvents(agent.run(text, settings.rehome ? { rehome: true } : undefined))).finally(renderer.pause)
    if (Exit.isSuccess(exit)) return
    if (Exit.isInterrupted(exit)) return print("(interrupted: the turn stopped; the next one goes on from the log)")
    const error = Cause.squash(exit.cause)
    print(`error: ${describeError(error)}`)
    if (error instanceof SessionWorkdirError) print("(run lite-agent in that directory, or start again here with --rehome to move the session here)")
    if (error instanceof RestoreInterruptedError) {
      const finish = error.move === undefined ? `/restore ${error.checkpoint}` : `/${error.move.reason === "switch" ? `switch ${error.move.to}` : error.move.reason}`
      print(`(here: ${finish} finishes it, /restore --undo puts its files back)`)
    }
  }

  const compact = async (instructions: string) => {
    // Ctrl-C aborts through the signal, so the compaction ends `cancelled` in the stage it was in.
    const controller = new AbortController()
    const exit = await interruptible(
      printEvents(agent.compactRun(instructions === "" ? undefined : instructions, { signal: controller.signal })),
      () => controller.abort()
    )
    if (Exit.isSuccess(exit)) return
    const error = Cause.squash(exit.cause)
    print(
      typeof error === "object" && error !== null && "_tag" in error && error._tag === "CompactionCancelledError"
        ? "(compaction cancelled: the session is as it was)"
        : `error: ${describeError(error)}`
    )
  }

  const checkpoints = async () => {
    const sessionId = await current()
    const list = await runtime.runPromise(agent.listCheckpoints(sessionId))
    if (list.length === 0) print("no checkpoints yet")
    for (const checkpoint of list) {
      const time = new Date(checkpoint.ts).toISOString().replace("T", " ").slice(0, 19)
      const unavailable = checkpoint.unavailableFiles.length === 0 ? "" : `; cannot restore: ${checkpoint.unavailableFiles.join(", ")}`
      print(`  ${String(checkpoint.seq).padStart(4)}  ${time}  "${shorten(checkpoint.prompt, 50)}"  changed after: ${checkpoint.files.map(displayPath).join(", ") || "-"}${unavailable}`)
    }
    const interrupted = await runtime.runPromise(agent.interruptedRestore(sessionId))
    if (interrupted !== undefined) {
      const [what, finish] = interrupted.move === undefined
        ? [`a restore to checkpoint ${interrupted.checkpoint}`, `/restore ${interrupted.checkpoint}`]
        : [`an ${interrupted.move.reason} to seq ${interrupted.move.to}`, interrupted.move.reason === "switch" ? `/switch ${interrupted.move.to}` : `/${interrupted.move.reason}`]
      print(`${what} was cut short (${interrupted.files.length} file(s), some may be half restored): ${finish} finishes it, /restore --undo puts its files back`)
    }
  }

  /** Keys one at a time for `/tree`: the prompt's keypress handling is set aside until `onKey` is done. */
  const keys = (onKey: (key: Key) => boolean) =>
    new Promise<void>((resolve) => {
      const input = process.stdin
      const taken = takeKeypresses(input)
      const listener = (_text: unknown, key: Key | undefined) => {
        if (key === undefined || !onKey(key)) return
        input.off("keypress", listener)
        taken.giveBack()
        resolve()
      }
      input.on("keypress", listener)
    })

  /** A yes or no: one key on a terminal (y yes; n, Esc, Enter or q no), else a line. */
  const confirm = async (question: string): Promise<boolean> => {
    if (!process.stdin.isTTY) return /^y(es)?$/i.test((await ask(`${question} [y/N] `)).trim())
    process.stdout.write(`${question} y/n `)
    let answer = false
    await keys((key) => {
      if (key.name === "y") answer = true
      return key.name === "y" || key.name === "n" || choosesRowKey(key) || leavesList(key)
    })
    print(answer ? "yes" : "no")
    return answer
  }

  const timeTravelContext = {
    runtime,
    agent,
    print,
    ask,
    confirm,
    current,
    interruptible,
    printEvents,
    shorten,
    rehome: settings.rehome,
    keys: process.stdin.isTTY ? keys : undefined
  }
  const timeTravel = makeTimeTravelCommands(timeTravelContext)
  const pictures = makeTreeCommands({
    ...timeTravelContext,
    commands: timeTravel,
    columns: () => process.stdout.columns ?? 80,
    write: (text) => process.stdout.write(text)
  })

  const sessionCommands = makeSessionCommands({
    runtime,
    agent,
    checkpointer,
    print,
    paint,
    current,
    workdir: realpathSync(settings.workdir),
    rehome: settings.rehome,
    keys: process.stdin.isTTY ? keys : undefined
  })

  const command = async (line: string) => {
    const [name = "", ...args] = line.slice(1).trim().split(/\s+/).filter((part) => part !== "")
    const rest = line.slice(1).trim().slice(name.length).trim()
    switch (name) {
      case "help":
        return print(HELP)
      case "exit":
      case "quit":
        leave()
        return
      case "compact":
        return compact(rest)
      case "checkpoints":
        return checkpoints()
      case "restore":
        return timeTravel.restore(args)
      case "undo":
        return timeTravel.undo(args)
      case "redo":
        return timeTravel.redo(args)
      case "tree":
        return pictures.tree(args)
      case "rewind":
        return pictures.rewind(args)
      case "switch":
        return timeTravel.switchTo(args)
      case "label":
        return timeTravel.label(args)
      case "fork":
        return timeTravel.fork(args)
      case "sessions":
        return sessionCommands.sessions()
      case "resume":
        return sessionCommands.resume(args)
      case "clear": {
        const id = await runtime.runPromise(agent.clear())
        return print(`new session ${id}`)
      }
      default:
        return print(`unknown command /${name}: /help lists the commands`)
    }
  }

  // A trailing \ or a paste keeps one prompt going over several lines.
  prompts = promptLines(rl, process.stdin)
  if (process.stdin.isTTY && process.stdout.isTTY) {
    process.stdout.write(BRACKETED_PASTE_ON)
    rl.on("close", () => process.stdout.write(BRACKETED_PASTE_OFF))
  }
  // --session or --continue: where the session belongs, and where it was left.
  if (resumedLatest || settings.resumeId !== undefined) await sessionCommands.opened(await current())
  if (settings.pickAtStart === true && !(await sessionCommands.pick())) print(`a new session: ${await current()}`)
  // Esc Esc at an empty prompt opens the rewind picker.
  let atPrompt = false
  let escapedAt: number | undefined
  if (process.stdin.isTTY) {
    process.stdin.on("keypress", (_text: unknown, key: Key | undefined) => {
      if (key?.name !== "escape" || !atPrompt || rl.line !== "") return
      // Typed at once, the two come as one Esc with meta; else the second within a second.
      const twice = key.meta === true || (escapedAt !== undefined && Date.now() - escapedAt < 1000)
      escapedAt = twice ? undefined : Date.now()
      if (!twice) return
      atPrompt = false
      process.stdout.write("\n")
      void pictures.rewind([]).catch((error: unknown) => print(`error: ${describeError(error)}`)).finally(() => {
        atPrompt = true
        rl.prompt()
      })
    })
  }
  rl.prompt()
  atPrompt = true
  // Input typed while a turn runs waits its turn (queued); Ctrl-C still reaches the SIGINT handler.
  for await (const input of prompts) {
    atPrompt = false
    interruptedOnce = false
    const line = input.trim()
    if (line !== "") {
      try {
        if (line.startsWith("/")) await command(line)
        else await turn(line)
      } catch (error) {
        print(`error: ${describeError(error)}`)
      }
    }
    if (leaving) break
    rl.setPrompt(prompts.prompt())
    rl.prompt()
    atPrompt = true
  }
}
