/**
 * Logs kept open between mutations, with what this process knows of them (committed head and
 * end), so a session's next mutation neither reopens its log nor reads its tail again.
 *
 * Only touched under the session's lock; a log in use is out of the cache. A kept log is reused
 * only while its path still names it and its size is still its committed end: a log only grows
 * in place (other processes' appends), and every rewrite is a new file renamed over it, so the
 * bytes up to that end, and what was read from them, are as they were. A log handed over with
 * the lock by its last holder in this process is reused without that look.
 */
import { Effect, Exit, Scope } from "effect"
import type { CheckpointerError } from "../../core/errors.js"
import type { LogFilesService, LogHandle } from "./LogFiles.js"

/** A log kept open by this process, and what it knows of it. */
export interface OpenLog {
  readonly scope: Scope.CloseableScope
  readonly file: LogHandle
  /** The file's identity when opened (see `LogFiles.identify`). */
  readonly identity: string
  readonly headerEnd: number
  /** The generation its header names (a rewrite is a new file: it never changes for this one). */
  readonly generation: string
  /** The file's size as last seen or written here; a torn tail makes it larger than `committedEnd`. */
  size: number
  head: number
  committedEnd: number
  /** False while (or once) the file may not be as described: a write under way or failed, or the file replaced. */
  reusable: boolean
}

/** What reading an open log's header and tail tells. */
export type LogTail = Pick<OpenLog, "headerEnd" | "generation" | "size" | "head" | "committedEnd">

/** Logs kept open; beyond this many, the least recently used are closed. */
const OPEN_LOGS = 16

export interface OpenLogsSettings {
  readonly files: LogFilesService
  readonly logPath: (sessionId: string) => string
  /** Header, committed head and end of an open log. */
  readonly readTail: (sessionId: string, file: LogHandle) => Effect.Effect<LogTail, CheckpointerError>
}

/** The cache of open logs; those still kept are closed with the scope. */
export const makeOpenLogs = ({ files, logPath, readTail }: OpenLogsSettings) =>
  Effect.gen(function*() {
    /** Least recently used first: the map keeps insertion order. */
    const kept = new Map<string, OpenLog>()
    let closing = false
    const close = (log: OpenLog) => Scope.close(log.scope, Exit.void)
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        closing = true
        const logs = [...kept.values()]
        kept.clear()
        return Effect.forEach(logs, close, { discard: true })
      })
    )

    const openFresh = (sessionId: string): Effect.Effect<OpenLog | undefined, CheckpointerError> =>
      Effect.flatMap(Scope.make(), (scope) =>
        Effect.gen(function*() {
          const file = yield* Scope.extend(files.open(logPath(sessionId), "update"), scope)
          if (file === undefined) {
            yield* Scope.close(scope, Exit.void)
            return undefined
          }
          const identity = yield* file.identity
          const tail = yield* readTail(sessionId, file)
          const log: OpenLog = { scope, file, identity, ...tail, reusable: true }
          return log
        }).pipe(Effect.onError(() => Scope.close(scope, Exit.void))))

    /**
     * The session's log, open, with its committed head and end, out of the cache until `keep`;
     * `undefined` when the session has none. `handedOver` is what the lock's last holder left.
     */
    const take = (sessionId: string, handedOver: OpenLog | undefined): Effect.Effect<OpenLog | undefined, CheckpointerError> =>
      Effect.suspend(() => {
        const log = kept.get(sessionId)
        if (log === undefined) return openFresh(sessionId)
        kept.delete(sessionId)
        // Handed over with the lock by its last holder: no one else can have written since.
        if (log === handedOver) return Effect.succeed(log)
        return Effect.zip(files.identify(logPath(sessionId)), log.file.size).pipe(
          Effect.onError(() => close(log)),
          Effect.flatMap(([identity, size]) =>
            identity === log.identity && size === log.committedEnd
              ? Effect.succeed(log)
              : Effect.zipRight(close(log), openFresh(sessionId))
          )
        )
      })

    /**
     * Keep a log open for the session's next mutation (closing the least recently used beyond
     * `OPEN_LOGS`), or close it. `handOn` is told of a log kept, to leave it to the lock's next holder.
     */
    const keep = (sessionId: string, log: OpenLog, handOn: (log: OpenLog) => void) =>
      Effect.suspend(() => {
        if (!log.reusable || closing) return close(log)
        handOn(log)
        kept.set(sessionId, log)
        return kept.size <= OPEN_LOGS ? Effect.void : forget(kept.keys().next().value!)
      })

    /** Close the log kept open for `sessionId`, if one is. */
    const forget = (sessionId: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const log = kept.get(sessionId)
        if (log === undefined) return Effect.void
        kept.delete(sessionId)
        return close(log)
      })

    return { take, keep, forget }
  })
