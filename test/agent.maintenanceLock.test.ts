/**
 * The agent's concurrency rules on their own (`MaintenanceLock.layer`), and swapped: an agent
 * built with `LiteAgent.layerWithoutDependencies` takes whatever lock it is given.
 */
import { it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Layer } from "effect"
import { describe, expect } from "vitest"
import { AgentBusyError } from "../src/index.js"
import { FileTools, LiteAgent, MaintenanceLock, MemoryCheckpointer, TimeTravel, Workspace } from "../src/core.js"
import { scriptedLayer } from "../src/provider.js"
import { tempDir } from "./support/agent.js"

const withLock = <A, E>(body: (lock: MaintenanceLock.MaintenanceLockService) => Effect.Effect<A, E>) =>
  Effect.flatMap(MaintenanceLock.MaintenanceLock, body).pipe(Effect.provide(MaintenanceLock.layer))

/** Fork `holder` on the lock and wait until it holds; it keeps holding until `release` completes. */
const hold = <E>(
  acquire: (held: Effect.Effect<void>) => Effect.Effect<void, E>
) =>
  Effect.gen(function*() {
    const started = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    const fiber = yield* Effect.fork(acquire(Effect.zipRight(Deferred.succeed(started, undefined), Deferred.await(release))))
    yield* Deferred.await(started)
    return { fiber, release: Effect.zipRight(Deferred.succeed(release, undefined), Fiber.join(fiber)) }
  })

const busyReason = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) && exit.cause._tag === "Fail" && exit.cause.error instanceof AgentBusyError
    ? exit.cause.error.reason
    : `not busy: ${String(exit)}`

