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
import type { SessionTree } from "../core/session.js"
import type { ForkResult, RestoreResult } from "../tools/TimeTravel.js"
import { describeError } from "./setup.js"
import type { Key } from "./terminal.js"

export interface TimeTravelCommandsContext {
  readonly runtime: ManagedRuntime.ManagedRuntime<LiteAgent | Checkpointer, unknown>
  readonly agent: LiteAgentService
  readonly print: (line: string) => void
  readonly ask: (question: string) => Promise<string>
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

/** A row of the tree as `/tree` shows it. */
interface TreeRow {
  readonly kind: "checkpoint" | "tip"
  /** The checkpoint's seq, or the tip's leaf. */
  readonly seq: number
  readonly depth: number
  readonly current?: boolean
  readonly text: string
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

type Move<R extends RestoreResult> = (options: { readonly dryRun?: boolean; readonly rehome?: boolean }) => Effect.Effect<R, unknown>

export const makeTimeTravelCommands = (context: TimeTravelCommandsContext) => {
  const { agent, ask, current, print, runtime, shorten } = context
  const failed = (exit: Exit.Exit<unknown, unknown>) => Exit.isFailure(exit) ? print(`error: ${describeError(Cause.squash(exit.cause))}`) : undefined

  /** Run a restore (or its undo, a move), printing its progress; Ctrl-C interrupts it. */
  const withRestoreProgress = <A, E>(run: Effect.Effect<A, E>) =>
    context.interruptible(
      Effect.zipRight(
        Effect.forkScoped(context.printEvents(agent.events.pipe(Stream.filter((event) => event.type === "checkpoint_restore")))),
        run
      ).pipe(Effect.scoped)
    )

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
      print(`  ${displayPath(file.path)}: ${file.refusal === undefined ? action : `REFUSED (${file.refusal.reason}: ${file.refusal.detail})`}`)
    }
    for (const refusal of plan.refusals.filter((refusal) => refusal.path === undefined)) print(`  REFUSED (${refusal.reason}: ${refusal.detail})`)
    for (const command of plan.commandsNotUndone) print(`  not undone: ${command.tool} ${shorten(JSON.stringify(command.input), 60)}`)
    for (const left of plan.notCovered) print(`  ${displayPath(left.path)}: left as it is (not covered: ${left.reason})`)
  }

  /** Plan, show, ask, do: the shape of every command here that changes the workspace. */
  const planned = async <R extends RestoreResult>(
    move: Move<R>,
    describe: (plan: R) => string,
    question: string,
    yes: boolean,
    done: (result: R) => string
  ) => {
    const rehome = context.rehome ? { rehome: true } : {}
    const plan = await runtime.runPromiseExit(move({ dryRun: true, ...rehome }))
    if (Exit.isFailure(plan)) return failed(plan)
    print(describe(plan.value))
    printPlan(plan.value)
    if (plan.value.refusals.length > 0) return print("nothing was changed")
    if (!yes) {
      const answer = await ask(question)
      if (!/^y(es)?$/i.test(answer.trim())) return print("nothing was changed")
    }
    const exit = await withRestoreProgress(move(rehome))
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
    if (!args.includes("--yes")) {
      const answer = await ask("undo? [y/N] ")
      if (!/^y(es)?$/i.test(answer.trim())) return print("nothing was changed")
    }
    const exit = await withRestoreProgress(agent.undoInterruptedRestore(sessionId))
    if (Exit.isFailure(exit)) return failed(exit)
    print(`undone: ${filesChanged(exit.value)} put back as before the restore`)
  }

  const restoreTo = async (sessionId: string, seq: number, files: boolean, yes: boolean) =>
    planned(
      (options) => agent.restore(sessionId, seq, { files, ...options }),
      (plan) => plan.resumed ? `finishing the restore to checkpoint ${seq} that was cut short:` : `restore to just before checkpoint ${seq}:`,
      "restore? [y/N] ",
      yes,
      (result) => `restored: ${filesChanged(result)}; conversation ${result.conversationRestored ? "cut back" : "kept"}`
    )

