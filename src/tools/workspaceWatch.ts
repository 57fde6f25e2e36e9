/**
 * What changed under the workdir since the last capture, from the file system's own change
 * notifications (inotify on Linux, through one `fs.watch` per covered directory): the paths
 * worth a look, so that a capture stats those instead of walking the whole tree.
 *
 * A capture first settles the watcher: it creates a marker file in the workdir and waits for
 * its notification — notifications arrive in order, so every change made before the capture
 * began has then been reported. Anything the watcher cannot vouch for (a directory it could not
 * watch, a notification without a name, the marker not reported in time, too many changes) makes
 * the next capture a full walk, which remains the reference.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { fsPath, nameOf } from "./directoryHandles.js"

/** More changed paths than this between two captures: a full walk is as cheap and surer. */
const MAX_DIRTY = 20_000
/** How long a settle waits for its marker's notification before falling back to a full walk. */
const SETTLE_TIMEOUT_MS = 2_000

export interface Changed {
  /** True when the watcher cannot say what changed: walk the whole workdir. */
  readonly full: boolean
  /** Workdir-relative paths that may have changed (an entry of a watched directory, or the directory itself). */
  readonly paths: ReadonlySet<string>
}

export interface WorkspaceWatcher {
  /** Watch these directories (workdir-relative, "" for the workdir) from now on. */
  readonly watch: (directories: Iterable<string>) => void
  /** Stop watching these directories (gone, or ignored now). */
  readonly unwatch: (directories: Iterable<string>) => void
  /** Every directory watched now. */
  readonly watched: () => ReadonlySet<string>
  /** Whether `directory` is watched as the directory with this inode (one removed and made again is not). */
  readonly watching: (directory: string, ino: number) => boolean
  /** Wait until every change made before this call was reported, then take what changed since the last take. */
  readonly settle: () => Promise<Changed>
  /** Start over: the next settle says `full` (after a full walk, call `watch` again). */
  readonly reset: () => void
  readonly close: () => void
}

export const makeWatcher = (root: string): WorkspaceWatcher => {
  const watchers = new Map<string, { readonly watcher: fs.FSWatcher; readonly ino: number }>()
  let dirty = new Set<string>()
  let full = true
  const markers = new Map<string, () => void>()

  const note = (directory: string, name: string | null) => {
    if (name === null) {
      full = true
      return
    }
    if (directory === "" && markers.has(name)) {
      markers.get(name)!()
      markers.delete(name)
      return
    }
    if (/^\.lite-agent-[0-9a-f]{12}\.tmp$/.test(name)) return
    if (dirty.size >= MAX_DIRTY) {
      full = true
      return
    }
    dirty.add(directory === "" ? name : `${directory}/${name}`)
    if (directory === "") return
    dirty.add(directory)
    // A notification about the watched directory itself (removed, moved) carries its own name.
    // Its watcher may now watch nothing (and its inode number be reused by a new directory made
    // there): stop it, so that the next look walks the directory and watches it afresh.
    if (name === directory.slice(directory.lastIndexOf("/") + 1)) {
      watchers.get(directory)?.watcher.close()
      watchers.delete(directory)
    }
  }

  const watch = (directories: Iterable<string>) => {
    for (const directory of directories) {
      if (watchers.has(directory)) continue
      const absolute = directory === "" ? root : `${root}/${directory}`
      try {
        // Names as bytes: one that is not UTF-8 would otherwise come with U+FFFD in it.
        const watcher = fs.watch(fsPath(absolute), { persistent: false, encoding: "buffer" }, (_, name) => note(directory, name === null ? null : nameOf(name)))
        watcher.on("error", () => {
          full = true
          watchers.get(directory)?.watcher.close()
          watchers.delete(directory)
        })
        // The inode it watches: a directory removed and made again under the same name is another one.
        watchers.set(directory, { watcher, ino: fs.lstatSync(fsPath(absolute)).ino })
      } catch {
        // Gone already, or out of watches (ENOSPC): only a full walk can tell what changed.
        full = true
      }
    }
  }

  const unwatch = (directories: Iterable<string>) => {
    for (const directory of directories) {
      watchers.get(directory)?.watcher.close()
      watchers.delete(directory)
    }
  }

  const take = (): Changed => {
    const changed = { full, paths: dirty }
    dirty = new Set()
    full = false
    return changed
  }

  const settle = () =>
    new Promise<Changed>((resolve) => {
      if (!watchers.has("")) {
        full = true
        resolve(take())
        return
      }
      const name = `.lite-agent-${randomBytes(6).toString("hex")}.tmp`
      const timer = setTimeout(() => {
        markers.delete(name)
        full = true
        resolve(take())
      }, SETTLE_TIMEOUT_MS)
      markers.set(name, () => {
        clearTimeout(timer)
        resolve(take())
      })
      try {
        fs.writeFileSync(`${root}/${name}`, "", { flag: "wx" })
        fs.rmSync(`${root}/${name}`, { force: true })
      } catch {
        clearTimeout(timer)
        markers.delete(name)
        full = true
        resolve(take())
      }
    })

  return {
    watch,
    unwatch,
    watched: () => new Set(watchers.keys()),
    watching: (directory, ino) => watchers.get(directory)?.ino === ino,
    settle,
    reset: () => {
      full = true
      dirty = new Set()
    },
    close: () => {
      for (const { watcher } of watchers.values()) watcher.close()
      watchers.clear()
    }
  }
}