describe("MaintenanceLock.layer", () => {
  it.effect("turns of one session run one at a time; other sessions run alongside", () =>
    withLock((lock) =>
      Effect.gen(function*() {
        const order: Array<string> = []
        const first = yield* hold((held) => lock.turn("send", "s", Effect.zipRight(Effect.sync(() => order.push("s:1")), held)))
        const second = yield* Effect.fork(lock.turn("send", "s", Effect.sync(() => order.push("s:2"))))
        yield* lock.turn("send", "other", Effect.sync(() => order.push("other")))
        yield* Effect.yieldNow()
        expect(order).toEqual(["s:1", "other"])
        yield* first.release
        yield* Fiber.join(second)
        expect(order).toEqual(["s:1", "other", "s:2"])
      })
    ))

  it.effect("maintenance needs the agent idle: refused while a turn runs or waits, allowed once it is over", () =>
    withLock((lock) =>
      Effect.gen(function*() {
        const running = yield* hold((held) => lock.turn("send", "s", held))
        expect(busyReason(yield* Effect.exit(lock.maintenance("restore", "s", Effect.void)))).toBe("run_in_flight")
        yield* running.release

        // A turn waiting for its session (held by a background drain) counts too.
        const drain = yield* hold((held) => lock.withSession("s", held))
        const waiting = yield* Effect.fork(lock.turn("send", "s", Effect.void))
        yield* Effect.yieldNow()
        const refused = yield* Effect.exit(lock.maintenance("deleteSession", "s", Effect.void))
        expect(busyReason(refused)).toBe("run_in_flight")
        yield* drain.release
        yield* Fiber.join(waiting)

        expect(yield* lock.maintenance("restore", "s", Effect.succeed("done"))).toBe("done")
      })
    ))

  it.effect("while maintenance runs, turns and other maintenance are refused at once", () =>
    withLock((lock) =>
      Effect.gen(function*() {
        const restoring = yield* hold((held) => lock.maintenance("restore", "s", held))
        const turn = yield* Effect.exit(lock.turn("send", "other", Effect.void))
        expect(busyReason(turn)).toBe("maintenance")
        expect(turn).toMatchObject({ cause: { error: { operation: "send", sessionId: "other" } } })
        expect(String(Exit.isFailure(turn) && turn.cause)).toContain(`restore of session "s" is running`)
        expect(busyReason(yield* Effect.exit(lock.maintenance("deleteSession", "t", Effect.void)))).toBe("maintenance")
        yield* restoring.release
        yield* lock.turn("send", "other", Effect.void)
      })
    ))

  it.effect("a running background task blocks maintenance until its completion is logged", () =>
    withLock((lock) =>
      Effect.gen(function*() {
        yield* lock.backgroundStarted({ taskId: "bg_1", sessionId: "s", command: "sleep 5" })
        expect(yield* lock.backgroundTasks).toEqual([{ taskId: "bg_1", sessionId: "s", command: "sleep 5" }])
        const refused = yield* Effect.exit(lock.maintenance("restore", "s", Effect.void))
        expect(busyReason(refused)).toBe("background_task")
        expect(String(Exit.isFailure(refused) && refused.cause)).toContain("bg_1 (sleep 5)")
        // Turns go on meanwhile.
        yield* lock.turn("send", "s", Effect.void)
        yield* lock.backgroundLogged(new Set(["bg_1"]))
        expect(yield* lock.backgroundTasks).toEqual([])
        yield* lock.maintenance("restore", "s", Effect.void)
      })
    ))

  it.effect("a working turn holds up maintenance of every session, naming its own", () =>
    withLock((lock) =>
      Effect.gen(function*() {
        const running = yield* hold((held) => lock.turn("send", "s", held))
        const refused = yield* Effect.exit(lock.maintenance("restore", "other", Effect.void))
        expect(busyReason(refused)).toBe("run_in_flight")
        expect(String(Exit.isFailure(refused) && refused.cause)).toContain(`turns are running in session(s) "s"`)
        yield* running.release
        yield* lock.maintenance("restore", "other", Effect.void)
      })
    ))

  it.effect("a turn waiting for a permission answer does not hold up other sessions' maintenance; its own, and pruning, wait for it", () =>
    withLock((lock) =>
      Effect.gen(function*() {
        const asking = yield* hold((held) => lock.turn("send", "s", lock.whileAsking("s", held)))
        expect(yield* lock.maintenance("restore", "other", Effect.succeed("restored"))).toBe("restored")
        expect(yield* lock.maintenance("deleteSession", "other", Effect.succeed("deleted"))).toBe("deleted")
        const own = yield* Effect.exit(lock.maintenance("restore", "s", Effect.void))
        expect(busyReason(own)).toBe("run_in_flight")
        expect(String(Exit.isFailure(own) && own.cause)).toContain(`a turn of session "s" is running, waiting for a permission answer or queued`)
        const pruning = yield* Effect.exit(lock.maintenance("pruneSessions", "other", Effect.void, { everySession: true }))
        expect(busyReason(pruning)).toBe("run_in_flight")
        yield* asking.release
        yield* lock.maintenance("pruneSessions", "other", Effect.void, { everySession: true })
      })
    ))

  it.effect("a turn answered while maintenance of another session runs goes on once it is over, and is working again", () =>
    withLock((lock) =>
      Effect.gen(function*() {
        const order: Array<string> = []
        const asked = yield* Deferred.make<void>()
        const answer = yield* Deferred.make<void>()
        const turn = yield* Effect.fork(lock.turn("send", "s", Effect.gen(function*() {
          yield* lock.whileAsking("s", Effect.zipRight(Deferred.succeed(asked, undefined), Deferred.await(answer)))
          order.push("the turn goes on")
          // Working again: maintenance of another session waits for it.
          return busyReason(yield* Effect.exit(lock.maintenance("restore", "third", Effect.void)))
        })))
        // The turn failing before it asks ends the wait too (and the test, with its error).
        yield* Effect.raceFirst(Deferred.await(asked), Effect.zipRight(Fiber.join(turn), Effect.dieMessage("the turn ended without asking")))
        const restoring = yield* hold((held) => lock.maintenance("restore", "other", held))
        yield* Deferred.succeed(answer, undefined)
        yield* Effect.repeatN(Effect.yieldNow(), 20)
        expect(order).toEqual([])
        yield* restoring.release
        expect(yield* Fiber.join(turn)).toBe("run_in_flight")
        expect(order).toEqual(["the turn goes on"])
      })
    ))

  it.effect("a turn queued behind one that asks does not hold up other sessions' maintenance either", () =>
    withLock((lock) =>
      Effect.gen(function*() {
        const order: Array<string> = []
        const asking = yield* hold((held) => lock.turn("send", "s", lock.whileAsking("s", held)))
        const queued = yield* Effect.fork(lock.turn("send", "s", Effect.sync(() => order.push("queued turn"))))
        yield* Effect.yieldNow()
        yield* lock.maintenance("restore", "other", Effect.void)
        expect(busyReason(yield* Effect.exit(lock.maintenance("restore", "s", Effect.void)))).toBe("run_in_flight")
        yield* asking.release
        yield* Fiber.join(queued)
        expect(order).toEqual(["queued turn"])
        yield* lock.maintenance("restore", "s", Effect.void)
      })
    ))

  it.effect("a turn interrupted while it asks ends at once, even while maintenance runs, and releases what it claimed", () =>
    withLock((lock) =>
      Effect.gen(function*() {
        const asking = yield* hold((held) => lock.turn("send", "s", lock.whileAsking("s", held)))
        const restoring = yield* hold((held) => lock.maintenance("restore", "other", held))
        yield* Fiber.interrupt(asking.fiber)
        yield* restoring.release
        yield* lock.maintenance("restore", "s", Effect.void)
        yield* lock.maintenance("pruneSessions", "s", Effect.void, { everySession: true })
      })
    ))

  it.effect("a turn or maintenance that fails or is interrupted releases what it claimed", () =>
    withLock((lock) =>
      Effect.gen(function*() {
        expect(Exit.isFailure(yield* Effect.exit(lock.turn("send", "s", Effect.fail("model down"))))).toBe(true)
        const interrupted = yield* hold((held) => lock.turn("send", "s", held))
        yield* Fiber.interrupt(interrupted.fiber)
        expect(Exit.isFailure(yield* Effect.exit(lock.maintenance("restore", "s", Effect.fail("refused"))))).toBe(true)
        yield* lock.maintenance("restore", "s", Effect.void)
        yield* lock.turn("send", "s", Effect.void)
      })
    ))
})

