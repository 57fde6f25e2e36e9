/**
 * Print mode: one turn, its answer on stdout. `text` prints the model's last text; `json` the
 * whole result (session, text, tool calls, usage, head); `stream-json` every agent event as one
 * JSON object per line, the result last. A tool call that needs permission is asked about on the
 * terminal (stderr and one key); without a terminal, the mode given decides alone.
 */
import { Effect, Stream } from "effect"
import type { AgentEvent } from "../agent/AgentEvents.js"
import { LiteAgent } from "../agent/LiteAgent.js"
import { Checkpointer } from "../core/Checkpointer.js"
import { jsonText } from "../core/encoding.js"
import { type makeTerminalPermissions, readChoice } from "./permissionPrompt.js"
import { CliUsageError } from "./setup.js"
import { colorsWanted, makePaint, stdinIsTerminal } from "./terminal.js"

const line = (text: string) => Effect.sync(() => process.stdout.write(`${text}\n`))


export interface PrintSettings {
  readonly terminal: ReturnType<typeof makeTerminalPermissions>
  readonly workdir: string
  readonly noColor: boolean
  /** `--rehome`: a session whose log names another workdir is moved here rather than refused. */
  readonly rehome: boolean
}

export const runPrint = (prompt: string, format: "text" | "json" | "stream-json", continueLatest: boolean, settings: PrintSettings) =>
  Effect.gen(function*() {
    const agent = yield* LiteAgent
    // On a terminal, a question goes to stderr (stdout is the answer) and takes one key.
    if (stdinIsTerminal()) {
      settings.terminal.attach({
        paint: makePaint(colorsWanted(process.stderr, settings.noColor)),
        workdir: settings.workdir,
        print: (text) => process.stderr.write(`${text}\n`),
        choose: (signal, ready) => readChoice(process.stdin, signal, ready)
      })
    }
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
