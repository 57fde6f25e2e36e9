/**
 * Followers' wake-ups for other connections' commits (another process, or another checkpointer
 * on the file), keyed by session. `PRAGMA data_version` moves when another connection commits;
 * one poller per checkpointer reads it while anyone follows, and when it moved, reads the
 * version of each followed session (one indexed row each, microseconds) and wakes the followers
 * of those that changed only. A commit so costs a look for its own session's followers, not for
 * every follower of the database.
 *
 * Besides the poll, `hints` (when given) says another connection may have just committed — a
 * write to the WAL, seen by the kernel's file events — so a commit wakes its followers within a
 * moment instead of at the next tick. The poll stays: hints only ever speed a wake-up up.
 *
 * A session's first check after someone subscribes to it always wakes them (nothing to compare
 * with yet), and so does every check of a session that does not exist: "absent" is the one
 * version that can come back (created, then deleted between two checks), so it proves nothing.
 */
import * as fs from "node:fs"
import { basename, dirname } from "node:path"
import { Duration, Effect, Queue, RcRef, type Scope } from "effect"
import type { CheckpointerError } from "../../core/errors.js"
import { makeKeyedSignals } from "../../core/internal/keyedSignals.js"

export interface CommitWatchOptions {
  /** `PRAGMA data_version` of this connection. */
  readonly dataVersion: () => number
  /** The session's version as a string, or undefined when it does not exist. */
  readonly versionOf: (sessionId: string) => string | undefined
  /** Run a synchronous read on the connection (outside any transaction it has open). */
  readonly read: <A>(operation: string, run: () => A) => Effect.Effect<A, CheckpointerError>
  readonly pollMs: number
  /** Calls `onHint` when another connection may have committed, for as long as the scope lasts. */
  readonly hints?: (onHint: () => void) => Effect.Effect<void, never, Scope.Scope>
}

/**
 * A WAL write comes a moment before its commit is visible (the WAL index is updated after the
 * write): a hint is checked at once and once more this much later.
 */
const HINT_RECHECK_MS = 2

export const makeCommitWatch = (
  options: CommitWatchOptions
): Effect.Effect<(sessionId: string, onChange: () => void) => Effect.Effect<void, never, Scope.Scope>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const signals = makeKeyedSignals()
    /** The version each followed session had at the last check; none yet: wake its followers at the next. */
    const seen = new Map<string, string | undefined>()
    let lastDataVersion = -1
    const check = () => {
      const current = options.dataVersion()
      if (current === lastDataVersion) return
      for (const sessionId of signals.keys()) {
        const version = options.versionOf(sessionId)
        if (version !== undefined && seen.has(sessionId) && seen.get(sessionId) === version) continue
        seen.set(sessionId, version)
        signals.signal(sessionId)
      }
      if (seen.size > signals.size()) {
        for (const sessionId of seen.keys()) if (!signals.has(sessionId)) seen.delete(sessionId)
      }
      lastDataVersion = current
    }
    // Checks while anyone follows: at each tick, and at each hint. A failed check (the database
    // busy past its timeout, an I/O error) is tried again at the next: `lastDataVersion` only
    // moves once the check ran.
    const poller = yield* RcRef.make({
      acquire: Effect.gen(function*() {
        lastDataVersion = yield* Effect.orElseSucceed(options.read("watch", options.dataVersion), () => -1)
        // At most one pending check: many reasons to look before it runs are one look.
        const due = yield* Queue.sliding<void>(1)
        const checkSoon = () => void due.unsafeOffer(undefined)
        yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Queue.take(due), Effect.ignore(options.read("watch", check)))))
        yield* Effect.forkScoped(Effect.forever(Effect.zipRight(Effect.sleep(Duration.millis(options.pollMs)), Effect.sync(checkSoon))))
        if (options.hints !== undefined) {
          let recheckPending = false
          const recheck = () => {
            recheckPending = false
            checkSoon()
          }
          yield* options.hints(() => {
            checkSoon()
            if (recheckPending) return
            recheckPending = true
            setTimeout(recheck, HINT_RECHECK_MS).unref()
          })
        }
      })
    })
    return (sessionId: string, onChange: () => void): Effect.Effect<void, never, Scope.Scope> =>
      Effect.zipRight(
        RcRef.get(poller),
        Effect.tap(signals.subscribe(sessionId, onChange), () => Effect.sync(() => seen.delete(sessionId)))
      )
  })

/**
 * Hints from the kernel's file events: a write to `file`'s WAL (or to `file` itself). Where the
 * file system sends no events, or watching fails, there are none, and the poll alone wakes.
 */
export const fileWrites = (file: string) => (onHint: () => void): Effect.Effect<void, never, Scope.Scope> =>
  Effect.asVoid(Effect.acquireRelease(
    Effect.sync(() => {
      const names = new Set([basename(file), `${basename(file)}-wal`])
      try {
        // Not persistent: following must not keep the process alive.
        const watcher = fs.watch(dirname(file), { persistent: false }, (_event, name) => {
          if (name === null || names.has(name)) onHint()
        })
        watcher.on("error", () => watcher.close())
        return watcher
      } catch {
        return undefined
      }
    }),
    (watcher) => Effect.sync(() => watcher?.close())
  ))
