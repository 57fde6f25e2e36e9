/**
 * The session as a tree. A log is never cut: each event that is part of the conversation or the
 * workspace's history (a node) continues the branch ending at the session's current leaf, and a
 * `LeafMoved` moves that leaf — back to just before a checkpoint (a restore), along the history
 * of moves (undo, redo) or to another branch. What a move leaves stays in the log as a branch.
 */
import { Schema } from "effect"
import { isCount, isFields, isNonEmptyString, isPositiveInt, isString, optional } from "../internal/eventChecks.js"
import { EventClass } from "../internal/eventKind.js"
import { Count, PositiveInt } from "./parts.js"

export const MoveReason = Schema.Literal("restore", "undo", "redo", "switch")
export type MoveReason = typeof MoveReason.Type

export const isMoveReason = (value: unknown): value is MoveReason =>
  value === "restore" || value === "undo" || value === "redo" || value === "switch"

/**
 * The current leaf moved from `from` to `to` (seqs of nodes; 0 is the empty session): the events
 * after this one continue the branch that ends at `to`. Not a node and not a message: the
 * model never sees it.
 */
export class LeafMoved extends EventClass<LeafMoved>()("LeafMoved", {
  /** The leaf the session left: the last node of the branch it was on. */
  from: Count,
  /** The new leaf. */
  to: Count,
  /** `restore`: to just before a checkpoint; `undo` / `redo`: along the history of moves; `switch`: to another branch. */
  reason: MoveReason,
  /** The seq of the restore intent (`RestoreStarted`) this move completes, which it closes. */
  restoreStarted: Schema.optionalWith(PositiveInt, { exact: true })
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { from, reason, restoreStarted, to } = json
    if (!isCount(from) || !isCount(to) || !isMoveReason(reason) || !optional(restoreStarted, isPositiveInt)) return undefined
    return { from, to, reason, ...(restoreStarted === undefined ? {} : { restoreStarted }) }
  }
}) {}

/** A name for a node of the tree (a checkpoint, or the tip of a branch); an empty label removes it. */
export class BranchLabeled extends EventClass<BranchLabeled>()("BranchLabeled", {
  /** The node named. */
  seq: PositiveInt,
  label: Schema.String
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { label, seq } = json
    return isPositiveInt(seq) && isString(label) ? { seq, label } : undefined
  }
}) {}

/**
 * The first event of a fork: a session that starts as the first `at` events of session `from`
 * (shared, not copied: a fork's log holds only its own events, and reads as `from`'s events 1…at
 * followed by them, this one at seq at + 1). Its leaf is where `from`'s leaf was after event `at`;
 * its own history of moves starts empty. Not a node and not a message: the model never sees it.
 */
export class SessionForked extends EventClass<SessionForked>()("SessionForked", {
  /** The session forked. */
  from: Schema.NonEmptyString,
  /** How many of its events the fork starts with (its head when the fork was made). */
  at: Count
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { at, from } = json
    return isNonEmptyString(from) && isCount(at) ? { from, at } : undefined
  }
}) {}

/**
 * In the session forked: a fork of it was made — session `fork`, sharing its first `at` events —
 * so that what would take them (a delete, a truncate, a sweep of their blobs) finds the forks
 * without looking at every session. Appended before the fork's own first event. Not a node and
 * not a message: the model never sees it.
 */
export class ForkMade extends EventClass<ForkMade>()("ForkMade", {
  /** The fork. */
  fork: Schema.NonEmptyString,
  /** How many of this session's events it shares. */
  at: Count
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { at, fork } = json
    return isNonEmptyString(fork) && isCount(at) ? { fork, at } : undefined
  }
}) {}

/** Seqs `from` … `to` (inclusive): the nodes among them (not the log events between) are meant. */
export const SeqRange = Schema.Struct({ from: PositiveInt, to: PositiveInt })
export type SeqRange = typeof SeqRange.Type

/** One branch a `BranchesPruned` took: its tip and the nodes that went with it. */
export const PrunedBranch = Schema.Struct({
  /** The branch's tip: a node no other node continued. */
  tip: PositiveInt,
  /** Its nodes that no kept branch passes through, as ranges of seqs (oldest first). */
  nodes: Schema.Array(SeqRange)
})
export type PrunedBranch = typeof PrunedBranch.Type

const checkRanges = (value: unknown): Array<SeqRange> | undefined => {
  if (!Array.isArray(value)) return undefined
  const ranges: Array<SeqRange> = []
  for (const range of value) {
    if (!isFields(range) || !isPositiveInt(range.from) || !isPositiveInt(range.to)) return undefined
    ranges.push({ from: range.from, to: range.to })
  }
  return ranges
}

/**
 * Branches a restore, an undo or a switch left behind stopped being reachable: their nodes are
 * shown as pruned, no move may go to them, and the objects only they referenced are no longer
 * kept by `gc`. The events themselves stay in the log, as every event does. Never a branch the
 * current leaf is on. Not a node and not a message: the model never sees it.
 */
export class BranchesPruned extends EventClass<BranchesPruned>()("BranchesPruned", {
  branches: Schema.Array(PrunedBranch),
  /** The cutoff: each branch's last activity (appends, moves to or from it, labels) was at or before this (epoch ms). */
  before: Count
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { before, branches } = json
    if (!isCount(before) || !Array.isArray(branches)) return undefined
    const checked: Array<PrunedBranch> = []
    for (const branch of branches) {
      if (!isFields(branch) || !isPositiveInt(branch.tip)) return undefined
      const nodes = checkRanges(branch.nodes)
      if (nodes === undefined) return undefined
      checked.push({ tip: branch.tip, nodes })
    }
    return { branches: checked, before }
  }
}) {}
