/**
 * Print mode: one turn, its answer on stdout. `text` prints the model's last text; `json` the
 * whole result (session, text, tool calls, usage, head); `stream-json` every agent event as one
 * JSON object per line, the result last. A tool call that needs permission is asked about on the
 * terminal (stderr and one key); without a terminal, the mode given decides alone.
 */
import { openSync, writeSync } from "node:fs"
import { Effect, Stream } from "effect"
import type { AgentEvent } from "../agent/AgentEvents.js"
import { LiteAgent } from "../agent/LiteAgent.js"
import { Checkpointer } from "../core/Checkpointer.js"
import { jsonText } from "../core/encoding.js"
import { type makeTerminalPermissions, readChoice, readLine } from "./permissionPrompt.js"
import { lookUpSession } from "./sessionLookup.js"
import { CliUsageError } from "./setup.js"
import { colorsWanted, makePaint, stdinIsTerminal } from "./terminal.js"

const line = (text: string) => Effect.sync(() => process.stdout.write(`${text}\n`))

/**
 * Where a permission question is written: stderr on a terminal; stderr sent elsewhere (`2>file`)
 * would hide a question that waits for a key, so it then goes to the terminal too.
 */
const questionWriter = (): { readonly write: (text: string) => void; readonly partial: (text: string) => void } => {
  const toStderr = (text: string) => void process.stderr.write(text)
  let toTerminal: ((text: string) => void) | undefined
  if (!process.stderr.isTTY) {
    try {
      const terminal = openSync("/dev/tty", "w")
      toTerminal = (text) => void writeSync(terminal, text)
    } catch {
      // No terminal to write to: stderr alone.
    }
  }
  const partial = (text: string) => {
    toTerminal?.(text)
    toStderr(text)
  }
  return { partial, write: (text) => partial(`${text}\n`) }
}

export interface PrintSettings {
  readonly terminal: ReturnType<typeof makeTerminalPermissions>
  readonly workdir: string
  readonly noColor: boolean
  /** `--rehome`: a session whose log names another workdir is moved here rather than refused. */
  readonly rehome: boolean
  /** `--session <id>` (exactly) or `--resume <id>` (or the start of one): the session to continue, which must exist. */
  readonly named?: { readonly wanted: string; readonly prefix: boolean } | undefined
}

/** The id of the session `named` names, or a usage error saying why there is none and which ids are close. */
export const namedSession = (named: { readonly wanted: string; readonly prefix: boolean }, flag: string) =>
  Effect.flatMap(Checkpointer, (checkpointer) =>
    Effect.flatMap(checkpointer.list(), (sessions) => {
      const looked = lookUpSession(named.wanted, sessions.map((session) => session.id), named.prefix)
      return "found" in looked
        ? Effect.succeed(looked.found)
        : Effect.fail(new CliUsageError({ message: `${flag} ${named.wanted}: ${looked.problem} (without ${flag}, a new session starts)` }))
    }))

export const runPrint = (prompt: string, format: "text" | "json" | "stream-json", continueLatest: boolean, settings: PrintSettings) =>
  Effect.gen(function*() {
    const agent = yield* LiteAgent
    // On a terminal, a question goes to stderr (stdout is the answer) and takes one key.
    if (stdinIsTerminal()) {
      const { partial, write } = questionWriter()
      settings.terminal.attach({
        paint: makePaint(colorsWanted(process.stderr, settings.noColor)),
        workdir: settings.workdir,
        print: write,
        choose: (signal, ready) => readChoice(process.stdin, signal, ready),
        readLine: (question, signal) => {
          partial(question)
          return readLine(process.stdin, partial, signal)
        }
      })
    }
    if (settings.named !== undefined) yield* agent.resume(yield* namedSession(settings.named, settings.named.prefix ? "--resume" : "--session"))
    if (continueLatest) {
      const checkpointer = yield* Checkpointer
      const [latest] = yield* checkpointer.list()
      if (latest === undefined) return yield* new CliUsageError({ message: "--continue: there is no session to continue yet" })
      yield* agent.resume(latest.id)
    }
    let result: Extract<AgentEvent, { type: "result" }>["result"] | undefined
    yield* Stream.runForEach(agent.run(prompt, settings.rehome ? { rehome: true } : undefined), (event) => {
      if (event.type === "result") result = event.result
      return format === "stream-json" ? line(jsonText(event)) : Effect.void
    })
    if (result === undefined) return
    if (format === "text") yield* line(result.text)
    if (format === "json") yield* line(jsonText(result))
  })
