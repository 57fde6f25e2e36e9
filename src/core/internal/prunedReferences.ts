/**
 * What a session's own records reference once pruned branches are left out: the references a
 * collection (`gc`) and `du` count. A node's references stop counting once a `BranchesPruned`
 * names it — unless a fork that shares the node does not share that `BranchesPruned` (its `at`
 * is below the event): such a fork still sees the branch, and may move to it. (Pruning refuses
 * a branch any named fork shares; this covers a fork made while a pruning was being decided.)
 * Events about the log are not nodes and always count — but for a restore's intent once the move
 * that completed it is logged: its bytes (what the files held before) are those of the leaf the
 * move left, and count as that node's (a branch pruned, no one goes back there).
 */
import { Effect, Either, Stream } from "effect"
import type { CheckpointerError } from "../errors.js"
import type { SeqRange } from "../events.js"
import { inRanges } from "../branchPruning.js"
import { isNodeTag } from "../sessionFold.js"
import { blobReferences } from "./blobs.js"
import { decodeStoredEvent } from "./eventCodec.js"

/** A session's own records, as references: what counts whatever is pruned, and each node's, by its seq as read. */
export interface RecordReferences {
  /** Referenced by events that are not nodes, or by nodes no pruning names. */
  readonly counted: ReadonlySet<string>
  /** Referenced by events that are not nodes. */
  readonly always: ReadonlySet<string>
  /** The manifest chunks among the references (their entries name more objects: see manifests.ts). */
  readonly manifestChunks: ReadonlySet<string>
  /** Per node (seq as read: a fork's shifted by what it shares) that references anything: its references, and whether they count. */
  readonly nodes: ReadonlyMap<number, { readonly hashes: ReadonlyArray<string>; readonly counts: boolean }>
}

/** Read a session's own records (all of them, from seq 1) for their references (see the module's comment). */
export const recordReferences = (
  sessionId: string,
  records: Stream.Stream<unknown, CheckpointerError>
): Effect.Effect<RecordReferences, CheckpointerError> =>
  Effect.suspend(() => {
    let expectedSeq = 1
    // A fork's own seq 1 is its SessionForked, at seq at + 1 as read.
    let shift = 0
    const always = new Set<string>()
    const byNode = new Map<number, ReadonlyArray<string>>()
    const prunings: Array<{ readonly seq: number; readonly ranges: ReadonlyArray<SeqRange> }> = []
    const forks: Array<number> = []
    const manifestChunks = new Set<string>()
    const intents = new Map<number, ReadonlyArray<string>>()
    const movesLeft = new Map<number, { readonly from: number; readonly seq: number }>()
    return Stream.runForEach(records, (raw) =>
      Either.match(decodeStoredEvent(sessionId, expectedSeq++, raw), {
        onLeft: Effect.fail,
        onRight: ({ event, seq }) =>
          Effect.sync(() => {
            if (seq === 1 && event._tag === "SessionForked") shift = event.at
            const at = seq + shift
            if (event._tag === "BranchesPruned") prunings.push({ seq: at, ranges: event.branches.flatMap((branch) => branch.nodes) })
            else if (event._tag === "ForkMade") forks.push(event.at)
            else if (event._tag === "LeafMoved" && event.restoreStarted !== undefined && event.from > 0) movesLeft.set(event.restoreStarted, { from: event.from, seq: at })
            if (event._tag === "WorkspaceCaptured") for (const chunk of event.manifest ?? []) manifestChunks.add(chunk.sha256)
            const hashes = blobReferences(event)
            if (hashes.length === 0) return
            if (isNodeTag(event._tag)) byNode.set(at, hashes)
            else if (event._tag === "RestoreStarted") intents.set(at, hashes)
            else for (const sha256 of hashes) always.add(sha256)
          })
      })).pipe(Effect.map(() => {
        for (const [seq, hashes] of intents) {
          const move = movesLeft.get(seq)
          // Open (or closed without a move): needed to put the files back. A fork that shares it may see it open: it stays.
          if (move === undefined || forks.some((at) => seq <= at && at < move.seq)) for (const sha256 of hashes) always.add(sha256)
          else byNode.set(move.from, [...(byNode.get(move.from) ?? []), ...hashes])
        }
        const counted = new Set(always)
        const nodes = new Map<number, { hashes: ReadonlyArray<string>; counts: boolean }>()
        const prunedAway = (seq: number) =>
          prunings.some((pruning) => inRanges(pruning.ranges, seq) && !forks.some((at) => seq <= at && at < pruning.seq))
        for (const [seq, hashes] of byNode) {
          const counts = prunings.length === 0 || !prunedAway(seq)
          nodes.set(seq, { hashes, counts })
          if (counts) for (const sha256 of hashes) counted.add(sha256)
        }
        return { counted, always, manifestChunks, nodes }
      }))
  })
