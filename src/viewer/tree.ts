/**
 * A session's tree of checkpoints as an ARIA tree: a branch reads down one list, and where
 * branches part the later ones are indented under the checkpoint they leave from — so the depth
 * of the page is the number of forks, not the length of the session. The current branch and the
 * selected checkpoint are marked; labels show beside their checkpoint. Arrow keys move between
 * checkpoints, Home and End go to the first and the last, Enter or Space selects.
 */
import type { Tree } from "./api.js"
import { el } from "./dom.js"

type Checkpoint = Tree["checkpoints"][number]

export const renderTree = (tree: Tree, selected: number | undefined, onSelect: (seq: number) => void) => {
  const bySeq = new Map(tree.checkpoints.map((checkpoint) => [checkpoint.seq, checkpoint]))
  const branchLabels = new Map<number, string>()
  for (const branch of tree.branches) {
    if (branch.checkpoint !== null && branch.label !== undefined) branchLabels.set(branch.checkpoint, branch.label)
  }

  const item = (checkpoint: Checkpoint) => {
    const branchLabel = branchLabels.get(checkpoint.seq)
    return el(
      "li",
      {
        role: "treeitem",
        tabindex: checkpoint.seq === selected ? 0 : -1,
        "aria-selected": checkpoint.seq === selected ? "true" : "false",
        "data-seq": checkpoint.seq,
        // Named by its own row, not by the branches nested under it.
        "aria-labelledby": `node-${checkpoint.seq}`,
        class: `node${checkpoint.current ? " current" : ""}${checkpoint.seq === selected ? " selected" : ""}`
      },
      // The row is what a click selects: a branch nested under the item has rows of its own.
      el(
        "div",
        { class: "row", id: `node-${checkpoint.seq}`, onclick: () => onSelect(checkpoint.seq) },
        el("span", { class: "seq" }, `#${checkpoint.seq}`),
        " ",
        el("span", { class: "prompt" }, checkpoint.prompt),
        checkpoint.label === undefined ? null : el("span", { class: "label" }, checkpoint.label),
        branchLabel === undefined ? null : el("span", { class: "label branch" }, `branch: ${branchLabel}`),
        checkpoint.current ? el("span", { class: "badge" }, "current") : null
      )
    )
  }

  /** The chain of checkpoints from `start` along first children; later children as nested groups. */
  const chain = (start: Checkpoint): Array<HTMLElement> => {
    const items: Array<HTMLElement> = []
    for (let node: Checkpoint | undefined = start; node !== undefined;) {
      const li = item(node)
      const children: Array<Checkpoint> = node.children.map((seq) => bySeq.get(seq)).filter((child): child is Checkpoint => child !== undefined)
      // Where branches part, the current one goes on in the same list.
      const next: Checkpoint | undefined = children.find((child) => child.current) ?? children[0]
      const branches = children.filter((child) => child !== next)
      if (branches.length > 0) li.append(el("ul", { role: "group" }, branches.map((branch) => chain(branch))))
      items.push(li)
      node = next
    }
    return items
  }

  const roots = tree.checkpoints.filter((checkpoint) => checkpoint.parent === null || !bySeq.has(checkpoint.parent))
  const list = el("ul", { role: "tree", "aria-label": "Checkpoints of the session", class: "tree-list" }, roots.map((root) => chain(root)))
  if (tree.checkpoints.length === 0) return el("p", { class: "empty" }, "No checkpoints yet: the session has no prompt.")

  // Keyboard: the items in the order they are shown.
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
    if (event.key === "ArrowDown") move(current + 1)
    else if (event.key === "ArrowUp") move(current - 1)
    else if (event.key === "Home") move(0)
    else if (event.key === "End") move(items.length - 1)
    else if ((event.key === "Enter" || event.key === " ") && current >= 0) onSelect(Number(items[current]!.dataset["seq"]))
    else return
    event.preventDefault()
  })
  if (selected === undefined || !bySeq.has(selected)) list.querySelector<HTMLElement>("[role=treeitem]")?.setAttribute("tabindex", "0")
  return list
}
