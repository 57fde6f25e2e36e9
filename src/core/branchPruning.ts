/**
 * Pruning branches, the pure half: which branches of a session a `BranchesPruned` would take,
 * and the shape of the tree it works on (also what a per-branch `du` counts by). A branch is the
 * path from the root to a tip (a node no live node continues); what a branch holds alone is
 * its part off the current path that no other live branch passes through.
 *
 * A branch is pruned when it is not the current one, its last activity (an event of it, a move
 * to or from one of its nodes, a label of one) is at or before the cutoff, it carries no label
 * (unless labels are not kept), and no fork shares any of its nodes: a fork reads its source's
 * first events as its own and may move to any branch among them, so what it shares stays.
 */
import { HashMap } from "effect"
import type { PrunedBranch, SeqRange, StoredEvent } from "./events.js"
import { isNodeTag } from "./sessionFold.js"
import { isPruned, NOT_A_NODE, type SessionState } from "./sessionState.js"

/** The tree of a session as pruning and per-branch usage see it. */
export interface TreeShape {
  /** The nodes from the root to the current leaf. */
  readonly onCurrent: ReadonlySet<number>
  /** The tips of the live branches other than the current one, oldest first. */
  readonly tips: ReadonlyArray<number>
  /** A node not pruned by an earlier `BranchesPruned`. */
  readonly live: (seq: number) => boolean
  /** The nodes of the branch ending at `tip` off the current path, tip first. */
  readonly offCurrent: (tip: number) => ReadonlyArray<number>
  /** The nodes from the root to `leaf`, leaf first. */
  readonly pathTo: (leaf: number) => ReadonlyArray<number>
}

export const treeShape = (state: SessionState): TreeShape => {
  const parentOf = (seq: number) => state.parents.at(seq - 1) ?? NOT_A_NODE
  const pruned = new Set<number>()
  for (let seq = 1; seq <= state.parents.length; seq++) if (isPruned(state, seq)) pruned.add(seq)
  const live = (seq: number) => parentOf(seq) !== NOT_A_NODE && !pruned.has(seq)
  const pathTo = (leaf: number) => {
    const nodes: Array<number> = []
    for (let at = leaf; at > 0; at = parentOf(at)) nodes.push(at)
    return nodes
  }
  const onCurrent = new Set(pathTo(state.leaf))
  const continued = new Set<number>()
  for (let seq = 1; seq <= state.parents.length; seq++) if (live(seq)) continued.add(parentOf(seq))
  const tips: Array<number> = []
  for (let seq = 1; seq <= state.parents.length; seq++) if (live(seq) && !continued.has(seq) && !onCurrent.has(seq)) tips.push(seq)
  const offCurrent = (tip: number) => {
    const nodes: Array<number> = []
    for (let at = tip; at > 0 && !onCurrent.has(at); at = parentOf(at)) nodes.push(at)
    return nodes
  }
  return { onCurrent, tips, live, offCurrent, pathTo }
}

/** Why a branch left behind was not pruned. */
export type KeptReason = "recent" | "labeled" | "forked"

export interface BranchToPrune extends PrunedBranch {
  /** Its last activity (epoch ms). */
  readonly lastActivity: number
}

export interface KeptBranch {
  readonly tip: number
  readonly reason: KeptReason
  readonly lastActivity: number
}

export interface PruningPlan {
  /** What a `BranchesPruned` would take (empty: nothing to prune), oldest tip first. */
  readonly pruned: ReadonlyArray<BranchToPrune>
  /** The branches left behind that stay, and why. */
  readonly kept: ReadonlyArray<KeptBranch>
}

/** When each node was last active: appended, moved to or from, labelled. */
const activityOf = (events: ReadonlyArray<StoredEvent>): Map<number, number> => {
  const last = new Map<number, number>()
  const touch = (seq: number, ts: number) => {
    if (seq > 0 && ts > (last.get(seq) ?? -1)) last.set(seq, ts)
  }
  for (const { event, seq, ts } of events) {
    if (isNodeTag(event._tag)) touch(seq, ts)
    else if (event._tag === "LeafMoved") {
      touch(event.from, ts)
      touch(event.to, ts)
    } else if (event._tag === "BranchLabeled") touch(event.seq, ts)
  }
  return last
}

/**
 * Which branches of the session (folded to `state` from `events`, its whole log as read) are to
 * be pruned: see the module's comment. `before`: the cutoff (epoch ms).
 */
export const planPruning = (
  events: ReadonlyArray<StoredEvent>,
  state: SessionState,
  options: { readonly before: number; readonly keepLabeled: boolean }
): PruningPlan => {
  const shape = treeShape(state)
  const activity = activityOf(events)
  // Every fork named, whether it still exists or not (one being made may not exist yet).
  const sharedUpTo = state.forks.toArray().reduce((most, fork) => Math.max(most, fork.at), 0)
  // The fold keeps only names that were not removed (an empty label removes one).
  const labeled = (seq: number) => HashMap.has(state.nodeLabels, seq)
  const toPrune: Array<{ tip: number; nodes: ReadonlyArray<number>; lastActivity: number }> = []
  const kept: Array<KeptBranch> = []
  const keptNodes = new Set<number>()
  for (const tip of shape.tips) {
    const nodes = shape.offCurrent(tip)
    const lastActivity = nodes.reduce((latest, seq) => Math.max(latest, activity.get(seq) ?? 0), 0)
    const reason: KeptReason | undefined = lastActivity > options.before
      ? "recent"
      : options.keepLabeled && nodes.some(labeled)
      ? "labeled"
      : nodes.some((seq) => seq <= sharedUpTo)
      ? "forked"
      : undefined
    if (reason === undefined) toPrune.push({ tip, nodes, lastActivity })
    else {
      kept.push({ tip, reason, lastActivity })
      for (const seq of nodes) keptNodes.add(seq)
    }
  }
  // Each node goes with the oldest branch pruned that passes through it, unless a kept one does.
  const taken = new Set<number>()
  const assigned = toPrune.map(({ lastActivity, nodes, tip }) => {
    const own = nodes.filter((seq) => !keptNodes.has(seq) && !taken.has(seq)).sort((a, b) => a - b)
    for (const seq of own) taken.add(seq)
    return { tip, own, lastActivity }
  })
  const staysLive = (seq: number) => shape.live(seq) && !taken.has(seq)
  return {
    pruned: assigned.map(({ lastActivity, own, tip }) => ({ tip, nodes: rangesOf(own, staysLive), lastActivity })),
    kept
  }
}

/** Sorted nodes as ranges: two join when no node that stays live lies between them. */
const rangesOf = (nodes: ReadonlyArray<number>, staysLive: (seq: number) => boolean): Array<SeqRange> => {
  const ranges: Array<SeqRange> = []
  for (const seq of nodes) {
    const last = ranges.at(-1)
    let joins = last !== undefined
    if (last !== undefined) for (let between = last.to + 1; between < seq && joins; between++) if (staysLive(between)) joins = false
    if (joins && last !== undefined) ranges[ranges.length - 1] = { from: last.from, to: seq }
    else ranges.push({ from: seq, to: seq })
  }
  return ranges
}

/** Whether `seq` falls in one of `ranges` (the caller knows it is a node). */
export const inRanges = (ranges: ReadonlyArray<SeqRange>, seq: number): boolean => ranges.some((range) => range.from <= seq && seq <= range.to)
