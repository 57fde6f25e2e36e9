/**
 * The terminal's pictures of time travel, driven by keys: `/tree` (the one picture of the
 * session's tree — the current branch flat, other branches where they part, one "you are here")
 * and the rewind picker (`/rewind`, or Esc Esc at an empty prompt: the branch's prompts, newest
 * first). Whatever is chosen shows its plan and asks before it runs, as the typed commands do.
 */
import { Exit } from "effect"
import type { Checkpoint } from "../core/session.js"
import { type PictureRow, pictureRows, treePicture } from "../core/treePicture.js"
import { type Key, makeRedraw } from "./terminal.js"
import {
  choosesRow,
  leavesList,
  movedSelection,
  type RestoreMode,
  type TimeTravelCommands,
  type TimeTravelCommandsContext
} from "./timeTravelCommands.js"
import { rewindRowText, treeRowText } from "./treeLines.js"

export interface TreeCommandsContext extends TimeTravelCommandsContext {
  readonly commands: TimeTravelCommands
  /** The terminal's width, in columns. */
  readonly columns: () => number
  /** Write without a newline (to draw over what a list drew). */
  readonly write: (text: string) => void
}

const TREE_KEYS = "  ↑/↓ move · Enter restore or switch · s switch to its branch · f fork · l name · ←/→ fold · q leaves"
const REWIND_KEYS = "  ↑/↓ move · Enter rewind to before that prompt · q or Esc leaves"

/** What a key in a one-line menu stands for. */
interface MenuChoice<A> {
  readonly key: string
  readonly text: string
  readonly value: A
}

