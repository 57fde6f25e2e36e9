/**
 * A session's tree as an ARIA tree, drawn from the one picture the terminal draws too
 * (`treePicture`): the current branch is one flat list of its checkpoints ending in the one
 * "you are here" row; every other branch follows the checkpoint it parts from, one level in
 * (`aria-level`), with its checkpoints and its tip, and folds to its tip. So the depth of the page
 * is the number of partings, not the length of a branch. A label shows before the prompt, so a
 * long prompt's ellipsis never hides it. Arrow keys move between rows (← folds a branch, → shows
 * it), Home and End go to the first and the last, Enter or Space selects.
 */
import { type PictureRow, pictureRows, treePicture, type TreePicture } from "../core/treePicture.js"
import type { Tree } from "./api.js"
import { el } from "./dom.js"

/** A row of the tree: a checkpoint, or a branch's tip. */
export interface TreeSelection {
  readonly kind: "checkpoint" | "tip"
  readonly seq: number
}

export const rowKey = (selection: TreeSelection) => `${selection.kind}-${selection.seq}`

/** The tree as drawn: its picture, and the rows shown with `folded` branches folded. Made once per redraw. */
export interface ShownTree {
  readonly picture: TreePicture
  readonly rows: ReadonlyArray<PictureRow>
}

export const shownTree = (tree: Tree, folded: ReadonlySet<number>): ShownTree => {
  const picture = treePicture(tree)
  return { picture, rows: pictureRows(picture, folded) }
}

/** The row shown for `selection`, if it is shown (not folded away). */
export const rowOf = (shown: ShownTree, selection: TreeSelection | undefined): PictureRow | undefined =>
  selection === undefined ? undefined : shown.rows.find((row) => row.kind === selection.kind && row.seq === selection.seq)

export interface TreeView {
  readonly selected: TreeSelection | undefined
  readonly onSelect: (selection: TreeSelection) => void
  /** Fold (true) or show (false) the branch ending at `tip`. */
  readonly onFold: (tip: number, fold: boolean) => void
}

export const renderTree = (tree: Tree, { picture, rows }: ShownTree, view: TreeView) => {
  if (tree.checkpoints.length === 0) return el("p", { class: "empty" }, "No checkpoints yet: the session has no prompt.")
  const isSelected = (row: PictureRow) => view.selected !== undefined && view.selected.kind === row.kind && view.selected.seq === row.seq

  const item = (row: PictureRow) => {
    const selection: TreeSelection = { kind: row.kind, seq: row.seq }
    const key = rowKey(selection)
    const side = !row.branch.current
    // The first row of a side branch, or its folded tip, is where it folds.
    const foldable = side && row.parts
    const checkpoint = row.checkpoint
    const content = checkpoint !== undefined
      ? [
        el("span", { class: "seq" }, `#${checkpoint.seq}`),
        " ",
        checkpoint.label === undefined ? null : el("span", { class: "label" }, checkpoint.label),
        el("span", { class: "prompt" }, checkpoint.prompt)
      ]
      : [
        el("span", { class: "seq" }, `#${row.seq}`),
        " ",
        row.branch.label === undefined ? null : el("span", { class: "label branch" }, row.branch.label),
        row.here
          ? el("span", { class: "badge here" }, "you are here")
          : el("span", { class: "tip" }, row.folded === undefined ? "tip of this branch" : `branch tip · ${row.folded} more folded`)
      ]
    return el(
      "li",
      {
        role: "treeitem",
        tabindex: isSelected(row) ? 0 : -1,
        "aria-selected": isSelected(row) ? "true" : "false",
        "aria-level": row.depth + 1,
        "aria-expanded": foldable ? (row.folded === undefined ? "true" : "false") : undefined,
        "aria-labelledby": `node-${key}`,
        "data-seq": row.seq,
        "data-kind": row.kind,
        "data-tip": row.branch.tip,
        class: `node ${row.kind}${side ? " side" : " current"}${row.here ? " here" : ""}${isSelected(row) ? " selected" : ""}`
      },
      el(
        "div",
        { class: "row", id: `node-${key}`, onclick: () => view.onSelect(selection) },
        foldable
          ? el("button", {
            type: "button",
            class: "fold",
            tabindex: -1,
            "aria-label": row.folded === undefined ? `Fold the branch ending at #${row.branch.tip}` : `Show the branch ending at #${row.branch.tip}`,
            onclick: (event: Event) => {
              event.stopPropagation()
              view.onFold(row.branch.tip, row.folded === undefined)
            }
          }, row.folded === undefined ? "▾" : "▸")
          : null,
        content
      )
    )
  }

  const list = el(
    "ul",
    { role: "tree", "aria-label": "Checkpoints of the session", class: "tree-list" },
    rows.map(item),
    picture.pruned.length === 0
      ? null
      : el("li", { role: "none", class: "pruned" }, `${picture.pruned.length} pruned branch${picture.pruned.length === 1 ? "" : "es"} not shown`)
  )

  // Keyboard: the rows in the order they are shown.
  list.addEventListener("keydown", (event) => {
    const items = Array.from(list.querySelectorAll<HTMLElement>("[role=treeitem]"))
    const current = items.indexOf(document.activeElement as HTMLElement)
    const move = (index: number) => {
      const target = items[Math.max(0, Math.min(items.length - 1, index))]
      if (target === undefined) return
      for (const each of items) each.tabIndex = -1
      target.tabIndex = 0
      target.focus()
    }
    const focusedRow = current >= 0 ? rows[current] : undefined
    if (event.key === "ArrowDown") move(current + 1)
    else if (event.key === "ArrowUp") move(current - 1)
    else if (event.key === "Home") move(0)
    else if (event.key === "End") move(items.length - 1)
    else if ((event.key === "ArrowLeft" || event.key === "ArrowRight") && focusedRow !== undefined && !focusedRow.branch.current) {
      view.onFold(focusedRow.branch.tip, event.key === "ArrowLeft")
    } else if ((event.key === "Enter" || event.key === " ") && focusedRow !== undefined) view.onSelect({ kind: focusedRow.kind, seq: focusedRow.seq })
    else return
    event.preventDefault()
  })
  if (view.selected === undefined || !rows.some(isSelected)) {
    const here = list.querySelector<HTMLElement>("[role=treeitem].here") ?? list.querySelector<HTMLElement>("[role=treeitem]")
    here?.setAttribute("tabindex", "0")
  }
  return list
}
