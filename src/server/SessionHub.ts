/**
 * One follower per session, shared by the SSE clients that follow it: each change is looked up
 * and encoded once, kept in a ring of the last `sseBufferEvents` frames, and written to every
 * client from there. Per client and event that is one socket write (sseClient.ts): a client
 * whose socket is full is skipped, and written what it missed from the ring when it drains —
 * the ring is the bounded buffer, shared by all clients instead of one queue each.
 *
 * A client the ring cannot serve — one resuming from further back, or one that fell further
 * behind than the ring keeps — reads from the store with a follower of its own, as fast as its
 * socket drains, and waits at the hub meanwhile: the hub takes it on as soon as everything after
 * its position is in the ring (checked on every publish and after every event the client is
 * written), and its own follower stops. Joining and publishing run on one thread with nothing
 * awaited in between, so nothing is missed or written twice at a handover.
 *
 * The hub starts at the session's head (with its generation, so a rewrite before the first look
 * is a reset); frames carry the generation of their log, so a position is exact across resets.
 */
import { Deferred, Effect, Exit, Option, RcMap, Stream } from "effect"
import type { CheckpointerService, FollowItem } from "../core/Checkpointer.js"
import type { CheckpointerError } from "../core/errors.js"
import { drained, type SseClient, type SseSettings, untilEnded } from "./sseClient.js"

/** A hub nobody follows lives on this long, for clients that reconnect. */
const HUB_IDLE_MS = 10_000

interface Published {
  readonly generation: string
  readonly seq: number
  readonly frame: Uint8Array
}

/** Where a client is: the last seq it was written, of which log (undefined: the current one). */
interface Position {
  generation: string | undefined
  seq: number
}

interface Follower {
  readonly client: SseClient
  /** Kept current as the hub writes, so the client can go on from there if the hub lets go. */
  readonly position: Position
  /** The number of the next published frame to write to it. */
  cursor: number
  /** The hub has let go of the client: it fell behind the ring, or its stream ended. */
  readonly onLeave: () => void
}

interface Waiting {
  readonly client: SseClient
  readonly position: Position
  readonly onLeave: () => void
  readonly onJoined: () => void
  joined: boolean
}

class Hub {
  private readonly ring: Array<Published> = []
  /** Frames published so far; frame n is at `ring[n % capacity]` while `n >= published - capacity`. */
  private published = 0
  private generation: string
  /** The seq the current log's frames start after, and the number of its first frame. */
  private baseSeq: number
  private generationStart = 0
  private lastSeq: number
  private failed = false
  private readonly followers = new Set<Follower>()
  private readonly waiting = new Set<Waiting>()

  constructor(
    start: { readonly head: number; readonly generation: string },
    /** The ring's size: how far behind the head a client may be and still be written from it. */
    private readonly capacity: number,
    private readonly toFrame: (item: FollowItem) => Uint8Array,
    private readonly errorFrame: (error: CheckpointerError) => Uint8Array
  ) {
    this.generation = start.generation
    this.baseSeq = start.head
    this.lastSeq = start.head
  }

  publish(item: FollowItem) {
    const frame = this.toFrame(item)
    if (item.type === "reset") {
      this.generation = item.generation
      this.baseSeq = 0
      this.lastSeq = 0
      this.keep({ generation: item.generation, seq: 0, frame })
      this.generationStart = this.published
    } else {
      this.lastSeq = item.stored.seq
      this.keep({ generation: item.generation, seq: item.stored.seq, frame })
    }
    for (const follower of this.followers) if (!follower.client.blocked) this.pump(follower)
    for (const waiting of this.waiting) this.tryJoin(waiting)
  }

  fail(error: CheckpointerError) {
    this.failed = true
    const last = this.errorFrame(error)
    for (const follower of this.followers) follower.client.end(last)
  }

  /**
   * Take `client` on from `position` if everything after it is in the ring: it is written what
   * follows from now on, `position` kept current, until `onLeave`. False if it cannot be.
   */
  join(client: SseClient, position: Position, onLeave: () => void): boolean {
    const next = this.nextFrameAfter(position)
    if (next === undefined || client.ended) return false
    const follower: Follower = { client, position, cursor: next, onLeave }
    this.followers.add(follower)
    client.onDrain = () => this.pump(follower)
    this.pump(follower)
    return true
  }

  /** Wait at the hub: the client is joined at `position` as soon as it can be (its writer keeps `position` current). */
  wait(client: SseClient, position: Position, onLeave: () => void, onJoined: () => void): Waiting {
    const waiting: Waiting = { client, position, onLeave, onJoined, joined: false }
    this.waiting.add(waiting)
    return waiting
  }

  stopWaiting(waiting: Waiting) {
    this.waiting.delete(waiting)
  }

  tryJoin(waiting: Waiting) {
    if (waiting.client.ended) return this.waiting.delete(waiting)
    if (waiting.joined || !this.join(waiting.client, waiting.position, waiting.onLeave)) return
    waiting.joined = true
    this.waiting.delete(waiting)
    waiting.onJoined()
  }

