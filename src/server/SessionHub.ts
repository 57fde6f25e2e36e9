/**
 * One follower per session, shared by the SSE clients that follow it at its head: each change
 * is looked up and encoded once, then handed to every client, instead of every client looking
 * at the store for every change. A client whose position the hub cannot serve (far behind, or
 * ahead of a log that was cut) follows on its own, as before.
 *
 * The hub starts at the session's head (with its generation, so a rewrite before the first look
 * is a reset) and publishes each item with its SSE frame and an epoch that every reset
 * increments, keeping the last items for joiners. A client joins when its position lies within
 * what the hub still keeps of the current epoch — at once, or after catching up with a follower
 * of its own, once an event it was given is of the hub's generation and the hub keeps what
 * follows it; it skips what it has and what belongs to older epochs, and from then on is fed
 * by the hub.
 */
import { Effect, Option, PubSub, RcMap, Ref, Stream } from "effect"
import type { CheckpointerService, FollowItem } from "../core/Checkpointer.js"
import type { CheckpointerError } from "../core/errors.js"

/** Items a hub keeps for clients that join. */
const HUB_REPLAY = 1024
/** A hub nobody follows lives on this long, for clients that reconnect. */
const HUB_IDLE_MS = 10_000

type HubMessage =
  | { readonly type: "item"; readonly epoch: number; readonly seq: number; readonly item: FollowItem; readonly frame: Uint8Array }
  | { readonly type: "failed"; readonly error: CheckpointerError }

interface HubWindow {
  readonly epoch: number
  /** The generation of the log the current epoch follows. */
  readonly generation: string
  /** The lowest seq of the current epoch the hub still keeps (everything above it is kept). */
  readonly firstSeq: number
  readonly lastSeq: number
  readonly failed: boolean
}

interface Hub {
  readonly messages: PubSub.PubSub<HubMessage>
  readonly window: Ref.Ref<HubWindow>
}

export const makeSessionHubs = (checkpointer: CheckpointerService, toFrame: (item: FollowItem) => Uint8Array) =>
  Effect.gen(function*() {
    const hubs: RcMap.RcMap<string, Hub, CheckpointerError> = yield* RcMap.make({
      lookup: (sessionId: string) =>
        Effect.gen(function*() {
          const start = yield* checkpointer.version(sessionId)
          const messages = yield* Effect.acquireRelease(PubSub.unbounded<HubMessage>({ replay: HUB_REPLAY }), PubSub.shutdown)
          const window = yield* Ref.make<HubWindow>({
            epoch: 0,
            generation: start.generation,
            firstSeq: start.head + 1,
            lastSeq: start.head,
            failed: false
          })
          // The seqs of the current epoch among the last items kept, oldest first (one fewer than the replay keeps).
          let kept: Array<number> = []
          const publish = (item: FollowItem) =>
            Effect.flatMap(
              Ref.modify(window, (current): [HubMessage, HubWindow] => {
                if (item.type === "reset") {
                  kept = []
                  const epoch = current.epoch + 1
                  return [
                    { type: "item", epoch, seq: 0, item, frame: toFrame(item) },
                    { epoch, generation: item.generation, firstSeq: 1, lastSeq: 0, failed: false }
                  ]
                }
                const seq = item.stored.seq
                kept.push(seq)
                if (kept.length > HUB_REPLAY - 1) kept = kept.slice(kept.length - (HUB_REPLAY - 1))
                return [
                  { type: "item", epoch: current.epoch, seq, item, frame: toFrame(item) },
                  { ...current, firstSeq: kept[0]!, lastSeq: seq }
                ]
              }),
              (message) => PubSub.publish(messages, message)
            )
          yield* Effect.forkScoped(
            Stream.runForEach(checkpointer.follow(sessionId, { sinceSeq: start.head, generation: start.generation }), publish).pipe(
              Effect.catchAll((error) =>
                Effect.zipRight(
                  Ref.update(window, (current) => ({ ...current, failed: true })),
                  PubSub.publish(messages, { type: "failed", error })
                )
              )
            )
          )
          return { messages, window }
        }),
      idleTimeToLive: HUB_IDLE_MS
    })

    /** Whether a client at `seq` of `generation` can be fed by the hub from here on. */
    const canJoin = (window: HubWindow, seq: number, generation: string | undefined) =>
      !window.failed && (generation === undefined || generation === window.generation) &&
      seq >= window.firstSeq - 1 && seq <= window.lastSeq

    /**
     * The SSE frames of `sessionId` after `sinceSeq`, live: a client behind the hub catches up
     * with a follower of its own, then joins the hub as soon as the hub keeps what comes next.
     */
    const frames = (sessionId: string, sinceSeq: number, generation?: string): Stream.Stream<Uint8Array, CheckpointerError> =>
      Stream.unwrapScoped(
        Effect.gen(function*() {
          const followOwn = () => checkpointer.follow(sessionId, { sinceSeq, ...(generation === undefined ? {} : { generation }) })
          const own: Stream.Stream<Uint8Array, CheckpointerError> = Stream.map(followOwn(), toFrame)
          const hub = yield* Effect.option(RcMap.get(hubs, sessionId))
          if (Option.isNone(hub)) return own
          // Subscribed before anything is compared: nothing the hub publishes from now on is missed.
          const subscription = yield* PubSub.subscribe(hub.value.messages)
          /** The hub's messages after the client's position (`last` of `joined.epoch`), as frames. */
          const fromHub = (joined: HubWindow, position: number): Stream.Stream<Uint8Array, CheckpointerError> => {
            let last = position
            return Stream.fromQueue(subscription).pipe(
              Stream.mapEffect((message) => {
                if (message.type === "failed") return Effect.zipRight(RcMap.invalidate(hubs, sessionId), Effect.fail(message.error))
                // What the client has: older epochs, the reset that began its own, the seqs up to its position.
                if (message.epoch < joined.epoch || (message.epoch === joined.epoch && message.seq <= last)) {
                  return Effect.succeed(Option.none<Uint8Array>())
                }
                last = message.seq
                return Effect.succeed(Option.some(message.frame))
              }),
              Stream.filterMap((frame) => frame)
            )
          }
          const window = yield* Ref.get(hub.value.window)
          // Without a generation, a seq is taken to be of the current log, as `follow` takes it.
          if (canJoin(window, sinceSeq, generation)) return fromHub(window, sinceSeq)
          // Catch up alone, and hand over to the hub once it can take the client on.
          let joined: { readonly window: HubWindow; readonly seq: number } | undefined
          const catchingUp = followOwn().pipe(
            Stream.takeUntilEffect((item) =>
              item.type === "reset"
                ? Effect.succeed(false)
                : Effect.map(Ref.get(hub.value.window), (current) => {
                  if (!canJoin(current, item.stored.seq, item.generation)) return false
                  joined = { window: current, seq: item.stored.seq }
                  return true
                })
            ),
            Stream.map(toFrame)
          )
          return Stream.concat(catchingUp, Stream.suspend(() => (joined === undefined ? Stream.empty : fromHub(joined.window, joined.seq))))
        })
      )
    return { frames }
  })
