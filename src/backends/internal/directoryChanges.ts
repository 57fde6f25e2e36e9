/**
 * "Something changed in this directory": the wake-up signal for lock waiters. A process that
 * releases a lock changes a file beside it (the file backend removes the lock file), and the
 * kernel tells every watcher at once — across processes, containers and namespaces that share
 * the directory. A waiter woken this way tries the lock at once instead of at the end of its
 * back-off pause.
 *
 * One `fs.watch` per directory and holder, started at the first wait and kept until the scope
 * closes. Where the file system sends no events (some network file systems) or watching fails,
 * `next` never fires and waiters fall back to their timers: the signal only ever speeds a wait up.
 */
import * as fs from "node:fs"
import { Effect, type Scope } from "effect"

export interface DirectoryChanges {
  /** Succeeds at the next change to an entry of the directory whose name passes `matches` (any entry without it). */
  readonly next: (matches?: (name: string) => boolean) => Effect.Effect<void>
}

export const watchDirectory = (directory: string): Effect.Effect<DirectoryChanges, never, Scope.Scope> =>
  Effect.gen(function*() {
    const listeners = new Set<(name: string | undefined) => void>()
    let watcher: fs.FSWatcher | undefined
    let failed = false
    const start = () => {
      if (watcher !== undefined || failed) return
      try {
        // Not persistent: a waiter must never be what keeps a process alive.
        watcher = fs.watch(directory, { persistent: false }, (_event, name) => {
          for (const listener of [...listeners]) listener(name ?? undefined)
        })
        watcher.on("error", () => {
          watcher?.close()
          watcher = undefined
          failed = true
        })
      } catch {
        failed = true
      }
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        watcher?.close()
        watcher = undefined
        listeners.clear()
      })
    )
    const next = (matches?: (name: string) => boolean): Effect.Effect<void> =>
      Effect.async<void>((resume) => {
        start()
        const listener = (name: string | undefined) => {
          // A change without a name may be ours: wake anyway.
          if (matches !== undefined && name !== undefined && !matches(name)) return
          listeners.delete(listener)
          resume(Effect.void)
        }
        listeners.add(listener)
        return Effect.sync(() => void listeners.delete(listener))
      })
    return { next }
  })
