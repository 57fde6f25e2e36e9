/**
 * `du({ branches: true })`: each session's usage broken down by its live branches. A branch is
 * the path from the root to its tip (the current one ends at the current leaf); it `references`
 * what its nodes reference (a manifest capture: its chunks and the files they list), and `own`s
 * what nothing else in the store keeps: not another branch of its session, not one of its events
 * that is no node (a restore's intent), not another session — what pruning it would free. Nodes
 * two branches pass through are owned by neither.
 */
import { Chunk, Effect, HashMap, Option, Schema, Stream } from "effect"
import { treeShape } from "../branchPruning.js"
import type { CheckpointerDriver } from "../CheckpointerDriver.js"
import type { CheckpointerError } from "../errors.js"
import type { StoredEvent } from "../events.js"
import { fold, isNodeTag } from "../sessionFold.js"
import { blobReferences } from "./blobs.js"
import type { Manifests } from "./manifests.js"
import type { BranchUsage, ObjectBytes, SessionUsage, StoreUsage } from "./objectCollection.js"
import { decodeOptions, Flag } from "./options.js"
import { recordReferences, type RecordReferences } from "./prunedReferences.js"

export const DuOptions = Schema.Struct({
  /** Break each session's usage down by its live branches (`SessionUsage.branches`). Default false. */
  branches: Schema.optional(Flag)
})
export interface DuOptions {
  /** Break each session's usage down by its live branches (`SessionUsage.branches`). Default false. */
  readonly branches?: boolean | undefined
}

const adding = (total: ObjectBytes, bytes: number): ObjectBytes => ({ objects: total.objects + 1, bytes: total.bytes + bytes })
const sumOf = (hashes: Iterable<string>, stored: ReadonlyMap<string, number>): ObjectBytes => {
  let total: ObjectBytes = { objects: 0, bytes: 0 }
  for (const sha256 of hashes) {
    const bytes = stored.get(sha256)
    if (bytes !== undefined) total = adding(total, bytes)
  }
  return total
}

/**
 * `found` with each manifest chunk followed to the files its entries name, counted where the
 * chunk counts and sited at its capture: a manifest capture keeps its files in its chunks alone.
 */
const followingChunks = (found: RecordReferences, named: ReadonlyMap<string, ReadonlySet<string>>): RecordReferences => {
  if (found.manifestChunks.size === 0) return found
  const widened = (hashes: Iterable<string>): Set<string> => {
    const all = new Set<string>()
    for (const sha256 of hashes) {
      all.add(sha256)
      for (const file of named.get(sha256) ?? []) all.add(file)
    }
    return all
  }
  return {
    counted: widened(found.counted),
    always: widened(found.always),
    manifestChunks: found.manifestChunks,
    nodes: new Map([...found.nodes].map(([seq, node]) => [seq, { hashes: [...widened(node.hashes)], counts: node.counts }]))
  }
}

/** One session's branches, given what every session's records reference (`holders`: sessions per object). */
const branchesOf = (
  events: ReadonlyArray<StoredEvent>,
  own: RecordReferences,
  holders: ReadonlyMap<string, number>,
  stored: ReadonlyMap<string, number>
): ReadonlyArray<BranchUsage> => {
  const state = fold(events)
  const shape = treeShape(state)
  const hashesAt = new Map<number, ReadonlyArray<string>>()
  for (const { event, seq } of events) {
    if (!isNodeTag(event._tag)) continue
    const hashes = blobReferences(event)
    if (hashes.length > 0) hashesAt.set(seq, hashes)
  }
  // Where the session's own counted references sit: which nodes (by seq as read) name each object.
  const sites = new Map<string, Array<number>>()
  for (const [seq, node] of own.nodes) {
    if (node.counts) for (const sha256 of node.hashes) sites.set(sha256, [...(sites.get(sha256) ?? []), seq])
  }
  const tips = [...shape.tips, ...(state.leaf === 0 ? [] : [state.leaf])].sort((a, b) => a - b)
  const paths = new Map(tips.map((tip) => [tip, shape.pathTo(tip)]))
  const through = new Map<number, number>()
  for (const path of paths.values()) for (const seq of path) through.set(seq, (through.get(seq) ?? 0) + 1)
  return tips.map((tip): BranchUsage => {
    const path = paths.get(tip)!
    const referenced = new Set<string>()
    for (const seq of path) for (const sha256 of hashesAt.get(seq) ?? []) referenced.add(sha256)
    const alone = new Set(path.filter((seq) => through.get(seq) === 1))
    const owned = [...referenced].filter((sha256) =>
      holders.get(sha256) === 1 && own.counted.has(sha256) && !own.always.has(sha256) &&
      (sites.get(sha256) ?? []).every((seq) => alone.has(seq)))
    const label = Option.getOrUndefined(HashMap.get(state.nodeLabels, tip))
    return {
      tip,
      current: tip === state.leaf,
      ...(label === undefined ? {} : { label }),
      referenced: sumOf(referenced, stored),
      own: sumOf(owned, stored)
    }
  })
}

/** `usage` with each session's branches (see the module's comment); `readView` reads a session as it reads. */
export const usageByBranch = (
  driver: CheckpointerDriver,
  manifests: Manifests,
  readView: (sessionId: string) => Stream.Stream<StoredEvent, CheckpointerError>,
  usage: Effect.Effect<StoreUsage, CheckpointerError>,
  options: DuOptions | undefined
): Effect.Effect<StoreUsage, CheckpointerError> =>
  Effect.gen(function*() {
    const decoded = decodeOptions(DuOptions, options, "du options")
    if (decoded._tag === "Left") return yield* decoded.left
    const base = yield* usage
    if (decoded.right.branches !== true) return base
    const references = new Map<string, RecordReferences>()
    const holders = new Map<string, number>()
    // A chunk's files, read once however many sessions share it.
    const named = new Map<string, ReadonlySet<string>>()
    for (const { id } of base.sessions) {
      const raw = yield* recordReferences(id, driver.read(id, 0))
      for (const chunk of raw.manifestChunks) if (!named.has(chunk)) named.set(chunk, yield* manifests.references([chunk]))
      const found = followingChunks(raw, named)
      references.set(id, found)
      for (const sha256 of found.counted) holders.set(sha256, (holders.get(sha256) ?? 0) + 1)
    }
    const stored = new Map((yield* driver.objects.list).map((object) => [object.sha256, object.storedBytes]))
    const sessions: Array<SessionUsage> = []
    for (const session of base.sessions) {
      const events = Chunk.toReadonlyArray(yield* Stream.runCollect(readView(session.id)))
      sessions.push({ ...session, branches: branchesOf(events, references.get(session.id)!, holders, stored) })
    }
    return { ...base, sessions }
  })
