/**
 * A fork racing a delete or a truncate, at the exact steps where one could slip between the
 * other's: a driver that runs the other operation right after the fork has looked. Whatever the
 * interleaving, every session left reads whole.
 */
import { Effect, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { type CheckpointerDriver, type CheckpointerService, ForkMade, makeCheckpointer, SessionForked, UserMessage } from "../src/core.js"
import { makeDriver } from "../src/backends/memory.js"

/** The memory driver, its `head` or `withSession` of one session running `meanwhile` once (once armed), right after the fork looked. */
const interleaved = (
  target: { readonly method: "head" | "withSession"; readonly sessionId: string },
  meanwhile: (checkpointer: CheckpointerService) => Effect.Effect<unknown, unknown>
) =>
  Effect.gen(function*() {
    const driver = yield* makeDriver
    let armed = false
    let checkpointer: CheckpointerService | undefined
    const runOnce = Effect.suspend(() => {
      if (!armed || checkpointer === undefined) return Effect.void
      armed = false
      return Effect.ignore(meanwhile(checkpointer))
    })
    const wrapped: CheckpointerDriver = {
      ...driver,
      head: (sessionId) =>
        target.method === "head" && sessionId === target.sessionId ? Effect.tap(driver.head(sessionId), () => runOnce) : driver.head(sessionId),
      withSession: (sessionId, use) =>
        target.method === "withSession" && sessionId === target.sessionId
          ? Effect.zipRight(runOnce, driver.withSession(sessionId, use))
          : driver.withSession(sessionId, use)
    }
    checkpointer = yield* makeCheckpointer(wrapped)
    return { checkpointer, arm: () => void (armed = true) }
  })

const messages = (count: number) => Array.from({ length: count }, (_, i) => new UserMessage({ content: `m${i}` }))

/** Every session left reads whole (a fork whose source lost its events would fail here). */
const everySessionReads = (checkpointer: CheckpointerService) =>
  Effect.gen(function*() {
    for (const { id } of yield* checkpointer.list()) {
      const read = yield* Effect.either(Stream.runCollect(checkpointer.read(id)))
      expect(read._tag === "Left" ? `${id}: ${read.left.message}` : "whole").toBe("whole")
    }
  })

describe("a fork and a delete or truncate at the same moment", () => {
  it("a fork into an id whose old session is deleted right after the fork looked at it is refused; the source stays deletable and nothing unreadable is left", async () => {
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const { arm, checkpointer } = yield* interleaved({ method: "head", sessionId: "f" }, (c) => c.delete("f"))
      yield* checkpointer.append("s", messages(3))
      yield* checkpointer.append("f", messages(1))
      arm()
      const forked = yield* Effect.either(checkpointer.append("f", [new SessionForked({ from: "s", at: 3 })], 0))
      expect(forked).toMatchObject({ _tag: "Left", left: { _tag: "CheckpointConflictError" } })
      yield* checkpointer.delete("s")
      yield* everySessionReads(checkpointer)
    })))
  })

  it("a truncate of the source between its naming of the fork and the fork's first event: an older name of the same fork id does not keep it", async () => {
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const { arm, checkpointer } = yield* interleaved({ method: "withSession", sessionId: "f" }, (c) => c.truncate("s", 12))
      yield* checkpointer.append("s", messages(3))
      // What an earlier fork of "f" that a crash cut short left in the source: its name, at 3.
      yield* checkpointer.append("s", [new ForkMade({ fork: "f", at: 3 })])
      yield* checkpointer.append("s", messages(12))
      arm()
      const forked = yield* Effect.either(checkpointer.append("f", [new SessionForked({ from: "s", at: 16 })], 0))
      expect(yield* checkpointer.head("s")).toBe(12)
      expect(forked).toMatchObject({ _tag: "Left", left: { _tag: "InvalidEventError" } })
      expect(yield* checkpointer.head("f")).toBe(0)
      yield* everySessionReads(checkpointer)
    })))
  })

  it("a fork that lost its source and was appended to meanwhile is not taken from whoever appended: the error says it is left, and to delete it", async () => {
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      // Two steps slip in: the source deleted as the fork is about to be written (it is not there
      // yet, so nothing stops the delete), then an append to the fork right before its look-again.
      const driver = yield* makeDriver
      let checkpointer: CheckpointerService | undefined
      let cut: "no" | "cutting" | "done" = "no"
      let appended = false
      const wrapped: CheckpointerDriver = {
        ...driver,
        withSession: (sessionId, use) => {
          const before = Effect.suspend(() => {
            if (checkpointer === undefined) return Effect.void
            if (sessionId === "f" && cut === "no") {
              cut = "cutting"
              return Effect.zipRight(Effect.ignore(checkpointer.delete("s")), Effect.sync(() => void (cut = "done")))
            }
            if (sessionId === "s" && cut === "done" && !appended) {
              appended = true
              return Effect.ignore(checkpointer.append("f", messages(1)))
            }
            return Effect.void
          })
          return Effect.zipRight(before, driver.withSession(sessionId, use))
        }
      }
      const made = yield* makeCheckpointer(wrapped)
      yield* made.append("s", messages(3))
      checkpointer = made
      const forked = yield* Effect.either(made.append("f", [new SessionForked({ from: "s", at: 3 })], 0))
      expect(appended).toBe(true)
      expect(forked).toMatchObject({ _tag: "Left", left: { _tag: "InvalidEventError" } })
      expect(forked._tag === "Left" ? forked.left.message : "").toContain(`is left and cannot be read: delete "f"`)
      yield* made.delete("f")
      yield* everySessionReads(made)
    })))
  })
})