  /** The number of the first frame after `position`, if the ring holds all that follows it. */
  private nextFrameAfter(position: Position): number | undefined {
    if (this.failed) return undefined
    // Without a generation, a seq is taken to be of the current log, as `follow` takes it.
    if (position.generation !== undefined && position.generation !== this.generation) return undefined
    if (position.seq < this.baseSeq || position.seq > this.lastSeq) return undefined
    // The seqs of one log follow one another: the frame after seq s is at a known number.
    const next = this.generationStart + (position.seq - this.baseSeq)
    if (next < this.published - this.capacity) return undefined
    if (next < this.published && this.ring[next % this.capacity]!.seq !== position.seq + 1) return undefined
    return next
  }

  private keep(published: Published) {
    this.ring[this.published % this.capacity] = published
    this.published += 1
  }

  /** Write to `follower` what it has not had, until its socket is full. */
  private pump(follower: Follower) {
    const { client, position } = follower
    if (client.ended || this.published - follower.cursor > this.capacity) return this.leave(follower)
    while (!client.blocked && follower.cursor < this.published) {
      const published = this.ring[follower.cursor % this.capacity]!
      follower.cursor += 1
      position.generation = published.generation
      position.seq = published.seq
      client.write(published.frame)
    }
  }

  private leave(follower: Follower) {
    this.followers.delete(follower)
    if (follower.client.onDrain !== undefined) follower.client.onDrain = undefined
    follower.onLeave()
  }
}

export const makeSessionHubs = (
  checkpointer: CheckpointerService,
  settings: SseSettings,
  toFrame: (item: FollowItem) => Uint8Array,
  errorFrame: (error: CheckpointerError) => Uint8Array
) =>
  Effect.gen(function*() {
    const hubs: RcMap.RcMap<string, Hub, CheckpointerError> = yield* RcMap.make({
      lookup: (sessionId: string) =>
        Effect.gen(function*() {
          const start = yield* checkpointer.version(sessionId)
          const hub = new Hub(start, settings.sseBufferEvents, toFrame, errorFrame)
          yield* Effect.forkScoped(
            Stream.runForEach(
              checkpointer.follow(sessionId, { sinceSeq: start.head, generation: start.generation }),
              (item) => Effect.sync(() => hub.publish(item))
            ).pipe(
              Effect.catchAll((error) =>
                Effect.zipRight(Effect.sync(() => hub.fail(error)), RcMap.invalidate(hubs, sessionId))
              )
            )
          )
          return hub
        }),
      idleTimeToLive: HUB_IDLE_MS
    })

    /**
     * Follow `sessionId` after `sinceSeq` (of `generation`) on `client`, until the client is gone
     * or the stream fails. The hub writes to the client while it can; before that, and whenever
     * the client falls further behind than the hub keeps, the client reads from the store with a
     * follower of its own, and is handed back to the hub as soon as the hub can take it on.
     */
    const serve = (client: SseClient, sessionId: string, sinceSeq: number, generation?: string) =>
      Effect.scoped(Effect.gen(function*() {
        const hub = Option.getOrUndefined(yield* Effect.option(RcMap.get(hubs, sessionId)))
        const position: Position = { generation, seq: sinceSeq }
        while (!client.ended) {
          const left = yield* Deferred.make<void>()
          const onLeave = () => Deferred.unsafeDone(left, Exit.void)
          const byHub = Effect.raceFirst(Deferred.await(left), untilEnded(client))
          if (hub?.join(client, position, onLeave) === true) {
            yield* byHub
            continue
          }
          const handedOver = yield* Deferred.make<void>()
          const waiting = hub?.wait(client, position, onLeave, () => Deferred.unsafeDone(handedOver, Exit.void))
          const isHandedOver = () => waiting?.joined === true
          const own = checkpointer.follow(sessionId, {
            sinceSeq: position.seq,
            ...(position.generation === undefined ? {} : { generation: position.generation })
          })
          yield* Stream.runForEachWhile(Stream.interruptWhen(own, Deferred.await(handedOver)), (item) => {
            // The hub may have taken the client on since this item was read: it writes from here.
            if (isHandedOver()) return Effect.succeed(false)
            const written = client.write(toFrame(item))
            position.generation = item.generation
            position.seq = item.type === "reset" ? 0 : item.stored.seq
            if (waiting !== undefined) hub?.tryJoin(waiting)
            if (isHandedOver() || client.ended) return Effect.succeed(false)
            return written
              ? Effect.succeed(true)
              : Effect.map(Effect.raceFirst(drained(client), Deferred.await(handedOver)), () => !client.ended && !isHandedOver())
          }).pipe(Effect.ensuring(Effect.sync(() => waiting !== undefined && hub?.stopWaiting(waiting))))
          if (isHandedOver()) yield* byHub
        }
      }))

    return { serve }
  })