  const restore = async (args: ReadonlyArray<string>) => {
    if (args.includes("--undo")) return undoInterrupted(args)
    const seqArg = args.find((arg) => !arg.startsWith("--"))
    const flags = args.filter((arg) => arg.startsWith("--"))
    const unknown = flags.filter((flag) => flag !== "--conversation-only" && flag !== "--yes")
    const seq = seqArg === undefined ? Number.NaN : Number(seqArg)
    if (!Number.isSafeInteger(seq) || seq < 0 || unknown.length > 0 || args.filter((arg) => !arg.startsWith("--")).length !== 1) {
      return print(`error: ${unknown.length > 0 ? `unknown flag ${unknown[0]}` : "give one checkpoint seq"}\nusage: /restore <seq> [--conversation-only] [--yes]`)
    }
    return restoreTo(await current(), seq, !flags.includes("--conversation-only"), flags.includes("--yes"))
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
    if (args.some((arg) => arg !== "--yes")) return print(`usage: /${reason} [--yes]`)
    const yes = args.includes("--yes")
    const sessionId = await current()
    const tree = await treeOf(sessionId)
    if (tree === undefined) return
    const move: Move<RestoreResult> = (options) => (reason === "undo" ? agent.undo(sessionId, options) : agent.redo(sessionId, options))
    if (reason === "redo") {
      if (tree.redo === undefined) return print("nothing to redo")
      return planned(move, () => `redo: back to seq ${tree.redo!.from}:`, "redo? [y/N] ", yes, moved)
    }
    // Nothing sent since the last move: that move is what to undo.
    if (tree.undo !== undefined && tree.undo.seq > tree.leaf) {
      return planned(move, () => `undo the last move: back to seq ${tree.undo!.from}:`, "undo? [y/N] ", yes, moved)
    }
    const checkpoints = await runtime.runPromise(agent.listCheckpoints(sessionId))
    const last = checkpoints.at(-1)
    if (last === undefined) return print("nothing to undo")
    print(`undo the last turn ("${shorten(last.prompt, 50)}"): /redo brings it back`)
    return restoreTo(sessionId, last.seq, true, yes)
  }

  /** The tree's rows as shown: each checkpoint (indented under the one before it), each branch's tip under its last checkpoint. */
  const rowsOf = (tree: SessionTree): Array<TreeRow> => {
    const rows: Array<TreeRow> = []
    const bySeq = new Map(tree.checkpoints.map((checkpoint) => [checkpoint.seq, checkpoint]))
    const tips = new Map<number, Array<(typeof tree.branches)[number]>>()
    for (const branch of tree.branches) {
      if (branch.checkpoint !== null) tips.set(branch.checkpoint, [...(tips.get(branch.checkpoint) ?? []), branch])
    }
    const walk = (seq: number, depth: number) => {
      const checkpoint = bySeq.get(seq)!
      const label = checkpoint.label === undefined ? "" : ` [${checkpoint.label}]`
      rows.push({
        kind: "checkpoint",
        seq,
        depth,
        text: `${"  ".repeat(depth)}${checkpoint.current ? "*" : " "} ${String(seq).padStart(4)}  "${shorten(checkpoint.prompt, 50)}"${label}`
      })
      for (const tip of tips.get(seq) ?? []) {
        const name = tip.label === undefined ? "" : ` [${tip.label}]`
        rows.push({
          kind: "tip",
          seq: tip.leaf,
          depth: depth + 1,
          current: tip.current,
          text: `${"  ".repeat(depth + 1)}${tip.current ? "→" : "·"} tip ${tip.leaf}${tip.current ? " (current)" : ""}${name}`
        })
      }
      for (const child of checkpoint.children) walk(child, depth + 1)
    }
    for (const root of tree.checkpoints.filter((checkpoint) => checkpoint.parent === null)) walk(root.seq, 0)
    return rows
  }

  /** The tip a row leads to: itself, or the first tip below a checkpoint (in its part of the tree). */
  const tipOf = (rows: ReadonlyArray<TreeRow>, index: number): TreeRow | undefined => {
    const row = rows[index]!
    if (row.kind === "tip") return row
    for (let below = index + 1; below < rows.length && rows[below]!.depth > row.depth; below++) {
      if (rows[below]!.kind === "tip") return rows[below]
    }
    return undefined
  }

  const TREE_KEYS = "  ↑/↓ move · Enter switches to that branch (files too) · l names it · q or Esc leaves"

