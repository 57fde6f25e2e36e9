/**
 * Read handles kept open, one per recently read log: a follower's look at a log that grew reads
 * it through the handle it already has instead of opening the file again — an open is a scope,
 * and scopes are the costliest part of a look. A handle is kept while its path names the same
 * file (its identity, from the status the caller just took); one whose file was replaced (a
 * rewrite) or deleted, or the least recently used beyond `capacity`, is closed as soon as no
 * read is using it.
 */
import { Effect, Exit, Scope } from "effect"
import type { StorageError } from "../../core/errors.js"
import { identityOfStatus, type LogFilesService, type LogHandle } from "./LogFiles.js"

interface Kept {
  readonly identity: string
  readonly file: LogHandle
  readonly scope: Scope.CloseableScope
  /** Reads using the handle now. */
  users: number
  /** No longer kept: closed when its last user is done. */
  retired: boolean
}

export const makeReadHandles = (files: LogFilesService, capacity: number) => {
  /** By path, least recently used first. */
  const kept = new Map<string, Kept>()

  const retire = (path: string, handle: Kept): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (kept.get(path) === handle) kept.delete(path)
      handle.retired = true
      return handle.users === 0 ? Scope.close(handle.scope, Exit.void) : Effect.void
    })

  const evictBeyondCapacity = Effect.suspend(() => {
    const idle: Array<[string, Kept]> = []
    let excess = kept.size - capacity
    for (const entry of kept) {
      if (excess <= 0) break
      if (entry[1].users === 0) {
        idle.push(entry)
        excess--
      }
    }
    return Effect.forEach(idle, ([path, handle]) => retire(path, handle), { discard: true })
  })

  const open = (path: string): Effect.Effect<Kept | undefined, StorageError> =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const closing = () => Scope.close(scope, Exit.void)
      const file = yield* Effect.onError(Scope.extend(files.open(path, "read"), scope), closing)
      if (file === undefined) {
        yield* closing()
        return undefined
      }
      const identity = yield* Effect.onError(file.identity, closing)
      // Another read may have opened the same path meanwhile: the newest is kept.
      const other = kept.get(path)
      if (other !== undefined) yield* retire(path, other)
      const handle: Kept = { identity, file, scope, users: 1, retired: false }
      kept.set(path, handle)
      yield* evictBeyondCapacity
      return handle
    })

  const acquire = (path: string, status: string | undefined): Effect.Effect<Kept | undefined, StorageError> =>
    Effect.suspend(() => {
      const current = kept.get(path)
      if (current !== undefined && status !== undefined && current.identity === identityOfStatus(status)) {
        current.users++
        // Now the most recently used.
        kept.delete(path)
        kept.set(path, current)
        return Effect.succeed(current)
      }
      const retiring = current === undefined ? Effect.void : retire(path, current)
      return Effect.zipRight(retiring, status === undefined ? Effect.succeed(undefined) : open(path))
    })

  const release = (handle: Kept | undefined): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (handle === undefined) return Effect.void
      handle.users--
      return handle.retired && handle.users === 0 ? Scope.close(handle.scope, Exit.void) : Effect.void
    })

  return {
    /**
     * Run `use` with a read handle on the file at `path`, whose status (`LogFilesService.status`)
     * the caller has just taken: `undefined` when nothing is there. The handle may name a newer
     * file than the status if the path changed in between.
     */
    withHandle: <A, E>(path: string, status: string | undefined, use: (file: LogHandle | undefined) => Effect.Effect<A, E>) =>
      Effect.acquireUseRelease(acquire(path, status), (handle) => use(handle?.file), release),
    /** Stop keeping `path`'s handle (its session was deleted). */
    forget: (path: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        const handle = kept.get(path)
        return handle === undefined ? Effect.void : retire(path, handle)
      }),
    closeAll: Effect.suspend(() => Effect.forEach([...kept], ([path, handle]) => retire(path, handle), { discard: true }))
  }
}
