/** Reading a session back and checking failures: shared by every group of conformance tests. */
import assert from "node:assert/strict"
import { Chunk, Clock, Effect, Exit, Schema, Stream } from "effect"
import type { CheckpointerService } from "../core/Checkpointer.js"
import { SessionEvent, type StoredEvent } from "../core/events.js"

export const encodeEvent = Schema.encodeSync(SessionEvent)

export const readAll = (c: CheckpointerService, sessionId: string, sinceSeq?: number) =>
  Effect.map(
    Stream.runCollect(c.read(sessionId, sinceSeq === undefined ? undefined : { sinceSeq })),
    Chunk.toReadonlyArray
  )

export const encodedEvents = (stored: ReadonlyArray<StoredEvent>) => stored.map((s) => encodeEvent(s.event))

/** Fails unless `effect` fails with an instance of `errorClass`; returns that error. */
export const expectFailure = <A>(
  effect: Effect.Effect<unknown, unknown>,
  errorClass: abstract new(...args: ReadonlyArray<never>) => A,
  what: string
): Effect.Effect<A> =>
  Effect.flatMap(Effect.exit(effect), (exit) =>
    Effect.sync(() => {
      if (Exit.isSuccess(exit)) assert.fail(`${what}: expected ${errorClass.name}, but it succeeded`)
      const failure = exit.cause._tag === "Fail" ? exit.cause.error : undefined
      assert.ok(
        failure instanceof errorClass,
        `${what}: expected ${errorClass.name}, got ${String(failure ?? exit.cause)}`
      )
      return failure as A
    }))

export const sleep = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))

/**
 * `effect` run as if `shiftMs` later (or earlier, when negative): what the store's objects are
 * touched with and what a collection takes as now — so a test sees what an hour of waiting does
 * without waiting. Sleeps are not shifted.
 */
export const shiftedBy = (shiftMs: number) => <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.clock, (clock) => {
    const shifted: Clock.Clock = {
      [Clock.ClockTypeId]: Clock.ClockTypeId,
      unsafeCurrentTimeMillis: () => clock.unsafeCurrentTimeMillis() + shiftMs,
      currentTimeMillis: Effect.map(clock.currentTimeMillis, (now) => now + shiftMs),
      unsafeCurrentTimeNanos: () => clock.unsafeCurrentTimeNanos() + BigInt(shiftMs) * 1_000_000n,
      currentTimeNanos: Effect.map(clock.currentTimeNanos, (now) => now + BigInt(shiftMs) * 1_000_000n),
      sleep: (duration) => clock.sleep(duration)
    }
    return Effect.withClock(effect, shifted)
  })