describe("the agent takes the lock it is given", () => {
  it.effect("LiteAgent.layerWithoutDependencies with a lock that refuses all maintenance", () => {
    const refusing = Layer.effect(
      MaintenanceLock.MaintenanceLock,
      Effect.map(MaintenanceLock.make, (lock): MaintenanceLock.MaintenanceLockService => ({
        ...lock,
        maintenance: (operation, sessionId) =>
          Effect.fail(new AgentBusyError({ operation, sessionId, reason: "maintenance", detail: "read-only agent" }))
      }))
    )
    const workdir = tempDir("swapped-lock")
    const agent = LiteAgent.layerWithoutDependencies().pipe(
      Layer.provide(Layer.mergeAll(refusing, FileTools.layer(), TimeTravel.layer)),
      Layer.provideMerge(Workspace.layer(workdir)),
      Layer.provide(Layer.merge(MemoryCheckpointer.layer, scriptedLayer([{ text: "hello" }])))
    )
    return Effect.gen(function*() {
      const liteAgent = yield* LiteAgent.LiteAgent
      const result = yield* liteAgent.send("hi")
      expect(result.text).toBe("hello")
      const refused = yield* Effect.exit(liteAgent.deleteSession(result.sessionId))
      expect(String(Exit.isFailure(refused) && refused.cause)).toContain("read-only agent")
      expect((yield* liteAgent.listCheckpoints(result.sessionId)).length).toBe(1)
    }).pipe(Effect.provide(agent))
  })
})
