/**
 * Directories reached one name at a time, never through a link: the way the workspace keeps
 * every operation inside the workdir while other processes (the agent's own background
 * commands among them) may swap a directory for a symbolic link at any moment.
 *
 * Each step opens the next name with `O_DIRECTORY | O_NOFOLLOW` relative to the handle of the
 * directory before it, and the operation then names its last component relative to the handle
 * of its directory. Node has no `openat`; on Linux `/proc/self/fd/<fd>/<name>` is one (the
 * kernel resolves `/proc/self/fd/<fd>` to the open directory itself, not to a path), so a
 * directory renamed or swapped after it was opened keeps receiving the operations it was
 * meant for — inside the workdir. Elsewhere each use first checks that the directory's path
 * still leads to the opened handle's device and inode (a narrower window, not none).
 */
import * as fs from "node:fs"
import { errnoOf } from "../backends/internal/causes.js"
import { bytesOfPath, hasRawBytes, pathOfBytes } from "../core/pathNames.js"

const OPEN_DIRECTORY = fs.constants.O_RDONLY | fs.constants.O_DIRECTORY | fs.constants.O_NOFOLLOW

const procFd = (() => {
  try {
    return fs.statSync(`/proc/self/fd`).isDirectory() && fs.readlinkSync("/proc/self/fd/0") !== undefined
  } catch {
    return false
  }
})()

/** A name read as bytes, as a path: plain text unless it is not UTF-8 (then each bad byte kept, see pathNames). */
export const nameOf = (name: Buffer): string => {
  const text = name.toString("utf8")
  return text.includes("\uFFFD") ? pathOfBytes(name) : text
}

/** What to hand `node:fs` for a path: the string itself, or its bytes when it holds a byte that is not UTF-8. */
export const fsPath = (absolute: string): string | Buffer => {
  if (!hasRawBytes(absolute)) return absolute
  const bytes = bytesOfPath(absolute)
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length)
}

/** Why a path cannot be reached safely: a link or a non-directory on the way. */
export class PathBlocked extends Error {
  constructor(readonly reason: string) {
    super(reason)
  }
}

export interface DirectoryHandle {
  /** The open directory. */
  readonly fd: number
  /** Its workdir-relative path ("" for the workdir), as reached. */
  readonly relative: string
  /** Its absolute path as reached (what the check without /proc compares). */
  readonly absolute: string
  /** A path `node:fs` resolves to `name` inside this very directory (never through a link on the way). */
  readonly at: (name: string) => string | Buffer
  /** The directory itself, for `readdir`. */
  readonly self: () => string | Buffer
  readonly close: () => void
}

const handleOf = (fd: number, absolute: string, relative: string): DirectoryHandle => {
  let closed = false
  const checked = (): string => {
    if (procFd) return `/proc/self/fd/${fd}`
    // Without /proc: the path must still lead to this directory right now.
    const onDisk = fs.lstatSync(fsPath(absolute), { throwIfNoEntry: false })
    const opened = fs.fstatSync(fd)
    if (onDisk === undefined || !onDisk.isDirectory() || onDisk.dev !== opened.dev || onDisk.ino !== opened.ino) {
      throw new PathBlocked(`${relative === "" ? "the workdir" : relative} was moved or replaced meanwhile`)
    }
    return absolute
  }
  return {
    fd,
    relative,
    absolute,
    at: (name) => fsPath(`${checked()}/${name}`),
    self: () => fsPath(checked()),
    close: () => {
      if (!closed) fs.closeSync(fd)
      closed = true
    }
  }
}

/**
 * Open the directory `parts` under `root`, one name at a time without following a link;
 * `create` makes the missing ones (mode 0o777 less the umask, as `mkdir -p`). Undefined when
 * one is missing and `create` is false. A link or a non-directory on the way is `PathBlocked`.
 */
export const openDirectory = (root: string, parts: ReadonlyArray<string>, create: boolean): DirectoryHandle | undefined => {
  let current: DirectoryHandle | undefined = handleOf(fs.openSync(fsPath(root), OPEN_DIRECTORY), root, "")
  for (const name of parts) {
    const parent: DirectoryHandle = current
    try {
      current = openChild(parent, name, create)
    } finally {
      parent.close()
    }
    if (current === undefined) return undefined
  }
  return current
}

/** The directory `name` inside `parent` (made when missing and `create`); undefined when missing. The parent stays open. */
export const openChild = (parent: DirectoryHandle, name: string, create: boolean): DirectoryHandle | undefined => {
  const relative = parent.relative === "" ? name : `${parent.relative}/${name}`
  const open = () => handleOf(fs.openSync(parent.at(name), OPEN_DIRECTORY), `${parent.absolute}/${name}`, relative)
  try {
    return open()
  } catch (error) {
    const code = errnoOf(error)
    if (code !== "ENOENT") throw blocked(code, relative, error)
    if (!create) return undefined
  }
  try {
    fs.mkdirSync(parent.at(name))
  } catch (made) {
    if (errnoOf(made) !== "EEXIST") throw made
  }
  try {
    return open()
  } catch (error) {
    throw blocked(errnoOf(error), relative, error)
  }
}

const blocked = (code: string | undefined, relative: string, error: unknown): unknown =>
  code === "ELOOP"
    ? new PathBlocked(`${relative} is a symbolic link`)
    : code === "ENOTDIR"
    ? new PathBlocked(`${relative} is not a directory`)
    : error

/** Run `body` with the directory open, closing it after. */
export const withDirectory = <A>(directory: DirectoryHandle, body: (directory: DirectoryHandle) => A): A => {
  try {
    return body(directory)
  } finally {
    directory.close()
  }
}
