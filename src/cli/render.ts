/**
 * A turn as the terminal shows it: the model's text as it streams, each tool call and its
 * result, each edit as a coloured diff, background tasks, compaction and restore progress, a
 * spinner with elapsed time and tokens while the model works, and a status line at the end.
 */
import type { AgentEvent } from "../agent/AgentEvents.js"
import { makeEditWatch } from "./edits.js"
import { type Paint, paintDiff, type Spinner } from "./terminal.js"

export const shorten = (text: string, max = 80): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`
}

/** Bytes in the largest binary unit that fits, up to GiB: "512 B", "1.5 KiB", "2.0 MiB". */
export const sizeOf = (bytes: number): string =>
  bytes < 1024
    ? `${bytes} B`
    : bytes < 1024 ** 2
    ? `${(bytes / 1024).toFixed(1)} KiB`
    : bytes < 1024 ** 3
    ? `${(bytes / 1024 ** 2).toFixed(1)} MiB`
    : `${(bytes / 1024 ** 3).toFixed(1)} GiB`

/** Lines of a tool's output shown under its call; the rest is counted. */
export const RESULT_LINES = 3

/** One line per thing worth seeing that is not streamed text or a diff (a tool's result: its first lines). */
export const eventLine = (event: AgentEvent, paint: Paint): string | undefined => {
  switch (event.type) {
    case "session_event": {
      const logged = event.event
      if (logged._tag === "AssistantMessage") {
        const text = logged.content.flatMap((block) => (block.type === "text" && block.text.trim() !== "" ? [block.text.trim()] : []))
        return text.length === 0 ? undefined : text.join("\n")
      }
      if (logged._tag === "BackgroundCompleted") {
        return paint.dim(`  [background ${logged.taskId} ended: ${logged.exitCode === null ? logged.signal ?? "no exit code" : `exit ${logged.exitCode}`}]`)
      }
      if (logged._tag === "PermissionDecided" && logged.decidedBy !== "callback") {
        // Decided without asking: say so (the answers given at the prompt were shown there).
        return paint.dim(`  [${logged.behavior === "allow" ? "allowed" : "denied"} ${logged.toolName}: ${logged.decidedBy}${logged.message === undefined ? "" : ` — ${logged.message}`}]`)
      }
      return undefined
    }
    case "tool_start":
      return `  ${paint.cyan("→")} ${event.name} ${shorten(JSON.stringify(event.input), 60)}`
    case "tool_end": {
      // The first lines of what it printed, and how many more there are.
      const lines = event.output.replace(/\n+$/, "").split("\n")
      const shown = lines.slice(0, RESULT_LINES)
      const more = lines.length - shown.length
      return [
        `  ${event.isError ? paint.red("←") : paint.green("←")} ${shorten(shown[0] ?? "", 100)}${event.isError ? paint.red(" (error)") : ""}`,
        ...shown.slice(1).map((line) => `    ${shorten(line, 100)}`),
        ...(more > 0 ? [paint.dim(`    … +${more} line${more === 1 ? "" : "s"}`)] : [])
      ].join("\n")
    }
    case "background_started":
      return paint.dim(`  [background ${event.taskId} started: ${shorten(event.command, 60)}]`)
    case "compaction": {
      const counts = event.total === undefined ? "" : ` ${event.completed}/${event.total}`
      const tokens = event.tokens === undefined ? "" : ` ${event.tokens.tokens} tokens (${event.tokens.method})`
      const result = event.result === undefined
        ? ""
        : event.result.compacted
        ? ` ${event.result.before} → ${event.result.after} tokens (${event.result.method})`
        : ` nothing to reduce: ${event.result.reason ?? ""}`
      return `  [compact] ${event.phase} ${event.stage}${counts}${tokens}${result}`
    }
    case "checkpoint_restore":
      return event.phase === "progress"
        ? `  [restore] ${event.completed}/${event.total} ${event.path}`
        : event.phase === "start"
        ? `  [restore] ${
          event.mode === "finish" ? "finishing an interrupted restore" : event.mode === "undo" ? "undoing an interrupted restore" : "start"
        }: ${event.total} file(s)`
        : `  [restore] ${event.phase}`
    case "result":
      return paint.dim(
        `[session ${event.result.sessionId.slice(0, 8)} · head ${event.result.head} · ${event.result.usage.inputTokens} in / ${event.result.usage.outputTokens} out tokens]`
      )
    case "text_delta":
    case "permission_request":
      return undefined
  }
}

export interface Renderer {
  /** Every agent event, synchronously as it happens (from `addListener`): notes each edited file before its tool runs. */
  readonly beforeTool: (event: AgentEvent) => void
  /** A turn starts: the spinner until something arrives. */
  readonly turnStarted: () => void
  /** One event of the turn's stream, shown. */
  readonly show: (event: AgentEvent) => void
  /**
   * Stop drawing until the next event, the next line starting at column 0: the turn is over (or
   * stopped), or a question is about to be asked.
   */
  readonly pause: () => void
  /** The diff of this call was shown with its permission prompt: not again after it runs. */
  readonly diffShown: (toolUseId: string) => void
  /** Resolves once the stream has shown everything up to this call's `permission_request`: a prompt printed then comes after it. */
  readonly reached: (toolUseId: string) => Promise<void>
}

export const makeRenderer = (settings: {
  readonly paint: Paint
  readonly spinner: Spinner
  readonly write: (text: string) => void
  readonly workdir: string
}): Renderer => {
  const { paint, spinner, write } = settings
  const edits = makeEditWatch(settings.workdir)
  const diffsShown = new Set<string>()
  const requestsShown = new Set<string>()
  const waiting = new Map<string, () => void>()
  let streaming = false
  let tokens = 0
  /** The spinner off and a streamed text's line ended. */
  const endLine = () => {
    spinner.stop()
    if (streaming) write("\n")
    streaming = false
  }
  const print = (line: string) => {
    endLine()
    write(`${line}\n`)
  }
  return {
    beforeTool: (event) => {
      if (event.type === "tool_start") edits.started(event.toolUseId, event.name, event.input)
    },
    turnStarted: () => {
      tokens = 0
      spinner.setTokens(0)
      spinner.start("thinking")
    },
    show: (event) => {
      switch (event.type) {
        case "text_delta":
          spinner.stop()
          streaming = true
          write(event.delta)
          return
        case "session_event":
          if (event.event._tag === "AssistantMessage") {
            tokens += event.event.usage?.inputTokens ?? 0
            tokens += event.event.usage?.outputTokens ?? 0
            spinner.setTokens(tokens)
            // Its text is on the screen already: end its line.
            if (streaming) return endLine()
          }
          break
        case "tool_end": {
          print(eventLine(event, paint) ?? "")
          const diff = edits.ended(event.toolUseId, event.isError)
          if (!diffsShown.delete(event.toolUseId)) for (const line of paintDiff(paint, diff)) print(`    ${line}`)
          spinner.start("thinking")
          return
        }
        case "tool_start": {
          print(eventLine(event, paint) ?? "")
          spinner.start(`running ${event.name}`)
          return
        }
        case "permission_request": {
          spinner.stop()
          const waiter = waiting.get(event.toolUseId)
          waiting.delete(event.toolUseId)
          if (waiter === undefined) requestsShown.add(event.toolUseId)
          else waiter()
          return
        }
      }
      const line = eventLine(event, paint)
      if (line !== undefined) print(line)
    },
    pause: endLine,
    diffShown: (toolUseId) => {
      diffsShown.add(toolUseId)
    },
    reached: (toolUseId) =>
      requestsShown.delete(toolUseId) ? Promise.resolve() : new Promise<void>((resolve) => waiting.set(toolUseId, resolve))
  }
}