  /**
   * `/tree`: the checkpoints of every branch as a tree — the current branch marked `*`, labels in
   * brackets, each branch's tip — to move through with the arrow keys: Enter switches to the
   * selected branch (its plan first), `l` names the selected checkpoint or tip, q or Esc leaves.
   */
  const showTree = async (args: ReadonlyArray<string>) => {
    if (args.length > 0) return print("usage: /tree")
    const sessionId = await current()
    const tree = await treeOf(sessionId)
    if (tree === undefined) return
    if (tree.checkpoints.length === 0) return print("no checkpoints yet")
    const rows = rowsOf(tree)
    if (context.keys === undefined) {
      for (const row of rows) print(`  ${row.text}`)
      return print("  /switch <tip> moves to a branch (files too), /label <seq> <name> names one, /undo and /redo walk your moves")
    }
    let selected = Math.max(0, rows.findIndex((row) => row.kind === "tip" && row.current === true))
    const render = (again: boolean) => {
      // Back over what was drawn (the rows and the keys' line), then draw again.
      if (again) process.stdout.write(`\u001b[${rows.length + 1}A\u001b[J`)
      for (const [index, row] of rows.entries()) print(`${index === selected ? "▸" : " "} ${row.text}`)
      print(TREE_KEYS)
    }
    render(false)
    let chosen: { readonly action: "switch" | "label"; readonly row: TreeRow } | undefined
    await context.keys((key) => {
      const moved = movedSelection(key, selected, rows.length)
      if (moved !== undefined) {
        selected = moved
        render(true)
        return false
      }
      if (choosesRow(key)) {
        const tip = tipOf(rows, selected)
        if (tip !== undefined) chosen = { action: "switch", row: tip }
        return true
      }
      if (key.name === "l") {
        chosen = { action: "label", row: rows[selected]! }
        return true
      }
      return leavesList(key)
    })
    if (chosen === undefined) return
    if (chosen.action === "label") {
      const name = await ask(`name for ${chosen.row.kind} ${chosen.row.seq} (empty: none): `)
      return label([String(chosen.row.seq), ...name.trim().split(/\s+/).filter((word) => word !== "")])
    }
    if (chosen.row.current === true) return print(`tip ${chosen.row.seq} is the current branch already`)
    return switchTo([String(chosen.row.seq)])
  }

  const switchTo = async (args: ReadonlyArray<string>) => {
    const yes = args.includes("--yes")
    const rest = args.filter((arg) => arg !== "--yes")
    const leaf = Number(rest[0])
    if (rest.length !== 1 || !Number.isSafeInteger(leaf) || leaf < 0) return print("usage: /switch <tip seq from /tree> [--yes]")
    const sessionId = await current()
    return planned(
      (options) => agent.switchBranch(sessionId, leaf, options),
      () => `switch to the branch ending at seq ${leaf}:`,
      "switch? [y/N] ",
      yes,
      moved
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
    const sessionId = await current()
    const from = seq === undefined ? "its tip" : `just before checkpoint ${seq}`
    return planned(
      (options) => agent.fork(sessionId, seq, { ...options, ...(workdir === undefined ? {} : { workdir }) }),
      () => workdir === undefined ? `fork this session from ${from}, here:` : `fork this session from ${from} into ${workdir}:`,
      "fork? [y/N] ",
      yes,
      (forked: ForkResult) =>
        workdir === undefined
          ? `forked: you are in session ${forked.sessionId} now (${filesChanged(forked)} changed); /undo goes back to where you were`
          : `forked: session ${forked.sessionId}, its files in ${forked.workdir}; run lite-agent --workdir ${forked.workdir} and /resume ${forked.sessionId}`
    )
  }

  const label = async (args: ReadonlyArray<string>) => {
    const seq = Number(args[0])
    if (args.length < 1 || !Number.isSafeInteger(seq) || seq <= 0) return print("usage: /label <seq> <name> (no name: remove it)")
    const exit = await runtime.runPromiseExit(agent.label(await current(), seq, args.slice(1).join(" ")))
    if (Exit.isFailure(exit)) return failed(exit)
    print(args.length > 1 ? `seq ${seq} is "${args.slice(1).join(" ")}"` : `seq ${seq} has no name now`)
  }

  return {
    restore,
    undo: (args: ReadonlyArray<string>) => undoOrRedo("undo", args),
    redo: (args: ReadonlyArray<string>) => undoOrRedo("redo", args),
    tree: showTree,
    switchTo,
    label,
    fork
  }
}
