/**
 * The interactive CLI's time travel: `/restore`, `/undo`, `/redo`, `/tree`, `/switch`, `/label`, `/fork`.
 * Each change of the workspace shows its plan first — every file it writes or deletes, every
 * refusal, what it leaves as it is — and asks before doing it (`--yes` skips the question).
 */
import { displayPath } from "../core/pathNames.js"
import { Cause, Effect, Exit, type ManagedRuntime, Stream } from "effect"
import type { AgentEvent } from "../agent/AgentEvents.js"
import type { LiteAgent, LiteAgentService } from "../agent/LiteAgent.js"
import type { Checkpointer } from "../core/Checkpointer.js"
import type { Refusal } from "../core/errors.js"
import type { SessionTree } from "../core/session.js"
import { RestoreRefusedError } from "../tools/errors.js"
import type { ForkResult, RestoreResult } from "../tools/TimeTravel.js"
import { describeError } from "./setup.js"
import type { Key } from "./terminal.js"

export interface TimeTravelCommandsContext {
  readonly runtime: ManagedRuntime.ManagedRuntime<LiteAgent | Checkpointer, unknown>
  readonly agent: LiteAgentService
  readonly print: (line: string) => void
  readonly ask: (question: string) => Promise<string>
  /** A yes or no: one key on a terminal (y, anything else no), else a line. */
  readonly confirm: (question: string) => Promise<boolean>
  readonly current: () => Promise<string>
  /** Run until done or Ctrl-C interrupts it. */
  readonly interruptible: <A>(effect: Effect.Effect<A, unknown>) => Promise<Exit.Exit<A, unknown>>
  readonly printEvents: (stream: Stream.Stream<AgentEvent, unknown>) => Effect.Effect<void, unknown>
  readonly shorten: (text: string, max?: number) => string
  /** `--rehome`: a session whose log names another workdir is moved here rather than refused. */
  readonly rehome: boolean
  /**
   * Keys one at a time, the prompt's own handling set aside, until `onKey` says it is done;
   * absent when the input is not a terminal (then `/tree` only prints the tree).
   */
  readonly keys?: ((onKey: (key: Key) => boolean) => Promise<void>) | undefined
}

/** In a list navigated with the keys (`/tree`, the `/resume` picker): the row ↑/↓ (or k/j) select, or undefined for another key. */
export const movedSelection = (key: Key, selected: number, rows: number): number | undefined =>
  key.name === "up" || key.name === "k"
    ? Math.max(0, selected - 1)
    : key.name === "down" || key.name === "j"
    ? Math.min(rows - 1, selected + 1)
    : undefined

/** Whether a key leaves such a list: q, Esc, Ctrl-C or Ctrl-D. */
export const leavesList = (key: Key): boolean =>
  key.name === "escape" || key.name === "q" || (key.ctrl === true && (key.name === "c" || key.name === "d"))

/** Whether a key chooses the selected row. */
export const choosesRow = (key: Key): boolean => key.name === "return" || key.name === "enter"

/** `/label`'s usage, as `/help` and the command say it. */
export const LABEL_USAGE = "/label <seq> [name]   (no name: remove it)"

type Move<R extends RestoreResult> = (options: {
  readonly dryRun?: boolean
  readonly rehome?: boolean
  readonly includeUserEdits?: boolean
}) => Effect.Effect<R, unknown>

/** What a restore puts back: the conversation and the files, or one of them. */
export type RestoreMode = "both" | "conversation" | "files"

/** The words and flags of a command line: flags are the arguments starting with `--`. */
const flagsOf = (args: ReadonlyArray<string>, known: ReadonlyArray<string>) => {
  const flags = args.filter((arg) => arg.startsWith("--"))
  return {
    words: args.filter((arg) => !arg.startsWith("--")),
    has: (flag: string) => flags.includes(flag),
    unknown: flags.find((flag) => !known.includes(flag))
  }
}

