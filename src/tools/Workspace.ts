/**
 * The agent's working directory: every file the tools and restore touch goes through here.
 *
 * Path safety: a relative path is refused when it is empty, absolute, contains NUL, or leaves
 * the workdir with `..`. Names are bytes (`../core/pathNames.ts`): a backslash is part of a name.
 * Every operation then reaches its directory one name at a time from the workdir, each step an
 * `open` with `O_DIRECTORY | O_NOFOLLOW` relative to the directory handle before it (through
 * `/proc/self/fd/<fd>/<name>`, Linux's way to say `openat`), and acts on the last name relative
 * to that handle. A link on the way is refused, and a directory swapped for a link while the
 * operation runs cannot send it outside the workdir: the handle stays on the directory it
 * opened. Nothing is ever written through a symlink: writes go to a temporary file made
 * (`O_EXCL | O_NOFOLLOW`) in the same directory and renamed over the target, which replaces a
 * link rather than following it. Without `/proc` (not Linux) the step falls back to a path
 * checked against the handle's device and inode right before each use.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Context, Effect, Layer } from "effect"
import { ConfigurationError } from "../core/errors.js"
import { quoteValue } from "../core/internal/options.js"
import { pathOfBytes } from "../core/pathNames.js"
import { errnoOf as codeOf, messageOf } from "../backends/internal/causes.js"
import { type DirectoryHandle, fsPath, nameOf, openChild, openDirectory, PathBlocked, withDirectory } from "./directoryHandles.js"
import { UnsafePathError, WorkspaceIOError } from "./errors.js"

export { fsPath } from "./directoryHandles.js"

export interface FileState {
  readonly kind: "file"
  readonly data: Uint8Array
  /** Permission bits only. */
  readonly mode: number
}
export interface AbsentState {
  readonly kind: "absent"
}
export interface OtherState {
  readonly kind: "other"
  /** What is there instead of a regular file (a directory, a socket, …). */
  readonly description: string
}
export type PathState = FileState | AbsentState | OtherState

/** What is at a path, a link or a directory included (what a restore of the whole workspace sees and puts back). */
export type EntryState =
  | FileState
  | AbsentState
  | { readonly kind: "link"; readonly target: string }
  | { readonly kind: "directory"; readonly mode: number }
  | OtherState

export interface WorkspaceService {
  readonly root: string
  /** Check `relative` and return its absolute path inside the workdir. */
  readonly resolve: (relative: string) => Effect.Effect<string, UnsafePathError>
  /** What is at `relative` now (refusing unsafe paths). */
  readonly inspect: (relative: string) => Effect.Effect<PathState, UnsafePathError | WorkspaceIOError>
  /** Size and mode of a regular file at `relative`, without reading it; undefined when there is none. */
  readonly stat: (
    relative: string
  ) => Effect.Effect<{ readonly size: number; readonly mode: number } | undefined, UnsafePathError | WorkspaceIOError>
  /** Replace `relative` atomically with `data` and `mode`, creating parent directories. */
  readonly write: (
    relative: string,
    data: Uint8Array,
    mode: number
  ) => Effect.Effect<void, UnsafePathError | WorkspaceIOError>
  readonly remove: (relative: string) => Effect.Effect<void, UnsafePathError | WorkspaceIOError>
  readonly chmod: (relative: string, mode: number) => Effect.Effect<void, UnsafePathError | WorkspaceIOError>
  /** Entries of a directory (names, `/` appended to directories), sorted. */
  readonly list: (relative: string) => Effect.Effect<ReadonlyArray<string>, UnsafePathError | WorkspaceIOError>
  /** What is at `relative`, which may itself be a link (never followed); every directory on the way is checked as for `resolve`. */
  readonly entry: (relative: string) => Effect.Effect<EntryState, UnsafePathError | WorkspaceIOError>
  /** Replace `relative` atomically with a symbolic link to `target` (never followed), creating parent directories. */
  readonly writeLink: (relative: string, target: string) => Effect.Effect<void, UnsafePathError | WorkspaceIOError>
  /** Make `relative` a directory with `mode` (creating it and its parents, or changing its mode). */
  readonly makeDirectory: (relative: string, mode: number) => Effect.Effect<void, UnsafePathError | WorkspaceIOError>
  /**
   * Remove what is at `relative` — a file, a link (not what it names) or an empty directory;
   * `false` when it is a directory that is not empty (left as it is).
   */
  readonly removeEntry: (relative: string) => Effect.Effect<boolean, UnsafePathError | WorkspaceIOError>
}

