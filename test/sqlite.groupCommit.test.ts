/**
 * Group commit in the SQLite backend (src/backends/sqlite/groupCommit.ts): appends that wait for
 * the write lock together share a transaction, yet each keeps its own outcome — a conflict fails
 * only itself, an append whose statement fails after it wrote leaves nothing and the others commit, an interrupted caller's append is never written, a lock held too long is a busy
 * error for exactly those that waited too long.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import Database from "better-sqlite3"
import { Effect, Exit, Fiber, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { SqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { Checkpointer } from "../src/core.js"
import { CheckpointBusyError, CheckpointConflictError, UserMessage } from "../src/index.js"

const freshFile = () => join(mkdtempSync(join(tmpdir(), "lite-agent-group-")), "sessions.db")
const message = (text: string) => new UserMessage({ content: text, origin: "user" })

/** Another connection (as another process would) holding the write lock until `release` is called. */
const holdLock = (file: string) => {
  const holder = new Database(file)
  holder.exec("BEGIN IMMEDIATE")
  return () => {
    holder.exec("ROLLBACK")
    holder.close()
  }
}

const inStore = <A, E>(file: string, busyTimeoutMs: number, program: Effect.Effect<A, E, Checkpointer>) =>
  Effect.runPromise(Effect.scoped(Effect.provide(program, SqliteCheckpointer.layer({ file, busyTimeoutMs }))))

const texts = (checkpointer: Checkpointer["Type"], sessionId: string) =>
  Effect.map(Stream.runCollect(checkpointer.read(sessionId)), (events) =>
    [...events].map((stored) => (stored.event._tag === "UserMessage" ? String(stored.event.content) : "?")))

describe("sqlite group commit", () => {
  it("appends queued behind another connection's lock all commit once it is released, each batch contiguous; conflicts fail alone", async () => {
    const file = freshFile()
    await inStore(file, 10_000, Effect.gen(function*() {
      const checkpointer = yield* Checkpointer
      yield* checkpointer.append("s", [message("first")])
      const release = holdLock(file)
      // 20 appends racing for seq 2 with an expected head (one may win), 20 batches of 3 without.
      const racing = yield* Effect.forkAll(
        Array.from({ length: 20 }, (_, i) => Effect.either(checkpointer.append("s", [message(`race ${i}`)], 1)))
      )
      const batches = yield* Effect.forkAll(
        Array.from({ length: 20 }, (_, i) => checkpointer.append("t", [message(`${i}.a`), message(`${i}.b`), message(`${i}.c`)]))
      )
      yield* Effect.sleep("100 millis")
      expect(yield* checkpointer.head("t")).toBe(0)
      release()
      const raced = yield* Fiber.join(racing)
      const heads = yield* Fiber.join(batches)
      expect(raced.filter((outcome) => outcome._tag === "Right")).toHaveLength(1)
      for (const outcome of raced) {
        if (outcome._tag === "Left") expect(outcome.left).toBeInstanceOf(CheckpointConflictError)
      }
      expect(yield* checkpointer.head("s")).toBe(2)
      // Every batch whole and in one piece, at the head its append reported.
      const t = yield* texts(checkpointer, "t")
      expect(t).toHaveLength(60)
      expect([...heads].sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => 3 * (i + 1)))
      for (let start = 0; start < 60; start += 3) {
        const batch = t[start]!.split(".")[0]
        expect(t.slice(start, start + 3)).toEqual([`${batch}.a`, `${batch}.b`, `${batch}.c`])
      }
    }))
  })

  it("an append that fails after it wrote undoes only itself: the others of its transaction commit, none of its rows stay", async () => {
    const file = freshFile()
    await inStore(file, 10_000, Effect.gen(function*() {
      const checkpointer = yield* Checkpointer
      for (const session of ["a", "poisoned", "b"]) yield* checkpointer.append(session, [message(`${session} first`)])
      // Another connection makes moving the head of "poisoned" fail: its append inserts its event
      // rows, then fails on the UPDATE of its head — inside a transaction shared with others.
      const other = new Database(file)
      other.exec(`CREATE TRIGGER poison BEFORE UPDATE ON lite_agent_sessions WHEN NEW.id = 'poisoned'
        BEGIN SELECT RAISE(ABORT, 'poisoned for the test'); END`)
      const release = holdLock(file)
      const appends = yield* Effect.forkAll(
        ["a", "poisoned", "b", "poisoned", "a"].map((session, i) => Effect.either(checkpointer.append(session, [message(`${session} ${i}`)])))
      )
      yield* Effect.sleep("50 millis")
      release()
      const outcomes = yield* Fiber.join(appends)
      expect(outcomes.map((outcome) => outcome._tag)).toEqual(["Right", "Left", "Right", "Left", "Right"])
      expect(String(outcomes[1]!._tag === "Left" ? outcomes[1]!.left.message : "")).toContain("poisoned for the test")
      expect(yield* texts(checkpointer, "a")).toEqual(["a first", "a 0", "a 4"])
      expect(yield* texts(checkpointer, "b")).toEqual(["b first", "b 2"])
      // Neither failed append left an event behind its head.
      expect(yield* texts(checkpointer, "poisoned")).toEqual(["poisoned first"])
      expect(other.prepare("SELECT count(*) FROM lite_agent_events WHERE session_id = 'poisoned'").pluck().get()).toBe(1)
      other.exec("DROP TRIGGER poison")
      other.close()
      expect(yield* checkpointer.append("poisoned", [message("poisoned after")])).toBe(2)
    }))
  })

  it("an append whose caller is interrupted while it waits for the lock is never written", async () => {
    const file = freshFile()
    await inStore(file, 10_000, Effect.gen(function*() {
      const checkpointer = yield* Checkpointer
      const release = holdLock(file)
      const kept = yield* Effect.fork(checkpointer.append("s", [message("kept")]))
      const dropped = yield* Effect.fork(checkpointer.append("s", [message("dropped")]))
      yield* Effect.sleep("50 millis")
      expect(Exit.isInterrupted(yield* Fiber.interrupt(dropped))).toBe(true)
      release()
      expect(yield* Fiber.join(kept)).toBe(1)
      expect(yield* texts(checkpointer, "s")).toEqual(["kept"])
      // The checkpointer carries on: the next append is the next seq.
      expect(yield* checkpointer.append("s", [message("after")])).toBe(2)
    }))
  })

  it("a lock held past busyTimeoutMs fails every append that waited that long with CheckpointBusyError, and writes nothing", async () => {
    const file = freshFile()
    await inStore(file, 300, Effect.gen(function*() {
      const checkpointer = yield* Checkpointer
      const release = holdLock(file)
      const started = Date.now()
      const outcomes = yield* Effect.forEach(
        Array.from({ length: 5 }, (_, i) => i),
        (i) => Effect.either(checkpointer.append(`s${i}`, [message("never")])),
        { concurrency: "unbounded" }
      )
      const waited = Date.now() - started
      release()
      for (const outcome of outcomes) {
        expect(outcome._tag).toBe("Left")
        if (outcome._tag === "Left") expect(outcome.left).toBeInstanceOf(CheckpointBusyError)
      }
      expect(waited).toBeGreaterThanOrEqual(250)
      for (let i = 0; i < 5; i++) expect(yield* checkpointer.head(`s${i}`)).toBe(0)
      // Once the lock is free again, appends go through.
      expect(yield* checkpointer.append("s0", [message("now")])).toBe(1)
    }))
  })
})
