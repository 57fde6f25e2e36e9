/**
 * Changes to followed logs, seen by looking at their status: one timer per checkpointer stats
 * every followed session's log (one `stat` each, no open, no read) and signals only the
 * sessions whose log changed — a new size, modification time or inode (an append grows the
 * file; a truncate or a delete replaces or removes it). This is the follower's safety net for
 * file-system events that are lost or never come (network file systems), at a cost of a few
 * microseconds per followed session per look, instead of every follower reading its log's
 * tail on every poll.
 */
import * as fs from "node:fs"
import { Effect, Stream } from "effect"

interface Followed {
  last: string | undefined
  readonly listeners: Set<() => void>
}

/** What a log's status says of its content: equal strings, no commit in between (but for a full look now and then). */
const statusOf = (path: string): string | undefined => {
  try {
    const stat = fs.statSync(path, { bigint: true, throwIfNoEntry: false })
    return stat === undefined ? undefined : `${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}:${stat.ino}`
  } catch (error) {
    // Not a change anyone could read: the next look tells.
    return `unreadable: ${String(error)}`
  }
}

export const makeLogChanges = (logPath: (sessionId: string) => string, everyMs: number) => {
  const followed = new Map<string, Followed>()
  let timer: ReturnType<typeof setInterval> | undefined

  const look = () => {
    for (const [sessionId, entry] of followed) {
      const now = statusOf(logPath(sessionId))
      if (now === entry.last) continue
      entry.last = now
      for (const listener of entry.listeners) listener()
    }
  }

  const add = (sessionId: string, listener: () => void) => {
    let entry = followed.get(sessionId)
    if (entry === undefined) {
      entry = { last: statusOf(logPath(sessionId)), listeners: new Set() }
      followed.set(sessionId, entry)
    }
    entry.listeners.add(listener)
    if (timer === undefined) {
      timer = setInterval(look, everyMs)
      // Following must not keep the process alive.
      timer.unref()
    }
    return entry
  }

  const remove = (sessionId: string, entry: Followed, listener: () => void) => {
    entry.listeners.delete(listener)
    if (entry.listeners.size === 0) followed.delete(sessionId)
    if (followed.size === 0 && timer !== undefined) {
      clearInterval(timer)
      timer = undefined
    }
  }

  /** A signal each time `sessionId`'s log is seen changed, for as long as the stream is read. */
  const changes = (sessionId: string): Stream.Stream<void> =>
    Stream.asyncPush<void>((emit) => {
      const listener = () => void emit.single(undefined)
      return Effect.acquireRelease(
        Effect.sync(() => add(sessionId, listener)),
        (entry) => Effect.sync(() => remove(sessionId, entry, listener))
      )
    }, { bufferSize: 1, strategy: "sliding" })

  return { changes }
}
