/**
 * Captures under the store's quota (`maxStoreBytes`): content the store holds already is
 * always referenced (it takes no room); new content is stored while the room lasts, in the order
 * the capture found it; past that the path is recorded as not covered, with the quota's reason,
 * and reported as a problem — so the next capture walks the workdir and tries it again.
 */
import { Effect } from "effect"
import { type CheckpointerService, quotaReason } from "../core/Checkpointer.js"
import type { CapturedPath } from "../core/events.js"
import type { ReadProblem } from "./workspaceScan.js"

export interface FittedChanges {
  readonly changes: ReadonlyArray<CapturedPath>
  /** The paths whose new content did not fit, with the reason. */
  readonly refused: ReadonlyArray<ReadProblem>
}

/**
 * `changes` with the content that does not fit the store's room recorded `unavailable`. A store
 * that cannot be measured now leaves them as they are: the append that follows meets the same
 * store, and says what is wrong with it.
 */
export const fitQuota = (checkpointer: CheckpointerService | undefined, changes: ReadonlyArray<CapturedPath>): Effect.Effect<FittedChanges> =>
  Effect.gen(function*() {
    const hashes = new Set<string>()
    for (const change of changes) if (change.state._tag === "content") hashes.add(change.state.sha256)
    if (checkpointer === undefined || hashes.size === 0) return { changes, refused: [] }
    const room = yield* Effect.orElseSucceed(checkpointer.storeRoom([...hashes]), () => undefined)
    if (room === undefined) return { changes, refused: [] }
    let left = room.roomBytes
    const taken = new Set(room.stored)
    const refused: Array<ReadProblem> = []
    const fitted = changes.map((change): CapturedPath => {
      const state = change.state
      if (state._tag !== "content" || taken.has(state.sha256)) return change
      if (state.size <= left) {
        left -= state.size
        taken.add(state.sha256)
        return change
      }
      const reason = quotaReason(room)
      refused.push({ path: change.path, detail: reason })
      return { ...change, state: { _tag: "unavailable", reason, size: state.size } }
    })
    return { changes: fitted, refused }
  })