export class Workspace extends Context.Tag("@lite-agent/tools/Workspace")<Workspace, WorkspaceService>() {}

const TEMP_PREFIX = ".lite-agent-"
const TEMP_SUFFIX = ".tmp"
/**
 * Whether a directory entry is a temporary file of `write`: one is left behind only when the
 * process dies between writing it and renaming it into place.
 */
export const isWriteTemp = (name: string): boolean => /^\.lite-agent-[0-9a-f]{12}\.tmp$/.test(name)

/** The lexical checks every operation starts with. */
export const relativePathProblem = (relative: string): string | undefined => {
  if (typeof relative !== "string" || relative.length === 0) return "the path is empty"
  if (relative.includes("\u0000")) return "the path contains NUL"
  if (path.isAbsolute(relative)) return "absolute paths are not allowed"
  const normalized = path.posix.normalize(relative)
  if (normalized === ".." || normalized.startsWith("../")) return "the path leaves the workdir"
  if (normalized === "." || normalized === "") return "the path names the workdir itself"
  return undefined
}

/** The workdir-relative form of a path, with `/` separators (how paths are recorded; a backslash is part of a name). */
export const normalizeRelative = (relative: string): string => path.posix.normalize(relative).replace(/\/+$/, "")

/** The names in a directory as paths (names that are not UTF-8 kept as their bytes), with their types. */
export const readDirectory = (directory: string | Buffer): Array<{ readonly name: string; readonly isDirectory: boolean }> =>
  fs.readdirSync(directory, { withFileTypes: true, encoding: "buffer" }).map((entry) => ({
    name: nameOf(entry.name),
    isDirectory: entry.isDirectory()
  }))

export const make = (workdir: string): WorkspaceService => makeAt(fs.realpathSync(workdir))

const O_NOFOLLOW = fs.constants.O_NOFOLLOW
const tempName = () => `${TEMP_PREFIX}${randomBytes(6).toString("hex")}${TEMP_SUFFIX}`

/** A regular file's bytes and mode, read through a handle opened without following a link. */
const readFileAt = (at: string | Buffer): FileState => {
  const fd = fs.openSync(at, fs.constants.O_RDONLY | O_NOFOLLOW)
  try {
    const stat = fs.fstatSync(fd)
    return { kind: "file", data: fs.readFileSync(fd), mode: stat.mode & 0o7777 }
  } finally {
    fs.closeSync(fd)
  }
}

const lstatAt = (at: string | Buffer): fs.Stats | undefined => {
  try {
    return fs.lstatSync(at)
  } catch (error) {
    if (codeOf(error) === "ENOENT") return undefined
    throw error
  }
}