export const makeTreeCommands = (context: TreeCommandsContext) => {
  const { agent, commands, current, print, runtime } = context
  const width = () => Math.max(40, context.columns())

  /**
   * A list on the screen, redrawn in place as the keys move its selection: `lines` draws it,
   * `onKey` answers each key (true: the list is done). Without a terminal, it is printed once.
   */
  const navigate = async (draw: () => ReadonlyArray<string>, onKey: (key: Key) => boolean) => {
    const redraw = makeRedraw(print, context.write)
    const render = () => redraw(draw())
    render()
    await context.keys!((key) => {
      const done = onKey(key)
      if (!done) render()
      return done
    })
  }

  /** One key among `choices` (Esc, q or Ctrl-C: none), asked on one line. */
  const menu = async <A>(question: string, choices: ReadonlyArray<MenuChoice<A>>): Promise<A | undefined> => {
    print(`${question} ${choices.map((choice) => `${choice.key} ${choice.text}`).join(" · ")} · Esc nothing`)
    let chosen: A | undefined
    await context.keys!((key) => {
      const choice = choices.find((each) => each.key === key.name)
      if (choice !== undefined) chosen = choice.value
      return choice !== undefined || leavesList(key)
    })
    if (chosen === undefined) print("nothing was changed")
    return chosen
  }

  const restoreMenu = (seq: number) =>
    menu<RestoreMode>(`restore to just before checkpoint ${seq}:`, [
      { key: "b", text: "conversation and files", value: "both" },
      { key: "c", text: "conversation only", value: "conversation" },
      { key: "f", text: "files only", value: "files" }
    ])

  /** Restore to before checkpoint `seq` of the current branch, the mode chosen from the menu. */
  const restoreChosen = async (seq: number) => {
    const mode = await restoreMenu(seq)
    if (mode !== undefined) await commands.restoreTo(await current(), seq, mode, { yes: false })
  }

  /** A checkpoint of another branch: restoring there moves to that branch; or switch to its tip, or fork. */
  const otherBranchChosen = async (row: PictureRow) => {
    const action = await menu<"restore" | "switch" | "fork">(`checkpoint ${row.seq} is on another branch:`, [
      { key: "r", text: "restore to just before it (conversation and files)", value: "restore" },
      { key: "s", text: `switch to that branch's tip (${row.branch.tip})`, value: "switch" },
      { key: "f", text: "fork from it", value: "fork" }
    ])
    if (action === "restore") await commands.restoreTo(await current(), row.seq, "both", { yes: false })
    if (action === "switch") await commands.switchToTip(row.branch.tip, { yes: false })
    if (action === "fork") await commands.forkFrom(row.seq, undefined, false)
  }

  /**
   * `/tree`: the picture of the session's tree, to move through with the keys. Enter on a
   * checkpoint offers restore (conversation and files, or one) on the current branch, or restore,
   * switch and fork on another; on another branch's tip, switch; s switches to the selected row's
   * branch, f forks from the selected checkpoint, l names the row, ←/→ fold and unfold a branch.
   */
  const tree = async (args: ReadonlyArray<string>) => {
    if (args.length > 0) return print("usage: /tree")
    const found = await commands.treeOf(await current())
    if (found === undefined) return
    if (found.checkpoints.length === 0) return print("no checkpoints yet")
    const picture = treePicture(found)
    const prunedNote = picture.pruned.length === 0 ? [] : [`  (${picture.pruned.length} pruned branch${picture.pruned.length === 1 ? "" : "es"} not shown)`]
    const folded = new Set<number>()
    let rows = pictureRows(picture, folded)
    if (context.keys === undefined) {
      for (const row of rows) print(`  ${treeRowText(row, width())}`)
      for (const line of prunedNote) print(line)
      return print("  /restore <seq> goes back to before a checkpoint, /switch <tip> moves to a branch, /label <seq> <name> names one")
    }
    let selected = Math.max(0, rows.findIndex((row) => row.here))
    let chosen: { readonly action: "enter" | "switch" | "fork" | "label"; readonly row: PictureRow } | undefined
    await navigate(
      () => [...rows.map((row, index) => `${index === selected ? "▸" : " "} ${treeRowText(row, width())}`), ...prunedNote, TREE_KEYS],
      (key) => {
        const moved = movedSelection(key, selected, rows.length)
        if (moved !== undefined) {
          selected = moved
          return false
        }
        const row = rows[selected]!
        if (key.name === "left" || key.name === "right") {
          // A branch folds to its tip row, which stays selected.
          if (row.branch.current) return false
          if (key.name === "left") folded.add(row.branch.tip)
          else folded.delete(row.branch.tip)
          rows = pictureRows(picture, folded)
          selected = Math.max(0, rows.findIndex((each) => each.branch.tip === row.branch.tip && (key.name === "right" || each.kind === "tip")))
          return false
        }
        const action = choosesRow(key) ? "enter" : key.name === "s" ? "switch" : key.name === "f" ? "fork" : key.name === "l" ? "label" : undefined
        if (action !== undefined) chosen = { action, row }
        return action !== undefined || leavesList(key)
      }
    )
    if (chosen === undefined) return
    const { action, row } = chosen
    if (action === "label") {
      const name = await context.ask(`name for ${row.kind === "tip" ? "tip" : "checkpoint"} ${row.seq} (empty: none): `)
      return commands.label([String(row.seq), ...name.trim().split(/\s+/).filter((word) => word !== "")])
    }
    if (action === "fork") {
      if (row.kind === "tip") return row.here ? commands.forkFrom(undefined, undefined, false) : print("select a checkpoint to fork from it (f on the tip you are at forks from there)")
      return commands.forkFrom(row.seq, undefined, false)
    }
    if (action === "switch" || row.kind === "tip") {
      if (row.branch.current) return print(row.here ? "you are here already" : `checkpoint ${row.seq} is on the branch you are on: Enter restores to before it`)
      return commands.switchToTip(row.branch.tip, { yes: false })
    }
    return row.branch.current ? restoreChosen(row.seq) : otherBranchChosen(row)
  }

  /**
   * The rewind picker: the current branch's prompts, newest first, with their time and how many
   * files a restore there puts back; Enter asks what to restore (conversation and files, or one),
   * then shows the plan and asks.
   */
  const rewind = async (args: ReadonlyArray<string>) => {
    if (args.length > 0) return print("usage: /rewind")
    const listed = await runtime.runPromiseExit(agent.listCheckpoints(await current()))
    if (Exit.isFailure(listed)) return print("error: the checkpoints could not be listed")
    const checkpoints: ReadonlyArray<Checkpoint> = [...listed.value].reverse()
    if (checkpoints.length === 0) return print("nothing to rewind: no prompt yet")
    if (context.keys === undefined) {
      for (const checkpoint of checkpoints) print(`  ${rewindRowText(checkpoint, width())}`)
      return print("  /restore <seq> [--conversation-only | --files-only] goes back to before one")
    }
    let selected = 0
    let chosen: Checkpoint | undefined
    await navigate(
      () => ["rewind to before which prompt?", ...checkpoints.map((checkpoint, index) => `${index === selected ? "▸" : " "} ${rewindRowText(checkpoint, width())}`), REWIND_KEYS],
      (key) => {
        const moved = movedSelection(key, selected, checkpoints.length)
        if (moved !== undefined) {
          selected = moved
          return false
        }
        if (choosesRow(key)) chosen = checkpoints[selected]
        return chosen !== undefined || leavesList(key)
      }
    )
    if (chosen !== undefined) await restoreChosen(chosen.seq)
  }

  return { tree, rewind }
}
