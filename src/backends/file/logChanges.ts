/**
 * Changes to followed logs, seen by looking at their status: one timer per checkpointer stats
 * every followed session's log (one `stat` each, no open, no read) and signals only the
 * sessions whose log changed — a new size, modification time or inode (an append grows the
 * file; a truncate or a delete replaces or removes it). This is the follower's safety net for
 * file-system events that are lost or never come (network file systems), at a cost of a few
 * microseconds per followed session per look, instead of every follower reading its log's
 * tail on every poll.
 */
import { Effect, type Scope } from "effect"
import { makeKeyedSignals } from "../../core/internal/keyedSignals.js"
import { statusOf } from "./LogFiles.js"

/** A log's status (LogFiles' `statusOf`); a stat that fails is a status too: the next look tells. */
const lookAt = (path: string): string | undefined => {
  try {
    return statusOf(path)
  } catch (error) {
    return `unreadable: ${String(error)}`
  }
}

export const makeLogChanges = (logPath: (sessionId: string) => string, everyMs: number) => {
  const signals = makeKeyedSignals()
  /** Each followed log's status at the last look. */
  const seen = new Map<string, string | undefined>()
  let timer: ReturnType<typeof setInterval> | undefined

  const look = () => {
    for (const sessionId of signals.keys()) {
      const now = lookAt(logPath(sessionId))
      if (seen.has(sessionId) && seen.get(sessionId) === now) continue
      // The first look at a log only notes its status: the follower reads it as it starts.
      const first = !seen.has(sessionId)
      seen.set(sessionId, now)
      if (!first) signals.signal(sessionId)
    }
    if (seen.size > signals.size()) for (const sessionId of seen.keys()) if (!signals.has(sessionId)) seen.delete(sessionId)
    if (signals.size() === 0 && timer !== undefined) {
      clearInterval(timer)
      timer = undefined
    }
  }

  /** No one follows any more: no timer is left behind (not even an unref'd one, which a startup snapshot would carry). */
  const stopWhenUnfollowed = () => {
    if (signals.size() > 0 || timer === undefined) return
    clearInterval(timer)
    timer = undefined
    seen.clear()
  }

  /** Call `onChange` each time `sessionId`'s log is seen changed, for as long as the scope lasts. */
  const subscribe = (sessionId: string, onChange: () => void): Effect.Effect<void, never, Scope.Scope> =>
    Effect.zipRight(
      // Added before the subscription, so it runs after the subscription's own release.
      Effect.addFinalizer(() => Effect.sync(stopWhenUnfollowed)),
      Effect.tap(signals.subscribe(sessionId, onChange), () =>
        Effect.sync(() => {
          if (!seen.has(sessionId)) seen.set(sessionId, lookAt(logPath(sessionId)))
          if (timer !== undefined) return
          timer = setInterval(look, everyMs)
          // Following must not keep the process alive.
          timer.unref()
        }))
    )

  return { subscribe }
}
