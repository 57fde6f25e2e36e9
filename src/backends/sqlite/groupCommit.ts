/**
 * Write transactions on one synchronous connection, shared by the mutations waiting for them
 * (group commit), and the connection's other statements kept out of them.
 *
 * A mutation queues its body. The caller that finds no transaction under way leads: it begins
 * a transaction (waiting asynchronously while another process holds the lock) and runs every
 * queued body in it in turn, then commits once and hands each mutation its own outcome, and goes
 * on until nothing waits. A body that fails undoes only itself: one that wrote nothing needs no
 * undoing, and one that did rolls the transaction back and the bodies before it run again in
 * the next. A mutation arriving alone runs alone, in its caller's fiber; under contention, the
 * ones that queued while the lock was held share one lock round and one commit.
 *
 * Nothing is reported before the commit that makes it durable: a failed commit fails every body
 * that had succeeded in that transaction. A mutation still queued when its caller is interrupted
 * never runs; one whose body already ran commits with its transaction. A leader interrupted
 * while it waits for the lock hands the queue to a fiber of the connection's scope.
 *
 * Other statements on the connection (reads) go through `statement`, which runs them only while
 * no transaction is open — checked in the same synchronous step that runs them — so they never
 * see writes that may yet roll back.
 */
import { Cause, Effect, Either, Exit, type Scope } from "effect"
import { CheckpointBusyError, type CheckpointerError, StorageError } from "../../core/errors.js"
import { Busy, retryWhileBusy } from "../internal/busy.js"
import { monotonicNow } from "../internal/monotonic.js"

/** Bodies run in one transaction at most: bounds how long one transaction keeps the event loop. */
const MAX_BATCH = 256
/** How long mutations keep gathering after the lock was last found held, and after two last overlapped. */
const CONTENDED_MS = 100

/** One turn of the event loop: what the program issued meanwhile (other appends) gets to run first. */
const nextTurn = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

export interface GroupCommitOptions {
  /** How long a mutation waits for another process's lock before `CheckpointBusyError`. */
  readonly busyTimeoutMs: number
  readonly maxPauseMs: number
  /** What a statement threw, as the library's error: `Busy` while another connection holds a lock. */
  readonly failure: (operation: string, error: unknown) => CheckpointerError | Busy
  /** Begin a write transaction (throws busy while another connection holds the write lock). */
  readonly begin: () => void
  /** How many times a body has begun writing so far: a body that failed after it did must not commit. */
  readonly writes: () => number
  readonly commit: () => void
  /** Roll the open transaction back, if one is open. */
  readonly rollback: () => void
}

export interface GroupCommit {
  /** Run `body` inside a write transaction, and succeed with its value once that transaction has committed. */
  readonly run: <A>(sessionId: string | undefined, body: Effect.Effect<A, CheckpointerError>) => Effect.Effect<A, CheckpointerError>
  /** Run synchronous statements outside any write transaction (waiting for an open one to end). */
  readonly statement: <A>(operation: string, run: () => A) => Effect.Effect<A, CheckpointerError | Busy>
  /** Succeeds once no write transaction is open. */
  readonly idle: Effect.Effect<void>
}

/** A mutation's outcome, handed over by whichever fiber ran it (no Deferred: they are costly to make on a hot path). */
class Outcome<A> {
  private exit: Exit.Exit<A, CheckpointerError> | undefined
  private resume: ((exit: Exit.Exit<A, CheckpointerError>) => void) | undefined
  settle(exit: Exit.Exit<A, CheckpointerError>) {
    if (this.resume === undefined) this.exit = exit
    else this.resume(exit)
  }
  /** The outcome, once settled; `onInterrupt` runs if the waiter is interrupted first. */
  wait(onInterrupt: Effect.Effect<void>): Effect.Effect<A, CheckpointerError> {
    return Effect.suspend(() =>
      this.exit ??
        Effect.async<A, CheckpointerError>((resume) => {
          this.resume = resume
          return onInterrupt
        })
    )
  }
}

interface Request {
  readonly sessionId: string | undefined
  /** When it was queued (`monotonicNow()`). */
  readonly arrived: number
  /** The caller's body; its value settles the caller's outcome, once committed. */
  readonly body: Effect.Effect<() => void, CheckpointerError>
  readonly fail: (cause: Cause.Cause<CheckpointerError>) => void
}

const SKIPPED = Symbol("a transaction is open")

