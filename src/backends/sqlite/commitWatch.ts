/**
 * Followers' wake-ups for other connections' commits (another process, or another checkpointer
 * on the file), keyed by session. `PRAGMA data_version` moves when another connection commits;
 * one poller per checkpointer reads it while anyone follows, and when it moved, reads the
 * version of each followed session (one indexed row each, microseconds) and wakes the followers
 * of those that changed only. A commit so costs a look for its own session's followers, not for
 * every follower of the database.
 *
 * A session's first check after someone subscribes to it always wakes them (nothing to compare
 * with yet), and so does every check of a session that does not exist: "absent" is the one
 * version that can come back (created, then deleted between two checks), so it proves nothing.
 */
import { Duration, Effect, RcRef, type Scope, Stream } from "effect"
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
}

export const makeCommitWatch = (
  options: CommitWatchOptions
): Effect.Effect<(sessionId: string) => Stream.Stream<unknown>, never, Scope.Scope> =>
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
    // Polls while anyone follows. A failed check (the database busy past its timeout, an I/O
    // error) is tried again at the next tick: `lastDataVersion` only moves once the check ran.
    const poller = yield* RcRef.make({
      acquire: Effect.gen(function*() {
        lastDataVersion = yield* Effect.orElseSucceed(options.read("watch", options.dataVersion), () => -1)
        yield* Effect.forkScoped(
          Effect.forever(
            Effect.zipRight(Effect.sleep(Duration.millis(options.pollMs)), Effect.ignore(options.read("watch", check)))
          )
        )
      })
    })
    return (sessionId: string): Stream.Stream<unknown> =>
      Stream.unwrapScoped(
        Effect.zipRight(
          RcRef.get(poller),
          Effect.tap(signals.subscribe(sessionId), () => Effect.sync(() => seen.delete(sessionId)))
        )
      )
  })
