/**
 * The stat walk under a workspace capture: every covered path under the workdir with what is
 * there — a regular file's SHA-256, size and mode; a symlink's target (never followed); a
 * directory's mode. Like git's index, a file is hashed again only when its stat data (size,
 * mtime, ctime, inode, mode) differs from when this scanner last hashed it, so a walk costs a
 * `readdir` per directory and an `lstat` per entry, plus reading what changed.
 *
 * A file whose mtime is within `RACY_WINDOW_MS` of the moment it was hashed is "racily clean"
 * (git's term): a change in the same timestamp tick would leave its stat data as it was, so it
 * is hashed again by the next walk. A file that changes while it is read (its stat data before
 * and after the read differ) is read again, and reported unavailable if it keeps changing.
 *
 * Covered: the workdir minus every `.git`, minus what `.gitignore` files ignore (the `ignore`
 * package, with git's precedence: a deeper file's rules win, and nothing under an ignored
 * directory is looked at), minus the configured patterns (gitignore syntax, relative to the
 * workdir), minus the workspace's own write temporaries.
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import ignore, { type Ignore } from "ignore"
import { errnoOf } from "../backends/internal/causes.js"
import { pathOfBytes } from "../core/pathNames.js"
import { fsPath, isWriteTemp } from "./Workspace.js"

/** What a covered path holds. `data` is set only for a file read by this walk that `keepBytes` asked for. */
export type ScannedEntry =
  | {
    readonly kind: "file"
    readonly size: number
    readonly mode: number
    readonly sha256: string
    readonly data: Uint8Array | undefined
    /** It has other hard links: a change through one of them is never reported for this path, so it is looked at every time. */
    readonly linked: boolean
  }
  | { readonly kind: "link"; readonly target: string }
  | { readonly kind: "directory"; readonly mode: number }
  | { readonly kind: "unavailable"; readonly reason: string; readonly size?: number }

export interface ScanOptions {
  /** Extra patterns to leave out, in gitignore syntax, relative to the workdir. */
  readonly ignore: ReadonlyArray<string>
  /** Called for each covered directory ("" for the workdir) right before it is listed (a watcher starts watching it there). */
  readonly beforeList?: (directory: string) => void
  /** Larger files are reported unavailable, never read. */
  readonly maxFileBytes: number
  /** Whether to keep the bytes of a file this walk reads (a state the capture will store). */
  readonly keepBytes: (path: string, sha256: string) => boolean
}

export interface ScanResult {
  /** Every covered path (workdir-relative, `/`-separated) and what it holds, in walk order. */
  readonly entries: ReadonlyMap<string, ScannedEntry>
  /** Files read and hashed by this walk (their stat data was new, changed or racily clean). */
  readonly hashedFiles: number
  readonly hashedBytes: number
  /** Paths the walk could not read (a name too long, no permission, an I/O error), each recorded `unavailable` with why. */
  readonly problems: ReadonlyArray<ReadProblem>
  /** Directories that could not be listed: what was under them is not known now. */
  readonly unlisted: ReadonlySet<string>
}

export interface ReadProblem {
  readonly path: string
  readonly detail: string
}

/** How close to its hashing a file's mtime makes it racily clean (covers coarse kernel clocks and file systems). */
export const RACY_WINDOW_MS = 2_000
/** Reads of a file that keeps changing before it is reported unavailable. */
const READ_ATTEMPTS = 3

/** A file's stat data and hash as a scanner last hashed it (and as a manifest carries them to another process). */
export interface Hashed {
  readonly ino: number
  readonly size: number
  readonly mtimeMs: number
  readonly ctimeMs: number
  readonly mode: number
  readonly sha256: string
  readonly hashedAtMs: number
}

interface IgnoreLevel {
  /** The directory of the `.gitignore`, workdir-relative ("" for the workdir). */
  readonly base: string
  readonly rules: Ignore
}