const makeAt = (root: string): WorkspaceService => {
  const unsafe = (relative: string, reason: string) => new UnsafePathError({ path: relative, reason })

  /**
   * Run `body` in the directory of `relative` (opened without following a link, created when
   * `create`), with the last name; `missing` when its directory is not there. A link or a
   * non-directory on the way is an `UnsafePathError`, any other failure a `WorkspaceIOError`.
   */
  const inDirectory = <A>(
    operation: string,
    relative: string,
    options: { readonly create: boolean; readonly missing: () => A },
    body: (directory: DirectoryHandle, name: string) => A
  ): Effect.Effect<A, UnsafePathError | WorkspaceIOError> =>
    Effect.suspend(() => {
      const problem = relativePathProblem(relative)
      if (problem !== undefined) return Effect.fail(unsafe(relative, problem))
      const parts = normalizeRelative(relative).split("/")
      const name = parts.pop()!
      return Effect.try({
        try: () => {
          const directory = openDirectory(root, parts, options.create)
          return directory === undefined ? options.missing() : withDirectory(directory, () => body(directory, name))
        },
        catch: (cause) =>
          cause instanceof PathBlocked
            ? unsafe(relative, cause.reason)
            : cause instanceof UnsafePathError
            ? cause
            : new WorkspaceIOError({ operation, path: relative, detail: messageOf(cause) })
      })
    })

  const notALink = (relative: string, stat: fs.Stats | undefined) => {
    if (stat?.isSymbolicLink() === true) throw unsafe(relative, `${normalizeRelative(relative)} is a symbolic link`)
    return stat
  }

  const resolve = (relative: string) =>
    inDirectory("check", relative, { create: false, missing: () => undefined }, (directory, name) => notALink(relative, lstatAt(directory.at(name)))).pipe(
      Effect.catchTag("WorkspaceIOError", (error) => Effect.fail(unsafe(relative, `cannot check it: ${error.detail}`))),
      Effect.as(path.join(root, normalizeRelative(relative)))
    )

  const inspect = (relative: string) =>
    inDirectory("read", relative, { create: false, missing: (): PathState => ({ kind: "absent" }) }, (directory, name): PathState => {
      const stat = notALink(relative, lstatAt(directory.at(name)))
      if (stat === undefined) return { kind: "absent" }
      if (!stat.isFile()) return { kind: "other", description: stat.isDirectory() ? "a directory" : "not a regular file" }
      return readFileAt(directory.at(name))
    })

  const stat = (relative: string) =>
    inDirectory("stat", relative, { create: false, missing: () => undefined }, (directory, name) => {
      const found = notALink(relative, lstatAt(directory.at(name)))
      return found?.isFile() === true ? { size: found.size, mode: found.mode & 0o7777 } : undefined
    })

  /** Make a temporary entry in `directory` with `make`, then rename it over `name` (removed again if that fails). */
  const replaceWith = (directory: DirectoryHandle, name: string, make: (temp: string | Buffer) => void) => {
    const temp = directory.at(tempName())
    try {
      make(temp)
      fs.renameSync(temp, directory.at(name))
    } catch (error) {
      fs.rmSync(temp, { force: true })
      throw error
    }
  }

  const write = (relative: string, data: Uint8Array, mode: number) =>
    inDirectory("write", relative, { create: true, missing: () => undefined }, (directory, name) => {
      notALink(relative, lstatAt(directory.at(name)))
      replaceWith(directory, name, (temp) => {
        const fd = fs.openSync(temp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | O_NOFOLLOW, mode)
        try {
          fs.writeFileSync(fd, data)
          fs.fchmodSync(fd, mode)
        } finally {
          fs.closeSync(fd)
        }
      })
    })

  const remove = (relative: string) =>
    inDirectory("delete", relative, { create: false, missing: () => undefined }, (directory, name) => {
      const found = notALink(relative, lstatAt(directory.at(name)))
      if (found === undefined) return
      if (found.isDirectory()) throw new Error("it is a directory")
      fs.unlinkSync(directory.at(name))
    })

  const chmod = (relative: string, mode: number) =>
    inDirectory("chmod", relative, { create: false, missing: () => undefined }, (directory, name) => {
      let fd: number
      try {
        fd = fs.openSync(directory.at(name), fs.constants.O_RDONLY | O_NOFOLLOW)
      } catch (error) {
        if (codeOf(error) === "ELOOP") throw unsafe(relative, `${normalizeRelative(relative)} is a symbolic link`)
        throw error
      }
      try {
        fs.fchmodSync(fd, mode)
      } finally {
        fs.closeSync(fd)
      }
    })

  const list = (relative: string) =>
    Effect.suspend(() => {
      const listing = (directory: DirectoryHandle) =>
        withDirectory(directory, () => readDirectory(directory.self()).map((entry) => (entry.isDirectory ? `${entry.name}/` : entry.name)).sort())
      const whole = relative === "." || relative === ""
      const problem = whole ? undefined : relativePathProblem(relative)
      if (problem !== undefined) return Effect.fail(unsafe(relative, problem))
      return Effect.try({
        try: () => {
          const directory = openDirectory(root, whole ? [] : normalizeRelative(relative).split("/"), false)
          if (directory === undefined) throw new Error("no such directory")
          return listing(directory)
        },
        catch: (cause) =>
          cause instanceof PathBlocked ? unsafe(relative, cause.reason) : new WorkspaceIOError({ operation: "list", path: relative, detail: messageOf(cause) })
      })
    })

  const entry = (relative: string) =>
    inDirectory("read", relative, { create: false, missing: (): EntryState => ({ kind: "absent" }) }, (directory, name): EntryState => {
      const found = lstatAt(directory.at(name))
      if (found === undefined) return { kind: "absent" }
      if (found.isSymbolicLink()) return { kind: "link", target: readLinkAt(directory.at(name)) }
      if (found.isDirectory()) return { kind: "directory", mode: found.mode & 0o7777 }
      if (!found.isFile()) return { kind: "other", description: "not a regular file" }
      return readFileAt(directory.at(name))
    })

  const writeLink = (relative: string, linkTarget: string) =>
    inDirectory("link", relative, { create: true, missing: () => undefined }, (directory, name) =>
      replaceWith(directory, name, (temp) => fs.symlinkSync(fsPath(linkTarget), temp)))

  const makeDirectory = (relative: string, mode: number) =>
    inDirectory("create directory", relative, { create: true, missing: () => undefined }, (parent, name) => {
      const made = openChild(parent, name, true)!
      withDirectory(made, () => fs.fchmodSync(made.fd, mode))
    })

  const removeEntry = (relative: string) =>
    inDirectory("delete", relative, { create: false, missing: () => true }, (directory, name) => {
      const found = lstatAt(directory.at(name))
      if (found === undefined) return true
      if (!found.isDirectory()) {
        fs.unlinkSync(directory.at(name))
        return true
      }
      try {
        fs.rmdirSync(directory.at(name))
        return true
      } catch (error) {
        if (codeOf(error) === "ENOTEMPTY" || codeOf(error) === "EEXIST") return false
        throw error
      }
    })

  return { root, resolve, inspect, stat, write, remove, chmod, list, entry, writeLink, makeDirectory, removeEntry }
}

