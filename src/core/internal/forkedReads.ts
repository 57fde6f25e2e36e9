/**
 * Reading a session as it reads: a fork's shared events from the session it was forked from (and
 * so on up a chain of forks), then its own records, shifted by the events it shares. The shared
 * events never change (nothing may cut or delete them while the fork lives), so a fork's version
 * is its own log's.
 */
import { Chunk, Effect, Stream } from "effect"
import type { CheckpointerDriver } from "../CheckpointerDriver.js"
import { CheckpointIntegrityError, type CheckpointerError } from "../errors.js"
import type { StoredEvent } from "../events.js"
import { FOLLOW_BATCH_EVENTS } from "../follow.js"
import { type ForkOrigin, type ForkOrigins, MAX_FORK_DEPTH } from "./forkOrigins.js"
import type { Manifests } from "./manifests.js"
import { contiguousDecoder } from "./recordDecoding.js"

export const make = (driver: CheckpointerDriver, forks: ForkOrigins, manifests: Manifests) => {
  /** The session's own records after `sinceSeq` (its own seqs), decoded, a manifest capture's changes listed again. */
  const readOwn = (sessionId: string, sinceSeq: number) =>
    Stream.mapChunksEffect(Stream.mapChunksEffect(driver.read(sessionId, sinceSeq), contiguousDecoder(sessionId, sinceSeq)), manifests.expand)
  
  /** The events after `sinceSeq` as the session reads: a fork's shared events from its source, then its own, shifted. */
  const readView = (sessionId: string, sinceSeq: number, depth: number): Stream.Stream<StoredEvent, CheckpointerError> =>
    Stream.unwrap(Effect.map(forks.of(sessionId), (origin) => {
      if (origin === undefined) return readOwn(sessionId, sinceSeq)
      const shared = origin.at
      const own = Stream.map(readOwn(sessionId, Math.max(0, sinceSeq - shared)), (stored) => ({ ...stored, seq: stored.seq + shared }))
      if (sinceSeq >= shared) return own
      if (depth >= MAX_FORK_DEPTH) return Stream.fail(forkChainTooDeep(sessionId))
      const prefix = Stream.takeWhile(readView(origin.from, sinceSeq, depth + 1), (stored) => stored.seq <= shared)
      return Stream.mapChunksEffect(Stream.concat(prefix, own), sharedEventsCheck(sessionId, origin, sinceSeq))
    }))
  
  const forkChainTooDeep = (sessionId: string) =>
    new CheckpointIntegrityError({ sessionId, detail: `its chain of forks is longer than ${MAX_FORK_DEPTH}: the store is damaged` })
  
  const sharedEventMissing = (sessionId: string, origin: ForkOrigin, seq: number, found: number | undefined) =>
    new CheckpointIntegrityError({
      sessionId,
      seq,
      detail: `it is a fork of session "${origin.from}" sharing its first ${origin.at} events, and event ${seq} is not there ` +
        `(${found === undefined ? "nothing" : `event ${found}`} instead): that session was cut or deleted`
    })
  
  /** A fork's events must follow on from its source's without a gap: a source cut or deleted (by an older writer) shows here. */
  const sharedEventsCheck = (sessionId: string, origin: ForkOrigin, sinceSeq: number) => {
    let expectedSeq = sinceSeq + 1
    return (chunk: Chunk.Chunk<StoredEvent>): Effect.Effect<Chunk.Chunk<StoredEvent>, CheckpointerError> => {
      for (const stored of chunk) {
        if (stored.seq !== expectedSeq) return Effect.fail(sharedEventMissing(sessionId, origin, expectedSeq, stored.seq))
        expectedSeq++
      }
      return Effect.succeed(chunk)
    }
  }
  
  /** A follower's look at the session as it reads (a fork: its source's shared events first, then its own). */
  const pageView = (
    sessionId: string,
    after: number,
    generation: string | undefined,
    depth: number
  ): Effect.Effect<{ readonly events: Chunk.Chunk<StoredEvent>; readonly head: number; readonly generation: string }, CheckpointerError> =>
    Effect.flatMap(forks.of(sessionId), (origin) => {
      const shared = origin?.at ?? 0
      if (origin === undefined || after >= shared) {
        return Effect.flatMap(driver.readPage(sessionId, after - shared, FOLLOW_BATCH_EVENTS, generation), (page) =>
          Effect.map(Effect.flatMap(contiguousDecoder(sessionId, after - shared)(Chunk.unsafeFromArray(page.records)), manifests.expand), (events) => ({
            events: shared === 0 ? events : Chunk.map(events, (stored) => ({ ...stored, seq: stored.seq + shared })),
            head: page.head === 0 ? 0 : page.head + shared,
            generation: page.generation
          })))
      }
      if (depth >= MAX_FORK_DEPTH) return Effect.fail(forkChainTooDeep(sessionId))
      // The shared events never change: read them from the source, with the fork's own version.
      return Effect.flatMap(driver.version(sessionId), (version) =>
        Effect.flatMap(pageView(origin.from, after, undefined, depth + 1), (page) => {
          const events = Chunk.filter(page.events, (stored) => stored.seq <= shared)
          // None at all is a gap too: the source holds fewer events than the fork shares.
          const checked = Chunk.isEmpty(events)
            ? Effect.fail(sharedEventMissing(sessionId, origin, after + 1, undefined))
            : sharedEventsCheck(sessionId, origin, after)(events)
          return Effect.map(checked, (events) => ({
            events,
            head: version.head === 0 ? 0 : version.head + shared,
            generation: version.generation
          }))
        }))
    })

  return { readView, pageView }
}