/** What a look at some paths found: the covered ones there now (a new directory with everything under it), and those gone. */
export interface PathsResult extends ScanResult {
  /** Paths looked at that hold nothing now, or nothing covered (ignored). */
  readonly gone: ReadonlySet<string>
  /**
   * Paths whose whole subtree this look saw: directories walked whole (new, or made again) and
   * paths that are no longer directories. What was known under them and is not in `entries` is gone.
   */
  readonly walked: ReadonlySet<string>
}

export interface WorkspaceScanner {
  readonly root: string
  /** Walk the workdir. Synchronous: the caller runs it where blocking is fine. */
  readonly scan: (options: ScanOptions) => ScanResult
  /**
   * Look at these paths only (what a watcher says may have changed): each is stat'ed as the walk
   * would; a directory `isListed` does not know yet is walked whole. The walk's ignore rules
   * apply (a changed `.gitignore` needs a full walk: the caller's to decide).
   */
  readonly scanPaths: (
    paths: Iterable<string>,
    options: ScanOptions & { readonly isListed: (directory: string, ino: number) => boolean }
  ) => PathsResult
  /**
   * The bytes of a covered file if it still has `sha256` (read again: a walk keeps only the
   * bytes it was asked for); undefined when it no longer does or is no longer a regular file.
   */
  readonly read: (relative: string, sha256: string) => Uint8Array | undefined
  /** Whether something (anything, even ignored) is at `relative`, without following a link on the way or at its end. */
  readonly exists: (relative: string) => boolean
  /** The stat data and hash this scanner last hashed `relative` with. */
  readonly hashedOf: (relative: string) => Hashed | undefined
  /** Take another walk's stat data and hashes (a manifest's) for paths this scanner has not hashed: the same stat data, outside the racy window, is not read again. */
  readonly prime: (known: Iterable<readonly [string, Hashed]>) => void
}

const sha256Of = (data: Uint8Array) => createHash("sha256").update(data).digest("hex")

const sameStat = (hashed: Hashed, stat: fs.Stats) =>
  hashed.ino === stat.ino && hashed.size === stat.size && hashed.mtimeMs === stat.mtimeMs &&
  hashed.ctimeMs === stat.ctimeMs && hashed.mode === (stat.mode & 0o7777)

type ReadOutcome = { readonly data: Uint8Array; readonly stat: fs.Stats } | "changed" | "gone" | "not a file"

/** Fill `buffer` from the start of the file; false when the file ends first (it shrank). */
const readWhole = (fd: number, buffer: Buffer): boolean => {
  for (let offset = 0; offset < buffer.length;) {
    const read = fs.readSync(fd, buffer, offset, buffer.length - offset, offset)
    if (read === 0) return false
    offset += read
  }
  return true
}