/** A link's target as a path (a target that is not UTF-8 kept as its bytes). */
const readLinkAt = (at: string | Buffer): string => pathOfBytes(fs.readlinkSync(at, { encoding: "buffer" }))

/**
 * What is wrong with a workdir, if anything: it must be a path to an existing directory this
 * process can read, write and enter. Checked when the layer is built, and by the facade at once.
 */
export const workdirProblem = (workdir: unknown): ConfigurationError | undefined => {
  if (typeof workdir !== "string" || workdir.length === 0) {
    return new ConfigurationError({ option: "workdir", detail: `expected a path to a directory, got ${quoteValue(workdir)}` })
  }
  const problem = (detail: string) => new ConfigurationError({ option: "workdir", detail: `${workdir} ${detail}` })
  try {
    if (!fs.statSync(workdir).isDirectory()) return problem("is not a directory")
  } catch (cause) {
    return codeOf(cause) === "ENOENT" ? problem("does not exist") : problem(`cannot be opened: ${messageOf(cause)}`)
  }
  try {
    fs.accessSync(workdir, fs.constants.R_OK | fs.constants.W_OK | fs.constants.X_OK)
  } catch {
    return problem("is not readable and writable by this process")
  }
  return undefined
}

export const layer = (workdir: string): Layer.Layer<Workspace, WorkspaceIOError | ConfigurationError> =>
  Layer.effect(
    Workspace,
    Effect.suspend((): Effect.Effect<WorkspaceService, WorkspaceIOError | ConfigurationError> => {
      const problem = workdirProblem(workdir)
      if (problem !== undefined) return Effect.fail(problem)
      return Effect.try({
        try: () => make(workdir),
        catch: (cause) => new WorkspaceIOError({ operation: "open workdir", path: workdir, detail: messageOf(cause) })
      })
    })
  )
