/**
 * Statements on connections of their own: one statement at a time (`query`, and `write`, which
 * is tried again after a deadlock), or a body in one READ COMMITTED transaction whose lock waits
 * are bounded in the server (`lock_timeout`) and reported as `CheckpointBusyError` (`transaction`).
 */
import type { PgClient } from "@effect/sql-pg"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Exit } from "effect"
import { CheckpointBusyError, type CheckpointerError, StorageError } from "../../core/errors.js"
import { Busy, retryWhileBusy } from "../internal/busy.js"
import { pgErrorOf, toCheckpointerError } from "./pgErrors.js"

export type Execute = (statement: string, params: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>, SqlError>

export type Query = <Row>(
  operation: string,
  statement: string,
  params: ReadonlyArray<unknown>
) => Effect.Effect<ReadonlyArray<Row>, CheckpointerError>

/** What a transaction's body returns: its value, and whether it wrote anything (else it rolls back). */
export interface Outcome<A> {
  readonly value: A
  readonly wrote: boolean
}

export type TransactionBody<A> = (execute: Execute) => Effect.Effect<Outcome<A>, CheckpointerError | SqlError | Busy>

export const rowsOf = <Row>(rows: ReadonlyArray<unknown>) => rows as ReadonlyArray<Row>

const LOCK_NOT_AVAILABLE = "55P03"
/**
 * A serialization failure cannot happen with the row lock held; a deadlock can, between writers
 * of different sessions storing and touching the same objects in crossing orders. The server
 * rolls one back; a retry is the right answer.
 */
const RETRYABLE = new Set(["40001", "40P01"])

/**
 * The server's failure a body reported as a `StorageError` (the driver hands `make` only
 * `CheckpointerError`s), when it is one the transaction answers itself: a lock wait that timed
 * out, or a deadlock.
 */
const lockFailureOf = (error: unknown): SqlError | undefined => {
  if (!(error instanceof StorageError) || !(error.cause instanceof SqlError)) return undefined
  const { code } = pgErrorOf(error.cause)
  return code !== undefined && (code === LOCK_NOT_AVAILABLE || RETRYABLE.has(code)) ? error.cause : undefined
}

export const makeTransactions = (client: PgClient.PgClient, busyTimeoutMs: number) => {
  /** Locks are waited for in the server; 0 there would mean "forever". */
  const lockTimeoutMs = Math.max(1, Math.round(busyTimeoutMs))

  /** One statement on a pooled connection of its own (never an application's transaction). */
  const query: Query = <Row>(operation: string, statement: string, params: ReadonlyArray<unknown>) =>
    Effect.scoped(Effect.flatMap(client.reserve, (connection) => connection.execute(statement, params, undefined))).pipe(
      Effect.map(rowsOf<Row>),
      Effect.mapError(toCheckpointerError(operation))
    )

  /**
   * One statement that takes row locks, on a pooled connection of its own (committed when it
   * returns): tried again when the server rolled it back out of a deadlock, for up to
   * `busyTimeoutMs`. Its lock waits are not bounded: the locks it waits for are held by single
   * statements or by session transactions, which are.
   */
  const write: Query = <Row>(operation: string, statement: string, params: ReadonlyArray<unknown>) =>
    retryWhileBusy(
      Effect.scoped(Effect.flatMap(client.reserve, (connection) => connection.execute(statement, params, undefined))).pipe(
        Effect.map(rowsOf<Row>),
        Effect.catchIf(
          (error): error is SqlError => error instanceof SqlError,
          (error): Effect.Effect<never, CheckpointerError | Busy> => {
            const { code } = pgErrorOf(error)
            return code !== undefined && RETRYABLE.has(code)
              ? Effect.fail(new Busy({ detail: `${operation}: ${code}` }))
              : Effect.fail(toCheckpointerError(operation)(error))
          }
        )
      ),
      { timeoutMs: busyTimeoutMs, maxPauseMs: 50 }
    )

  /** `body` in one transaction on `connection`: see `transaction`. */
  const inTransaction = <A>(
    connection: Connection,
    operation: string,
    body: TransactionBody<A>
  ): Effect.Effect<A, CheckpointerError | SqlError | Busy> => {
    const execute: Execute = (statement, params) => connection.execute(statement, params, undefined)
    const finish = (exit: Exit.Exit<Outcome<A>, CheckpointerError | SqlError | Busy>): Effect.Effect<A, CheckpointerError | SqlError | Busy> =>
      Exit.isSuccess(exit) && exit.value.wrote
        ? Effect.as(
          Effect.mapError(
            execute("COMMIT", []),
            (error) =>
              new StorageError({
                operation,
                detail: `COMMIT failed, so whether it took effect is unknown (re-read the head): ${pgErrorOf(error).message}`,
                cause: error
              })
          ),
          exit.value.value
        )
        // A broken connection cannot roll back, and need not: the server drops its transaction.
        : Effect.zipRight(Effect.ignore(execute("ROLLBACK", [])), Effect.map(exit, (result) => result.value))
    return Effect.uninterruptibleMask((restore) =>
      Effect.zipRight(
        connection.executeUnprepared(
          `BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL lock_timeout = ${lockTimeoutMs}`,
          [],
          undefined
        ),
        Effect.flatMap(Effect.exit(restore(body(execute))), finish)
      )
    )
  }

  /**
   * Run `body` in one transaction on a connection of its own. It commits when `body`
   * succeeds having written something (`body` says so), and rolls back otherwise. A failed
   * COMMIT leaves the outcome unknown, and says so.
   */
  const transaction = <A>(operation: string, sessionId: string | undefined, body: TransactionBody<A>): Effect.Effect<A, CheckpointerError> =>
    retryWhileBusy(
      Effect.scoped(Effect.flatMap(client.reserve, (connection) => inTransaction(connection, operation, body))).pipe(
        Effect.catchIf(
          (error) => lockFailureOf(error) !== undefined,
          (error) => Effect.fail(lockFailureOf(error)!)
        ),
        Effect.catchIf(
          (error): error is SqlError => error instanceof SqlError,
          (error): Effect.Effect<never, CheckpointerError | Busy> => {
            const { code } = pgErrorOf(error)
            if (code === LOCK_NOT_AVAILABLE) {
              return Effect.fail(
                new CheckpointBusyError({
                  ...(sessionId === undefined ? {} : { sessionId }),
                  waitedMs: lockTimeoutMs,
                  detail: `${operation}: another writer held a lock it needed (the session's row, or an object's)`
                })
              )
            }
            if (code !== undefined && RETRYABLE.has(code)) return Effect.fail(new Busy({ detail: `${operation}: ${code}` }))
            return Effect.fail(toCheckpointerError(operation)(error))
          }
        )
      ),
      { timeoutMs: busyTimeoutMs, maxPauseMs: 50, sessionId }
    )

  return { query, transaction, write }
}
