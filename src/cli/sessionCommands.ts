/**
 * The interactive commands about sessions: `/sessions` (each with its first prompt, age and
 * size), `/resume` (an id, the start of exactly one, or — with no argument — a picker: ↑/↓ and
 * Enter), and the recap of the last turns printed when a session is resumed (`--continue`,
 * `/resume`). An unknown id is an error, never a new empty session (`/clear` starts one).
 */
import { Cause, Effect, Exit, type ManagedRuntime } from "effect"
import type { LiteAgent, LiteAgentService } from "../agent/LiteAgent.js"
import type { Checkpointer, CheckpointerService } from "../core/Checkpointer.js"
import { contentText } from "../core/events.js"
import * as Session from "../core/session.js"
import { foldedLog } from "../tools/SessionStates.js"
import { shorten, sizeOf } from "./render.js"
import { describeError } from "./setup.js"
import { type Key, makeRedraw, type Paint } from "./terminal.js"
import { lookUpSession } from "./sessionLookup.js"
import { choosesRow, leavesList, movedSelection } from "./timeTravelCommands.js"

/** How long ago, in the largest unit that fits. */
export const ageOf = (ms: number): string => {
  const seconds = Math.max(0, Math.round(ms / 1000))
  if (seconds < 60) return `${seconds}s ago`
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h ago`
  return `${Math.floor(seconds / 86_400)} d ago`
}

/**
 * The last `turns` turns of a session's current branch, a few lines each: the prompt, what the
 * model last said in it, and how many tool calls it made. Pure.
 */
export const recapLines = (state: Session.SessionState, turns = 3): Array<string> => {
  const { entries, summary } = Session.conversation(state)
  const recap: Array<{ prompt: string; answer: string | undefined; tools: number }> = []
  for (const { event } of entries) {
    if (event._tag === "UserMessage" && event.origin === "user") {
      recap.push({ prompt: contentText(event.content), answer: undefined, tools: 0 })
      continue
    }
    const last = recap.at(-1)
    if (last === undefined || event._tag !== "AssistantMessage") continue
    const text = event.content.flatMap((block) => block.type === "text" && block.text.trim() !== "" ? [block.text] : []).join(" ")
    if (text !== "") last.answer = text
    last.tools += event.content.filter((block) => block.type === "tool_use").length
  }
  const shown = recap.slice(-turns)
  const lines: Array<string> = []
  const earlier = recap.length - shown.length
  if (summary !== undefined) lines.push(`  (summarised before: ${shorten(summary, 100)})`)
  if (earlier > 0) lines.push(`  (${earlier} earlier turn${earlier === 1 ? "" : "s"})`)
  for (const turn of shown) {
    lines.push(`  > ${shorten(turn.prompt, 100)}`)
    const tools = turn.tools === 0 ? "" : ` [${turn.tools} tool call${turn.tools === 1 ? "" : "s"}]`
    lines.push(`    ${turn.answer === undefined ? "(no answer)" : shorten(turn.answer, 160)}${tools}`)
  }
  return lines
}

export interface SessionCommandsContext {
  readonly runtime: ManagedRuntime.ManagedRuntime<LiteAgent | Checkpointer, unknown>
  readonly agent: LiteAgentService
  readonly checkpointer: CheckpointerService
  readonly print: (line: string) => void
  readonly paint: Paint
  readonly current: () => Promise<string>
  /** This run's workdir (a real path): a session whose log names another is said to belong there. */
  readonly workdir: string
  /** `--rehome` was given: such a session moves here with its next turn or move. */
  readonly rehome: boolean
  /** Keys one at a time (a terminal), for the picker; absent: `/resume` lists and asks for an id. */
  readonly keys: ((onKey: (key: Key) => boolean) => Promise<void>) | undefined
}

/** How many of the most recent sessions the picker and `/sessions` show. */
const LISTED = 20
/** Sessions looked at past those shown, for the picker of one directory's: a bound on the logs read. */
const LOOKED_PAST = 200

export const makeSessionCommands = (context: SessionCommandsContext) => {
  const { agent, checkpointer, paint, print, runtime } = context

  /**
   * The most recent sessions (of this directory only, unless `everywhere`), each as one row: id
   * (whole, or its first 8 characters), age, prompts and size, first prompt, and whose fork it is.
   */
  const rows = async (
    idLength: number,
    everywhere: boolean,
    /** Sessions read already (a picker switching between this directory's and every one's reads each log once). */
    read: Map<string, readonly [Session.SessionState, { readonly logBytes: number; readonly snapshotBytes: number }]> = new Map()
  ) => {
    const sessions = await runtime.runPromise(agent.listSessions())
    const now = Date.now()
    const listed: Array<{ readonly id: string; readonly text: string }> = []
    for (const [looked, session] of sessions.entries()) {
      if (listed.length === LISTED || looked === LISTED + LOOKED_PAST) break
      const known = read.get(session.id)
      const [state, stats] = known ?? await runtime.runPromise(Effect.all([foldedLog(checkpointer, session.id), agent.sessionStats(session.id)]))
      read.set(session.id, [state, stats])
      if (!everywhere && state.metadata.workdir !== context.workdir) continue
      const checkpoints = Session.checkpoints(state)
      const first = checkpoints[0]?.prompt
      const fork = state.forkedFrom === undefined ? "" : paint.dim(`  (fork of ${state.forkedFrom.session.slice(0, idLength)})`)
      const text = `${session.id.slice(0, idLength)}  ${ageOf(now - session.mtime.getTime()).padEnd(10)} ${
        `${checkpoints.length} prompt${checkpoints.length === 1 ? "" : "s"}, ${sizeOf(stats.logBytes + stats.snapshotBytes)}`.padEnd(22)
      } ${first === undefined ? paint.dim("(no prompt yet)") : `"${shorten(first, 60)}"`}${fork}${
        everywhere && state.metadata.workdir !== undefined && state.metadata.workdir !== context.workdir ? paint.dim(`  in ${state.metadata.workdir}`) : ""
      }`
      listed.push({ id: session.id, text })
    }
    return listed
  }

  /**
   * What is said of a session opened (`--continue`, `--session`, `/resume`): which directory it
   * belongs to (a warning when it is not this one), then a recap of its last turns. One read of its log.
   */
  const opened = async (sessionId: string) => {
    const state = await runtime.runPromise(foldedLog(checkpointer, sessionId))
    const workdir = state.metadata.workdir
    if (workdir === context.workdir) print(paint.dim(`its workdir: ${workdir}`))
    else if (workdir !== undefined) {
      print(`this session belongs to ${workdir}, not this directory (${context.workdir}):`)
      print(
        context.rehome
          ? "  --rehome: its next turn or move makes this directory its workdir (what differs here is then taken for your edits)"
          : "  its turns, restores and moves are refused here; run lite-agent there, or start again with --rehome to move it here"
      )
    }
    const lines = recapLines(state)
    if (lines.length > 0) print(paint.dim("the last turns:"))
    for (const line of lines) print(paint.dim(line))
  }

  const resumeId = async (sessionId: string) => {
    const exit = await runtime.runPromiseExit(agent.resume(sessionId))
    if (Exit.isFailure(exit)) return print(`error: ${describeError(Cause.squash(exit.cause))}`)
    print(`session ${sessionId}`)
    await opened(sessionId)
  }

  const PICKER_KEYS = "  ↑/↓ move · Enter resumes that session · a every directory's / this one's · q or Esc leaves"

  /**
   * `/resume` alone (and `lite-agent --resume`): pick one of this directory's most recent sessions
   * with the arrow keys; `a` shows every directory's. Says whether one was resumed.
   */
  const pick = async (): Promise<boolean> => {
    let everywhere = false
    const read = new Map<string, readonly [Session.SessionState, { readonly logBytes: number; readonly snapshotBytes: number }]>()
    let listed = await rows(8, everywhere, read)
    if (context.keys === undefined) {
      if (listed.length === 0) listed = await rows(8, (everywhere = true), read)
      if (listed.length === 0) {
        print("no sessions yet")
        return false
      }
      for (const row of listed) print(`  ${row.text}`)
      print("usage: /resume <id> (the start of an id is enough)")
      return false
    }
    const now = await context.current()
    let selected = Math.max(0, listed.findIndex((row) => row.id === now))
    const redraw = makeRedraw(print, (text) => process.stdout.write(text))
    const render = () =>
      redraw([
        everywhere ? "sessions of every directory:" : `sessions of ${context.workdir}:`,
        ...(listed.length === 0 ? [paint.dim(everywhere ? "  (none yet)" : "  (none here yet: a shows every directory's)")] : []),
        ...listed.map((row, index) => `${index === selected ? "▸" : " "} ${row.text}${row.id === now ? paint.dim("  (current)") : ""}`),
        PICKER_KEYS
      ])
    render()
    let chosen: string | undefined
    let toggle = false
    for (;;) {
      await context.keys((key) => {
        const moved = movedSelection(key, selected, Math.max(1, listed.length))
        if (moved !== undefined) {
          selected = moved
          render()
          return false
        }
        if (key.name === "a") return (toggle = true)
        if (choosesRow(key)) chosen = listed[selected]?.id
        return choosesRow(key) || leavesList(key)
      })
      if (!toggle) break
      toggle = false
      everywhere = !everywhere
      listed = await rows(8, everywhere, read)
      selected = Math.max(0, listed.findIndex((row) => row.id === now))
      render()
    }
    if (chosen === undefined) return false
    await resumeId(chosen)
    return true
  }

  return {
    opened,
    sessions: async () => {
      const listed = await rows(36, true)
      const now = await context.current()
      if (listed.length === 0) return print("no sessions yet")
      for (const row of listed) print(`  ${row.id === now ? "*" : " "} ${row.text}`)
    },
    /** The picker alone: whether a session was resumed from it. */
    pick,
    resume: async (args: ReadonlyArray<string>) => {
      if (args.length === 0) return void (await pick())
      if (args.length !== 1) return print("error: give one session id\nusage: /resume [<id>]")
      // An id, or the start of exactly one: never a new empty session by mistake (/clear starts one).
      const sessions = await runtime.runPromiseExit(agent.listSessions())
      if (Exit.isFailure(sessions)) return print(`error: ${describeError(Cause.squash(sessions.cause))}`)
      const looked = lookUpSession(args[0]!, sessions.value.map((session) => session.id), true)
      if ("problem" in looked) return print(`error: ${looked.problem} (/sessions lists them, /clear starts a new one)`)
      return resumeId(looked.found)
    }
  }
}
