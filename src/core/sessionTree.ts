/**
 * The tree of a session, as a person moves through it: its checkpoints on every branch (each
 * with the checkpoint before it on its branch and the ones after it), the tip of every branch,
 * which branch is current, the names given to nodes, and what an undo or a redo would do. A pure
 * projection of the folded state.
 */
import { HashMap, Option } from "effect"
import { contentText } from "./events.js"
import { type ForkOrigin, isPruned, type LeafMove, NOT_A_NODE, type PromptNode, type SessionState } from "./sessionState.js"
import { isUserCheckpoint } from "./userCheckpoint.js"

export interface TreeCheckpoint {
  readonly seq: number
  readonly prompt: string
  readonly ts: number
  /** The checkpoint before it on its branch, or null for the first. */
  readonly parent: number | null
  /** The checkpoints that follow it, one per branch that goes on from it, oldest first. */
  readonly children: ReadonlyArray<number>
  /** On the current branch. */
  readonly current: boolean
  readonly label?: string
}

export interface TreeBranch {
  /** Its last node: where a switch to it goes. */
  readonly leaf: number
  /** Its last checkpoint, or null when it has none (it ends before the first prompt). */
  readonly checkpoint: number | null
  readonly current: boolean
  readonly label?: string
  /**
   * Pruned (`BranchesPruned`): shown, but no move goes there and it offers no checkpoint (its
   * `checkpoint` is null, and its prompts are not among the tree's checkpoints).
   */
  readonly pruned?: true
}

export interface SessionTree {
  /** The current leaf: the last node of the current branch (0: none). */
  readonly leaf: number
  readonly checkpoints: ReadonlyArray<TreeCheckpoint>
  /** Every branch, by its tip, oldest first. */
  readonly branches: ReadonlyArray<TreeBranch>
  /** The move an undo reverses and the undo a redo reverses, when there are any (and the leaf they go back to is not pruned). */
  readonly undo: LeafMove | undefined
  readonly redo: LeafMove | undefined
  /** For a fork: the session it was forked from and how many of its events it shares (the nodes up to there are that session's). */
  readonly forkedFrom?: ForkOrigin
  /** The forks made of this session, oldest first (some may have been deleted since). */
  readonly forks?: ReadonlyArray<ForkOrigin>
}

/** The session's tree (see the module's comment). */
export const tree = (state: SessionState): SessionTree => {
  const parentOf = (seq: number) => state.parents.at(seq - 1) ?? NOT_A_NODE
  const pruned = new Set<number>()
  if (state.pruned.length > 0) for (let seq = 1; seq <= state.parents.length; seq++) if (isPruned(state, seq)) pruned.add(seq)
  const onCurrent = new Set<number>()
  for (let at = state.leaf; at > 0; at = parentOf(at)) onCurrent.add(at)
  // The current branch's checkpoints are the fold's (exact); another branch's user messages are
  // checkpoints as far as each message tells (marked as a person's, or inferred with no tool call waiting).
  const anchors = new Set(state.anchors.toArray().map((anchor) => anchor.seq))
  const isCheckpoint = new Map<number, { prompt: string; ts: number }>()
  for (const node of state.prompts) {
    if (pruned.has(node.seq)) continue
    if (onCurrent.has(node.seq) ? anchors.has(node.seq) : isUserCheckpoint(node.event, 0)) {
      isCheckpoint.set(node.seq, { prompt: contentText(node.event.content), ts: node.ts })
    }
  }
  const checkpointAbove = (seq: number): number | null => {
    for (let at = seq; at > 0; at = parentOf(at)) if (isCheckpoint.has(at)) return at
    return null
  }
  const label = (seq: number) => Option.getOrUndefined(HashMap.get(state.nodeLabels, seq))
  const withLabel = (seq: number) => {
    const name = label(seq)
    return name === undefined ? {} : { label: name }
  }

  const children = new Map<number, Array<number>>()
  const checkpoints = Array.from(isCheckpoint, ([seq, { prompt, ts }]) => {
    const parent = checkpointAbove(parentOf(seq))
    if (parent !== null) children.set(parent, [...(children.get(parent) ?? []), seq])
    return { seq, prompt, ts, parent }
  })

  // A branch's tip is a node no other node continues (a live one: none of those continuing it
  // but pruned ones); a pruned branch's, a pruned node nothing continues.
  const continued = new Set<number>()
  const continuedAtAll = new Set<number>()
  for (let seq = 1; seq <= state.parents.length; seq++) {
    const parent = parentOf(seq)
    if (parent === NOT_A_NODE) continue
    continuedAtAll.add(parent)
    if (!pruned.has(seq)) continued.add(parent)
  }
  const branches: Array<TreeBranch> = []
  const branch = (leaf: number): TreeBranch => ({ leaf, checkpoint: checkpointAbove(leaf), current: leaf === state.leaf, ...withLabel(leaf) })
  for (let seq = 1; seq <= state.parents.length; seq++) {
    if (parentOf(seq) === NOT_A_NODE) continue
    if (!pruned.has(seq) && !continued.has(seq)) branches.push(branch(seq))
    else if (pruned.has(seq) && !continuedAtAll.has(seq)) branches.push({ leaf: seq, checkpoint: null, current: false, ...withLabel(seq), pruned: true })
  }
  // The current leaf may sit inside the tree (a restore to before a checkpoint, nothing sent since), or be the root.
  if (!branches.some((candidate) => candidate.current)) branches.push(branch(state.leaf))
  const offered = (move: LeafMove | undefined) => (move === undefined || pruned.has(move.from) ? undefined : move)
  return {
    leaf: state.leaf,
    checkpoints: checkpoints.map((checkpoint) => ({
      ...checkpoint,
      children: children.get(checkpoint.seq) ?? [],
      current: onCurrent.has(checkpoint.seq),
      ...withLabel(checkpoint.seq)
    })),
    branches: branches.sort((a, b) => a.leaf - b.leaf),
    undo: offered(state.undoable.at(-1)),
    redo: offered(state.redoable.at(-1)),
    ...(state.forkedFrom === undefined ? {} : { forkedFrom: state.forkedFrom }),
    ...(state.forks.length === 0 ? {} : { forks: state.forks.toArray() })
  }
}

/** A checkpoint of any branch: the node just before its prompt (where a restore to before it goes), and whether it is on the current branch. */
export interface CheckpointNode {
  readonly before: number
  readonly onBranch: boolean
}

/**
 * Checkpoint `seq` of any branch of the session — a prompt of the current branch, or a person's
 * prompt on another — or why it is none: `"pruned"` (on a pruned branch), undefined (no prompt).
 */
export const checkpointNode = (state: SessionState, seq: number): CheckpointNode | "pruned" | undefined => {
  let prompt: PromptNode | undefined
  for (let index = state.prompts.length - 1; index >= 0; index--) {
    const candidate = state.prompts.at(index)!
    if (candidate.seq > seq) continue
    if (candidate.seq === seq) prompt = candidate
    break
  }
  let onBranch = false
  for (let index = state.anchors.length - 1; index >= 0; index--) {
    const anchor = state.anchors.at(index)!
    if (anchor.seq > seq) continue
    onBranch = anchor.seq === seq
    break
  }
  if (prompt !== undefined && isPruned(state, seq)) return "pruned"
  if (prompt === undefined || (!onBranch && !isUserCheckpoint(prompt.event, 0))) return undefined
  return { before: state.parents.at(seq - 1) ?? 0, onBranch }
}