export const makeGroupCommit = (options: GroupCommitOptions): Effect.Effect<GroupCommit, never, Scope.Scope> =>
  Effect.gen(function*() {
    const scope = yield* Effect.scope
    const waiting: Array<Request> = []
    let leading = false
    let transactionOpen = false
    const whenIdle: Array<() => void> = []

    const closeTransaction = () => {
      transactionOpen = false
      for (const wake of whenIdle.splice(0)) wake()
    }
    const idle: Effect.Effect<void> = Effect.suspend(() =>
      transactionOpen ? Effect.async<void>((resume) => void whenIdle.push(() => resume(Effect.void))) : Effect.void
    )

    /** Run synchronous statements; what they throw becomes the library's error. */
    const statements = <A>(operation: string, run: () => A): Effect.Effect<A, CheckpointerError | Busy> =>
      Effect.try({ try: run, catch: (error) => options.failure(operation, error) })

    const statement = <A>(operation: string, run: () => A): Effect.Effect<A, CheckpointerError | Busy> =>
      Effect.flatMap(
        statements(operation, () => (transactionOpen ? SKIPPED : run())),
        (result) => (result === SKIPPED ? Effect.zipRight(idle, statement(operation, run)) : Effect.succeed(result))
      )

    const failAll = (requests: ReadonlyArray<Request>, error: CheckpointerError) => {
      for (const request of requests) request.fail(Cause.fail(error))
    }
    const inTransaction = (operation: string, run: () => void) => Effect.mapError(statements(operation, run), asStorage)

    /**
     * Run the waiting bodies in the open transaction and commit them. No savepoint per body (two
     * statements each, inside the lock that every other writer waits for): a body that fails
     * before writing anything leaves nothing to undo, and one that fails after writing rolls the
     * whole transaction back — the bodies that had run before it go back to the head of the
     * queue, to run again in the next transaction.
     */
    const transaction = Effect.gen(function*() {
      const ran: Array<readonly [Request, () => void]> = []
      while (waiting.length > 0 && ran.length < MAX_BATCH) {
        const request = waiting.shift()!
        const writesBefore = options.writes()
        const exit = yield* Effect.exit(request.body)
        if (Exit.isSuccess(exit)) {
          ran.push([request, exit.value])
          continue
        }
        request.fail(exit.cause)
        if (options.writes() !== writesBefore) {
          options.rollback()
          waiting.unshift(...ran.map(([earlier]) => earlier))
          return
        }
      }
      if (ran.length === 0) return options.rollback()
      const committed = yield* Effect.either(inTransaction("commit", options.commit))
      if (Either.isLeft(committed)) {
        options.rollback()
        return failAll(ran.map(([request]) => request), committed.left)
      }
      for (const [, settle] of ran) settle()
    })

    /**
     * Until when the lock counts as contended: another process held it lately. Mutations then
     * gather for one turn of the event loop before a transaction begins, so that those issued
     * together share it — one cold start after another process's commit (SQLite re-reads what
     * changed) for many appends, rather than one each.
     */
    let contendedUntil = 0
    const sawBusy = () => {
      contendedUntil = monotonicNow() + CONTENDED_MS
    }
    /** Until when mutations of this process count as concurrent: one arrived while another was under way. */
    let concurrentUntil = 0
    /** Gathering only pays when the lock is contended and there are mutations to gather. */
    const gathering = () => {
      const now = monotonicNow()
      return now < contendedUntil && now < concurrentUntil
    }

    /** BEGIN; while another connection holds the lock, wait (asynchronously) and try again. */
    const begin = (timeoutMs: number, sessionId: string | undefined) =>
      retryWhileBusy(
        statements("begin", () => {
          options.begin()
          transactionOpen = true
        }).pipe(Effect.tapError((error) => (error instanceof Busy ? Effect.sync(sawBusy) : Effect.void))),
        { timeoutMs, maxPauseMs: options.maxPauseMs, sessionId }
      )

    /** One transaction for what waits now; or, when the lock stays busy, the busy error for whoever waited too long. */
    const round = Effect.gen(function*() {
      if (gathering()) yield* nextTurn
      const oldest = waiting[0]
      if (oldest === undefined) return

      const now = monotonicNow()
      const began = yield* Effect.either(begin(Math.max(0, oldest.arrived + options.busyTimeoutMs - now), oldest.sessionId))
      if (Either.isRight(began)) {
        return yield* Effect.ensuring(
          Effect.uninterruptible(transaction),
          Effect.sync(() => {
            // A failure that escaped the transaction's own handling must not leave it open.
            options.rollback()
            closeTransaction()
          })
        )
      }
      const error = began.left
      if (!(error instanceof CheckpointBusyError)) return failAll(waiting.splice(0), asStorage(error))
      const later = monotonicNow()
      // The oldest always goes (its time is up); others too once theirs is.
      const expired = waiting.filter((request, index) => index === 0 || request.arrived + options.busyTimeoutMs <= later)
      for (const request of expired) {
        waiting.splice(waiting.indexOf(request), 1)
        request.fail(Cause.fail(
          new CheckpointBusyError({
            ...(request.sessionId === undefined ? {} : { sessionId: request.sessionId }),
            waitedMs: Math.round(later - request.arrived),
            detail: error.detail
          })
        ))
      }
    })

    /** Transactions until nothing waits. */
    const lead: Effect.Effect<void> = Effect.suspend(function loop(): Effect.Effect<void> {
      // Checked and given up in one synchronous step: a request queued after this finds no leader and leads.
      if (waiting.length === 0) {
        leading = false
        return Effect.void
      }
      return Effect.flatMap(round, loop)
    })

    /** A leader interrupted while it waited for the lock hands what still waits to a leader of its own. */
    const handOver = Effect.suspend(() => {
      leading = waiting.length > 0
      return leading ? Effect.asVoid(Effect.forkIn(lead, scope)) : Effect.void
    })

    /** Queue a mutation for the leader, leading if no one does. */
    const queued = <A>(sessionId: string | undefined, body: Effect.Effect<A, CheckpointerError>, arrived: number) => {
      const outcome = new Outcome<A>()
      const request: Request = {
        sessionId,
        arrived,
        body: Effect.map(body, (value) => () => outcome.settle(Exit.succeed(value))),
        fail: (cause) => outcome.settle(Exit.failCause(cause))
      }
      waiting.push(request)
      // A request still queued when its caller is interrupted is withdrawn; one already run commits with its transaction.
      const withdraw = Effect.sync(() => {
        const index = waiting.indexOf(request)
        if (index >= 0) waiting.splice(index, 1)
      })
      if (leading) return outcome.wait(withdraw)
      leading = true
      return Effect.onInterrupt(Effect.zipRight(lead, outcome.wait(withdraw)), () => Effect.zipRight(withdraw, handOver))
    }

    /**
     * The uncontended case, in the caller's fiber: BEGIN at once, run the body, COMMIT. (What
     * queued meanwhile is then led as usual.)
     */
    const alone = <A>(body: Effect.Effect<A, CheckpointerError>): Effect.Effect<A, CheckpointerError> =>
      Effect.flatMap(Effect.exit(body), (exit) => {
        let failed: CheckpointerError | undefined
        if (Exit.isSuccess(exit)) {
          try {
            options.commit()
          } catch (error) {
            failed = asStorage(options.failure("commit", error))
          }
        }
        // After a failed body or COMMIT: nothing of it may stay.
        if (Exit.isFailure(exit) || failed !== undefined) options.rollback()
        closeTransaction()
        return failed === undefined ? exit : Exit.fail(failed)
      })

    /** Lead on for what queued meanwhile, or stop leading. */
    const carryOn = Effect.suspend(() => {
      if (waiting.length === 0) {
        leading = false
        return Effect.void
      }
      return Effect.onInterrupt(lead, () => handOver)
    })

    const run = <A>(sessionId: string | undefined, body: Effect.Effect<A, CheckpointerError>): Effect.Effect<A, CheckpointerError> =>
      Effect.suspend(() => {
        const arrived = monotonicNow()
        if (leading || waiting.length > 0) {
          concurrentUntil = arrived + CONTENDED_MS
          return queued(sessionId, body, arrived)
        }
        if (gathering()) return queued(sessionId, body, arrived)
        let refused: CheckpointerError | Busy | undefined
        try {
          options.begin()
          transactionOpen = true
        } catch (error) {
          refused = options.failure("begin", error)
        }
        if (refused instanceof Busy) {
          sawBusy()
          return queued(sessionId, body, arrived)
        }
        if (refused !== undefined) return Effect.fail(refused)
        leading = true
        return Effect.ensuring(Effect.uninterruptible(alone(body)), carryOn)
      })

    return { run, statement, idle }
  })

/** A failure of the transaction's own statements, as the library reports it (busy cannot last inside one). */
const asStorage = (error: CheckpointerError | Busy): CheckpointerError =>
  error instanceof Busy ? new StorageError({ operation: "write", detail: error.detail }) : error
