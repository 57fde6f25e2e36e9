/** Reading a session back and checking failures: shared by every group of conformance tests. */
import assert from "node:assert/strict"
import { Chunk, Effect, Exit, Schema, Stream } from "effect"
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