/** Read a regular file whole, without following a link; `changed` when it changed during the read. */
const readStable = (absolute: string, expectedIno: number | undefined): ReadOutcome => {
  let fd: number
  try {
    fd = fs.openSync(fsPath(absolute), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === "ENOENT") return "gone"
    if (code === "ELOOP") return "not a file"
    throw error
  }
  try {
    const before = fs.fstatSync(fd)
    if (!before.isFile()) return "not a file"
    if (expectedIno !== undefined && before.ino !== expectedIno) return "changed"
    const data = Buffer.allocUnsafe(before.size)
    if (!readWhole(fd, data)) return "changed"
    // One more byte than the size means it grew while being read.
    if (fs.readSync(fd, Buffer.allocUnsafe(1), 0, 1, data.length) !== 0) return "changed"
    const after = fs.fstatSync(fd)
    if (after.size !== before.size || after.mtimeMs !== before.mtimeMs || after.ctimeMs !== before.ctimeMs) return "changed"
    // Changed within the timestamp tick (kernel clocks are coarse): the stat data cannot show a
    // rewrite during the read, so a recently modified file is read again and must read the same.
    if (Date.now() - after.mtimeMs < RACY_WINDOW_MS) {
      const again = Buffer.allocUnsafe(data.length)
      if (!readWhole(fd, again) || !again.equals(data) || fs.fstatSync(fd).mtimeMs !== after.mtimeMs) return "changed"
    }
    return { data, stat: before }
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * The names in a directory as paths: read as text, and again as bytes only when a name is not
 * valid UTF-8 (Node puts U+FFFD in its place, which names no file).
 */
const namesIn = (absoluteDir: string): Array<string> => {
  const names = fs.readdirSync(fsPath(absoluteDir))
  if (!names.some((name) => name.includes("\uFFFD"))) return names
  return fs.readdirSync(fsPath(absoluteDir), { encoding: "buffer" }).map(pathOfBytes)
}

export const makeScanner = (workdir: string): WorkspaceScanner => {
  const root = fs.realpathSync(workdir)
  /** Stat data and hash of each file as this scanner last hashed it. */
  const hashes = new Map<string, Hashed>()

  const ignoreLevelOf = (base: string, absoluteDir: string): IgnoreLevel | undefined => {
    let text: string
    try {
      text = fs.readFileSync(fsPath(path.join(absoluteDir, ".gitignore")), "utf8")
    } catch {
      return undefined
    }
    return { base, rules: ignore().add(text) }
  }

  /** Git's precedence: the deepest `.gitignore` with a matching rule decides; the configured patterns win over all. */
  const isIgnored = (relative: string, isDirectory: boolean, levels: ReadonlyArray<IgnoreLevel>, configured: Ignore | undefined) => {
    if (levels.length === 0 && configured === undefined) return false
    const probe = isDirectory ? `${relative}/` : relative
    if (configured?.ignores(probe) === true) return true
    let ignored = false
    for (const level of levels) {
      const result = level.rules.test(level.base === "" ? probe : probe.slice(level.base.length + 1))
      if (result.ignored) ignored = true
      else if (result.unignored) ignored = false
    }
    return ignored
  }

  /** Each directory's own `.gitignore` rules, as the last walk found them (undefined: none). */
  const ownLevels = new Map<string, IgnoreLevel | undefined>()
  const levelOf = (relativeDir: string, absoluteDir: string) => {
    const level = ignoreLevelOf(relativeDir, absoluteDir)
    ownLevels.set(relativeDir, level)
    return level
  }
  /** The rules that apply inside `relativeDir`: its ancestors' and its own, root first. */
  const levelsFor = (relativeDir: string): Array<IgnoreLevel> => {
    const chain = relativeDir === "" ? [""] : ["", ...relativeDir.split("/").map((_, index, parts) => parts.slice(0, index + 1).join("/"))]
    return chain.flatMap((dir) => {
      const level = ownLevels.has(dir) ? ownLevels.get(dir) : levelOf(dir, dir === "" ? root : `${root}/${dir}`)
      return level === undefined ? [] : [level]
    })
  }

  const session = (options: ScanOptions) => {
    const configured = options.ignore.length === 0 ? undefined : ignore().add([...options.ignore])
    const entries = new Map<string, ScannedEntry>()
    const problems: Array<ReadProblem> = []
    const unlisted = new Set<string>()
    /** What could not be read at `relative`: recorded unavailable, with the reason, and reported. */
    const unreadable = (relative: string, error: unknown): ScannedEntry => {
      const detail = `it could not be read: ${errnoOf(error) ?? (error instanceof Error ? error.message : String(error))}`
      problems.push({ path: relative, detail })
      return { kind: "unavailable", reason: detail }
    }
    let hashedFiles = 0
    let hashedBytes = 0

    const fileEntry = (relative: string, absolute: string, stat: fs.Stats): ScannedEntry => {
      const mode = stat.mode & 0o7777
      if (stat.size > options.maxFileBytes) {
        return { kind: "unavailable", reason: `${stat.size} bytes is larger than the capture's cap of ${options.maxFileBytes} bytes`, size: stat.size }
      }
      const cached = hashes.get(relative)
      if (cached !== undefined && sameStat(cached, stat) && stat.mtimeMs < cached.hashedAtMs - RACY_WINDOW_MS) {
        return { kind: "file", size: stat.size, mode, sha256: cached.sha256, data: undefined, linked: stat.nlink > 1 }
      }
      let expectedIno: number | undefined = stat.ino
      for (let attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
        const hashedAtMs = Date.now()
        let outcome: ReadOutcome
        try {
          outcome = readStable(absolute, expectedIno)
        } catch (error) {
          hashes.delete(relative)
          return unreadable(relative, error)
        }
        if (outcome === "gone") return { kind: "unavailable", reason: "it was removed while the workspace was read" }
        if (outcome === "not a file") return { kind: "unavailable", reason: "it was replaced while the workspace was read" }
        if (outcome === "changed") {
          expectedIno = undefined
          continue
        }
        const sha256 = sha256Of(outcome.data)
        hashedFiles++
        hashedBytes += outcome.data.length
        const read = outcome.stat
        hashes.set(relative, {
          ino: read.ino,
          size: read.size,
          mtimeMs: read.mtimeMs,
          ctimeMs: read.ctimeMs,
          mode: read.mode & 0o7777,
          sha256,
          hashedAtMs
        })
        if (read.size > options.maxFileBytes) {
          return { kind: "unavailable", reason: `${read.size} bytes is larger than the capture's cap of ${options.maxFileBytes} bytes`, size: read.size }
        }
        return {
          kind: "file",
          size: read.size,
          mode: read.mode & 0o7777,
          sha256,
          data: options.keepBytes(relative, sha256) ? outcome.data : undefined,
          linked: read.nlink > 1
        }
      }
      hashes.delete(relative)
      return { kind: "unavailable", reason: `it kept changing while it was read (${READ_ATTEMPTS} attempts)` }
    }

    /**
     * Record what is at one path (whose parent's rules are `levels`), walking into a directory
     * when `into` says so; false when nothing covered is there.
     */
    const look = (relative: string, levels: ReadonlyArray<IgnoreLevel>, into: (directory: string, ino: number) => boolean): boolean => {
      const absolute = `${root}/${relative}`
      let stat: fs.Stats
      try {
        stat = fs.lstatSync(fsPath(absolute))
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code
        if (code === "ENOENT" || code === "ENOTDIR" || code === "ELOOP") return false
        if (isIgnored(relative, false, levels, configured)) return false
        entries.set(relative, unreadable(relative, error))
        return true
      }
      const isDirectory = stat.isDirectory()
      if (isIgnored(relative, isDirectory, levels, configured)) return false
      if (isDirectory) {
        entries.set(relative, { kind: "directory", mode: stat.mode & 0o7777 })
        if (into(relative, stat.ino)) walk(relative, levels)
      } else if (stat.isSymbolicLink()) {
        let target: string
        try {
          target = pathOfBytes(fs.readlinkSync(fsPath(absolute), { encoding: "buffer" }))
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === "ENOENT" || (error as NodeJS.ErrnoException).code === "EINVAL") return false
          entries.set(relative, unreadable(relative, error))
          return true
        }
        entries.set(relative, { kind: "link", target })
      } else if (stat.isFile()) {
        entries.set(relative, fileEntry(relative, absolute, stat))
      } else {
        entries.set(relative, { kind: "unavailable", reason: "not a regular file, a directory or a symbolic link" })
      }
      return true
    }

    const walk = (relativeDir: string, levels: ReadonlyArray<IgnoreLevel>) => {
      const absoluteDir = relativeDir === "" ? root : `${root}/${relativeDir}`
      // Watched before it is listed: a change after the listing is then reported.
      options.beforeList?.(relativeDir)
      let names: Array<string>
      try {
        names = namesIn(absoluteDir)
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code
        // Removed or replaced since its parent was listed: what is there now is the next walk's.
        if (code === "ENOENT" || code === "ENOTDIR") return
        // Cannot be listed (no permission, a name too long): what is under it is unknown now.
        unlisted.add(relativeDir)
        unreadable(relativeDir, error)
        return
      }
      const own = levelOf(relativeDir, absoluteDir)
      const here = own === undefined ? levels : [...levels, own]
      names.sort()
      for (const name of names) {
        if (name === ".git" || isWriteTemp(name)) continue
        look(relativeDir === "" ? name : `${relativeDir}/${name}`, here, () => true)
      }
    }

    return { entries, look, walk, counts: () => ({ hashedFiles, hashedBytes, problems, unlisted }) }
  }

  const scan = (options: ScanOptions): ScanResult => {
    const run = session(options)
    run.walk("", [])
    // Forget files that are gone, so the cache stays the size of the workspace.
    for (const relative of hashes.keys()) if (!run.entries.has(relative)) hashes.delete(relative)
    return { entries: run.entries, ...run.counts() }
  }

  const scanPaths: WorkspaceScanner["scanPaths"] = (paths, options) => {
    const run = session(options)
    const gone = new Set<string>()
    const walked = new Set<string>()
    // Whether every directory on the way to a path is still a real directory (never a link: it is not followed).
    const realDirectories = new Map<string, boolean>([["", true]])
    const isRealDirectory = (directory: string): boolean => {
      const known = realDirectories.get(directory)
      if (known !== undefined) return known
      const parent = directory.includes("/") ? directory.slice(0, directory.lastIndexOf("/")) : ""
      let stat: fs.Stats | undefined
      try {
        stat = isRealDirectory(parent) ? fs.lstatSync(fsPath(`${root}/${directory}`), { throwIfNoEntry: false }) : undefined
      } catch {
        // Cannot be looked at (a name too long, no permission): nothing under it is reached this way.
        stat = undefined
      }
      const real = stat?.isDirectory() === true
      realDirectories.set(directory, real)
      return real
    }
    for (const relative of [...paths].sort()) {
      const name = relative.slice(relative.lastIndexOf("/") + 1)
      if (run.entries.has(relative)) continue
      const parent = relative.includes("/") ? relative.slice(0, relative.lastIndexOf("/")) : ""
      const covered = name !== ".git" && !isWriteTemp(name) && !relative.split("/").includes(".git") && isRealDirectory(parent) &&
        run.look(relative, levelsFor(parent), (directory, ino) => {
          if (options.isListed(directory, ino)) return false
          walked.add(directory)
          return true
        })
      if (!covered) {
        gone.add(relative)
        hashes.delete(relative)
      } else if (run.entries.get(relative)?.kind !== "directory") walked.add(relative)
    }
    return { entries: run.entries, gone, walked, ...run.counts() }
  }

  const read = (relative: string, sha256: string) => {
    for (let attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
      const outcome = readStable(path.join(root, ...relative.split("/")), undefined)
      if (outcome === "changed") continue
      if (typeof outcome === "string") return undefined
      return sha256Of(outcome.data) === sha256 ? outcome.data : undefined
    }
    return undefined
  }

  // Never through a link: a path whose directory is now a link (or a file) holds nothing of the workdir's.
  const exists = (relative: string) => {
    const parts = relative.split("/")
    let current = root
    for (let index = 0; index < parts.length; index++) {
      current = `${current}/${parts[index]}`
      let stat: fs.Stats | undefined
      try {
        stat = fs.lstatSync(fsPath(current), { throwIfNoEntry: false })
      } catch {
        // Something is there that cannot be looked at: it is not known to be gone.
        return true
      }
      if (stat === undefined) return false
      if (index < parts.length - 1 && !stat.isDirectory()) return false
    }
    return true
  }

  const prime: WorkspaceScanner["prime"] = (known) => {
    for (const [relative, hashed] of known) if (!hashes.has(relative)) hashes.set(relative, hashed)
  }
  return { root, scan, scanPaths, read, exists, hashedOf: (relative) => hashes.get(relative), prime }
}