export const makeTimeTravelCommands = (context: TimeTravelCommandsContext) => {
  const { agent, confirm, current, print, runtime, shorten } = context
  const failed = (exit: Exit.Exit<unknown, unknown>) => Exit.isFailure(exit) ? print(`error: ${describeError(Cause.squash(exit.cause))}`) : undefined

  /** Run a restore (or its undo, a move), printing its progress; Ctrl-C interrupts it. */
  const withRestoreProgress = <A, E>(run: Effect.Effect<A, E>) =>
    context.interruptible(
      Effect.zipRight(
        Effect.forkScoped(context.printEvents(agent.events.pipe(Stream.filter((event) => event.type === "checkpoint_restore")))),
        run
      ).pipe(Effect.scoped)
    )

  const printRefusal = (refusal: Refusal) =>
    print(`  ${refusal.path === undefined ? "" : `${displayPath(refusal.path)}: `}REFUSED (${refusal.reason}: ${refusal.detail})`)

  /** The plan's lines: each file and what happens to it, each refusal, what is left as it is. */
  const printPlan = (plan: RestoreResult) => {
    for (const file of plan.plan) {
      const action = file.alreadyRestored
        ? "already back"
        : file.action === "delete"
        ? "deleted"
        : file.action === "write"
        ? "put back"
        : file.action === "link"
        ? "link put back"
        : file.action === "directory"
        ? "directory put back"
        : "unchanged"
      if (file.refusal === undefined) print(`  ${displayPath(file.path)}: ${action}`)
      else printRefusal({ ...file.refusal, path: file.path })
    }
    for (const refusal of plan.refusals.filter((refusal) => refusal.path === undefined)) printRefusal(refusal)
    for (const command of plan.commandsNotUndone) print(`  not undone: ${command.tool} ${shorten(JSON.stringify(command.input), 60)}`)
    for (const left of plan.notCovered) print(`  ${displayPath(left.path)}: left as it is (not covered: ${left.reason})`)
  }

  /**
   * Plan, show, ask, do: the shape of every command here that changes the workspace. A plan
   * refused as a whole (no such branch, another branch's checkpoint files-only) is shown as a plan
   * too; `retry` is the command that would also undo edits made outside the session, when those
   * are what it refused.
   */
  const planned = async <R extends RestoreResult>(
    move: Move<R>,
    describe: (plan: R | undefined) => string,
    question: string,
    options: { readonly yes: boolean; readonly includeUserEdits?: boolean; readonly retry?: string },
    done: (result: R) => string
  ) => {
    const moveOptions = { ...(context.rehome ? { rehome: true } : {}), ...(options.includeUserEdits === true ? { includeUserEdits: true } : {}) }
    const plan = await runtime.runPromiseExit(move({ dryRun: true, ...moveOptions }))
    if (Exit.isFailure(plan)) {
      const error = Cause.squash(plan.cause)
      if (!(error instanceof RestoreRefusedError)) return failed(plan)
      print(describe(undefined))
      for (const refusal of error.refusals) printRefusal(refusal)
      return print("nothing was changed")
    }
    print(describe(plan.value))
    printPlan(plan.value)
    if (plan.value.refusals.length > 0) {
      if (options.retry !== undefined && plan.value.refusals.some((refusal) => refusal.reason === "modified_externally")) {
        print(`(${options.retry} --include-user-edits undoes those edits too)`)
      }
      return print("nothing was changed")
    }
    if (!options.yes && !(await confirm(question))) return print("nothing was changed")
    const exit = await withRestoreProgress(move(moveOptions))
    if (Exit.isFailure(exit)) return failed(exit)
    print(done(exit.value))
  }

  const filesChanged = (result: RestoreResult) => result.restoredFiles.map(displayPath).join(", ") || "no files"

  const undoInterrupted = async (args: ReadonlyArray<string>) => {
    if (args.some((arg) => arg !== "--undo" && arg !== "--yes")) return print("usage: /restore --undo [--yes]")
    const sessionId = await current()
    const interrupted = await runtime.runPromiseExit(agent.interruptedRestore(sessionId))
    if (Exit.isFailure(interrupted)) return failed(interrupted)
    if (interrupted.value === undefined) return print("no restore of this session was cut short: nothing to undo")
    const what = interrupted.value.move === undefined
      ? `the restore to checkpoint ${interrupted.value.checkpoint}`
      : `the ${interrupted.value.move.reason} to seq ${interrupted.value.move.to}`
    print(`undo ${what} that was cut short: its files go back to before it:`)
    for (const path of interrupted.value.files) print(`  ${displayPath(path)}`)
    if (!args.includes("--yes") && !(await confirm("undo?"))) return print("nothing was changed")
    const exit = await withRestoreProgress(agent.undoInterruptedRestore(sessionId))
    if (Exit.isFailure(exit)) return failed(exit)
    print(`undone: ${filesChanged(exit.value)} put back as before the restore`)
  }

  const restoreFlags = (mode: RestoreMode) => mode === "conversation" ? " --conversation-only" : mode === "files" ? " --files-only" : ""

  /** Restore to just before checkpoint `seq`: the conversation and the files, or one of them. */
  const restoreTo = async (sessionId: string, seq: number, mode: RestoreMode, options: { readonly yes: boolean; readonly includeUserEdits?: boolean }) =>
    planned(
      (moveOptions) => agent.restore(sessionId, seq, { files: mode !== "conversation", conversation: mode !== "files", ...moveOptions }),
      (plan) =>
        plan?.resumed === true
          ? `finishing the restore to checkpoint ${seq} that was cut short:`
          : `restore ${mode === "both" ? "" : mode === "files" ? "the files only " : "the conversation only "}to just before checkpoint ${seq}:`,
      "restore?",
      { ...options, retry: `/restore ${seq}${restoreFlags(mode)}` },
      (result) => `restored: ${filesChanged(result)}; conversation ${result.conversationRestored ? "cut back" : "kept"}`
    )

  const RESTORE_USAGE = "usage: /restore <seq> [--conversation-only | --files-only] [--include-user-edits] [--yes]"

  const restore = async (args: ReadonlyArray<string>) => {
    if (args.includes("--undo")) return undoInterrupted(args)
    const { has, unknown, words } = flagsOf(args, ["--conversation-only", "--files-only", "--include-user-edits", "--yes"])
    const seq = words.length === 1 ? Number(words[0]) : Number.NaN
    if (unknown !== undefined) return print(`error: unknown flag ${unknown}\n${RESTORE_USAGE}`)
    if (!Number.isSafeInteger(seq) || seq < 0) return print(`error: give one checkpoint seq\n${RESTORE_USAGE}`)
    if (has("--conversation-only") && has("--files-only")) return print(`error: --conversation-only and --files-only restore nothing together\n${RESTORE_USAGE}`)
    const mode: RestoreMode = has("--conversation-only") ? "conversation" : has("--files-only") ? "files" : "both"
    return restoreTo(await current(), seq, mode, { yes: has("--yes"), includeUserEdits: has("--include-user-edits") })
  }

  const treeOf = async (sessionId: string): Promise<SessionTree | undefined> => {
    const exit = await runtime.runPromiseExit(agent.tree(sessionId))
    if (Exit.isFailure(exit)) {
      failed(exit)
      return undefined
    }
    return exit.value
  }

  const moved = (result: RestoreResult) => `done: ${filesChanged(result)} changed; the conversation is the branch's`

  /**
   * `/undo`: right after a restore, a switch or a redo, undo it; otherwise undo the last turn
   * (restore to just before the last checkpoint). `/redo`: redo the last undo.
   */
  const undoOrRedo = async (reason: "undo" | "redo", args: ReadonlyArray<string>) => {
    const { has, unknown, words } = flagsOf(args, ["--include-user-edits", "--yes"])
    if (unknown !== undefined || words.length > 0) return print(`usage: /${reason} [--include-user-edits] [--yes]`)
    const options = { yes: has("--yes"), includeUserEdits: has("--include-user-edits"), retry: `/${reason}` }
    const sessionId = await current()
    const tree = await treeOf(sessionId)
    if (tree === undefined) return
    const move: Move<RestoreResult> = (moveOptions) => (reason === "undo" ? agent.undo(sessionId, moveOptions) : agent.redo(sessionId, moveOptions))
    if (reason === "redo") {
      if (tree.redo === undefined) return print("nothing to redo: no undo since the last turn")
      return planned(move, () => `redo: back to seq ${tree.redo!.from}:`, "redo?", options, moved)
    }
    // Nothing sent since the last move: that move is what to undo.
    if (tree.undo !== undefined && tree.undo.seq > tree.leaf) {
      return planned(move, () => `undo the last move: back to seq ${tree.undo!.from}:`, "undo?", options, moved)
    }
    const checkpoints = await runtime.runPromise(agent.listCheckpoints(sessionId))
    const last = checkpoints.at(-1)
    if (last === undefined) return print("nothing to undo: no turn yet")
    print(`undo the last turn ("${shorten(last.prompt, 50)}"): /redo brings it back`)
    return restoreTo(sessionId, last.seq, "both", options)
  }

  /** Move to the branch whose tip is `leaf`, its plan first. */
  const switchToTip = async (leaf: number, options: { readonly yes: boolean; readonly includeUserEdits?: boolean }) => {
    const sessionId = await current()
    return planned(
      (moveOptions) => agent.switchBranch(sessionId, leaf, moveOptions),
      () => `switch to the branch ending at seq ${leaf}:`,
      "switch?",
      { ...options, retry: `/switch ${leaf}` },
      moved
    )
  }

  const switchTo = async (args: ReadonlyArray<string>) => {
    const { has, unknown, words } = flagsOf(args, ["--include-user-edits", "--yes"])
    const leaf = Number(words[0])
    if (unknown !== undefined || words.length !== 1 || !Number.isSafeInteger(leaf) || leaf < 0) {
      return print("usage: /switch <tip seq from /tree> [--include-user-edits] [--yes]")
    }
    return switchToTip(leaf, { yes: has("--yes"), includeUserEdits: has("--include-user-edits") })
  }

  /** A fork from just before checkpoint `seq` (undefined: the tip), here or into `workdir`. */
  const forkFrom = async (seq: number | undefined, workdir: string | undefined, yes: boolean) => {
    const sessionId = await current()
    const from = seq === undefined ? "its tip" : `just before checkpoint ${seq}`
    return planned(
      (options) => agent.fork(sessionId, seq, { ...options, ...(workdir === undefined ? {} : { workdir }) }),
      () => workdir === undefined ? `fork this session from ${from}, here:` : `fork this session from ${from} into ${workdir}:`,
      "fork?",
      { yes },
      (forked: ForkResult) =>
        workdir === undefined
          ? `forked: you are in session ${forked.sessionId} now (${filesChanged(forked)} changed); /undo goes back to where you were`
          : `forked: session ${forked.sessionId}, its files in ${forked.workdir}; run lite-agent --workdir ${forked.workdir} and /resume ${forked.sessionId}`
    )
  }

  /**
   * `/fork [seq] [--to <dir>] [--yes]`: a new session from just before checkpoint `seq` (or from
   * the tip) — here, where the files move as for a restore and the fork becomes the current
   * session, or written into `<dir>` (new or empty) to run beside this one.
   */
  const fork = async (args: ReadonlyArray<string>) => {
    const usage = "usage: /fork [seq] [--to <new or empty directory>] [--yes]"
    const yes = args.includes("--yes")
    const to = args.indexOf("--to")
    const workdir = to === -1 ? undefined : args[to + 1]
    const rest = args.filter((arg, index) => arg !== "--yes" && index !== to && (to === -1 || index !== to + 1))
    const seq = rest[0] === undefined ? undefined : Number(rest[0])
    if (rest.length > 1 || (to !== -1 && workdir === undefined) || (seq !== undefined && (!Number.isSafeInteger(seq) || seq <= 0))) {
      return print(usage)
    }
    return forkFrom(seq, workdir, yes)
  }

  const label = async (args: ReadonlyArray<string>) => {
    const seq = Number(args[0])
    if (args.length < 1 || !Number.isSafeInteger(seq) || seq <= 0) return print(`usage: ${LABEL_USAGE}`)
    const exit = await runtime.runPromiseExit(agent.label(await current(), seq, args.slice(1).join(" ")))
    if (Exit.isFailure(exit)) return failed(exit)
    print(args.length > 1 ? `seq ${seq} is "${args.slice(1).join(" ")}"` : `seq ${seq} has no name now`)
  }

  return {
    restore,
    restoreTo,
    undo: (args: ReadonlyArray<string>) => undoOrRedo("undo", args),
    redo: (args: ReadonlyArray<string>) => undoOrRedo("redo", args),
    switchTo,
    switchToTip,
    label,
    fork,
    forkFrom,
    treeOf
  }
}

export type TimeTravelCommands = ReturnType<typeof makeTimeTravelCommands>
