/**
 * What a log says after a restore, now that a restore never deletes an event: everything the log
 * held before, then the restore's own events; and the session folds to what it should.
 */
import { expect } from "vitest"
import { Session, type StoredEvent } from "../../src/core.js"

/**
 * A restore of the conversation completed: the log holds every event it held before, ends with
 * the move of the session's leaf to `leaf` (just before the checkpoint), and folds to the
 * conversation and checkpoints the log's first `leaf` events folded to; nothing is pending.
 */
export const expectMovedBack = (before: ReadonlyArray<StoredEvent>, after: ReadonlyArray<StoredEvent>, leaf: number) => {
  expect(after.slice(0, before.length)).toEqual(before)
  expect(after.at(-1)!.event).toMatchObject({ _tag: "LeafMoved", to: leaf, reason: "restore" })
  const state = Session.fold(after)
  const prefix = Session.fold(before.slice(0, leaf))
  expect(state.leaf).toBe(leaf)
  expect(Session.conversation(state)).toEqual(Session.conversation(prefix))
  expect(Session.checkpoints(state)).toEqual(Session.checkpoints(prefix))
  expect(Session.interruptedRestore(state)).toBeUndefined()
}

/**
 * A restore failed or was undone, every file put back: its intent and the intent's end
 * (`undone`) follow what the log held before, and the session folds as it did before.
 */
export const expectUndoneIntent = (before: ReadonlyArray<StoredEvent>, after: ReadonlyArray<StoredEvent>) => {
  expect(after.slice(0, before.length)).toEqual(before)
  expect(after.slice(before.length).map((stored) => stored.event._tag)).toEqual(["RestoreStarted", "RestoreEnded"])
  expect(after.at(-1)!.event).toMatchObject({ startedSeq: before.length + 1, outcome: "undone" })
  const state = Session.fold(after)
  const was = Session.fold(before)
  expect(state.leaf).toBe(was.leaf)
  expect(Session.conversation(state)).toEqual(Session.conversation(was))
  expect(Session.checkpoints(state)).toEqual(Session.checkpoints(was))
  expect(Session.interruptedRestore(state)).toBeUndefined()
}
