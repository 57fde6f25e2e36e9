/**
 * The agent's working directory: every file the tools and restore touch goes through here.
 *
 * Path safety is decided at the time of use: a relative path is refused when it is empty,
 * absolute, contains NUL, or leaves the workdir with `..`; then every existing component on
 * the way is checked with `lstat` — a symlink anywhere (the file itself included) is refused,
 * and the real path of the parent directory must still be inside the workdir. Nothing is
 * ever written through a symlink: writes go to a temporary file in the same directory and
 * are renamed over the target, which replaces a link rather than following it.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Context, Effect, Layer } from "effect"
import { ConfigurationError } from "../core/errors.js"
import { quoteValue } from "../core/internal/options.js"
import { errnoOf as codeOf, messageOf } from "../backends/internal/causes.js"
import { UnsafePathError, WorkspaceIOError } from "./errors.js"

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
  if (path.isAbsolute(relative) || /^[a-zA-Z]:[\\/]/.test(relative)) return "absolute paths are not allowed"
  const normalized = path.posix.normalize(relative.replace(/\\/g, "/"))
  if (normalized === ".." || normalized.startsWith("../")) return "the path leaves the workdir"
  if (normalized === "." || normalized === "") return "the path names the workdir itself"
  return undefined
}

/** The workdir-relative form of a path, with `/` separators (how paths are recorded). */
export const normalizeRelative = (relative: string): string =>
  path.posix.normalize(relative.replace(/\\/g, "/")).replace(/\/+$/, "")

export const make = (workdir: string): WorkspaceService => {
  const root = fs.realpathSync(workdir)
  const io = (operation: string, relative: string) => (cause: unknown) =>
    new WorkspaceIOError({ operation, path: relative, detail: messageOf(cause) })
  const unsafe = (relative: string, reason: string) => new UnsafePathError({ path: relative, reason })

  /**
   * Resolve and check, at the time of use. `allowMissing` lets the last components not exist yet
   * (a write creates them); an existing component must be a real directory, never a symlink.
   */
  const resolve = (relative: string): Effect.Effect<string, UnsafePathError> =>
    Effect.suspend(() => {
      const problem = relativePathProblem(relative)
      if (problem !== undefined) return Effect.fail(unsafe(relative, problem))
      const parts = normalizeRelative(relative).split("/")
      let current = root
      for (let index = 0; index < parts.length; index++) {
        current = path.join(current, parts[index]!)
        let stat: fs.Stats
        try {
          stat = fs.lstatSync(current)
        } catch (error) {
          if (codeOf(error) === "ENOENT") break
          return Effect.fail(unsafe(relative, `cannot check ${parts.slice(0, index + 1).join("/")}: ${String(error)}`))
        }
        if (stat.isSymbolicLink()) {
          return Effect.fail(unsafe(relative, `${parts.slice(0, index + 1).join("/")} is a symbolic link`))
        }
        if (index < parts.length - 1 && !stat.isDirectory()) {
          return Effect.fail(unsafe(relative, `${parts.slice(0, index + 1).join("/")} is not a directory`))
        }
      }
      const target = path.join(root, ...parts)
      // The deepest existing directory must really be inside the workdir (no mount or link tricks).
      let parent = path.dirname(target)
      while (!fs.existsSync(parent)) parent = path.dirname(parent)
      const realParent = fs.realpathSync(parent)
      if (realParent !== root && !realParent.startsWith(root + path.sep)) {
        return Effect.fail(unsafe(relative, "its directory resolves outside the workdir"))
      }
      return Effect.succeed(target)
    })

  const inspect = (relative: string) =>
    Effect.flatMap(resolve(relative), (target) =>
      Effect.try({
        try: (): PathState => {
          let stat: fs.Stats
          try {
            stat = fs.lstatSync(target)
          } catch (error) {
            if (codeOf(error) === "ENOENT") return { kind: "absent" }
            throw error
          }
          if (!stat.isFile()) return { kind: "other", description: stat.isDirectory() ? "a directory" : "not a regular file" }
          return { kind: "file", data: fs.readFileSync(target), mode: stat.mode & 0o7777 }
        },
        catch: io("read", relative)
      }))

  const stat = (relative: string) =>
    Effect.flatMap(resolve(relative), (target) =>
      Effect.try({
        try: () => {
          try {
            const found = fs.lstatSync(target)
            return found.isFile() ? { size: found.size, mode: found.mode & 0o7777 } : undefined
          } catch (error) {
            if (codeOf(error) === "ENOENT") return undefined
            throw error
          }
        },
        catch: io("stat", relative)
      }))

  const write = (relative: string, data: Uint8Array, mode: number) =>
    Effect.flatMap(resolve(relative), (target) =>
      Effect.try({
        try: () => {
          fs.mkdirSync(path.dirname(target), { recursive: true })
          const temp = path.join(path.dirname(target), `${TEMP_PREFIX}${randomBytes(6).toString("hex")}${TEMP_SUFFIX}`)
          try {
            fs.writeFileSync(temp, data, { flag: "wx", mode })
            fs.chmodSync(temp, mode)
            // Right before the rename: the directory must still really be inside the workdir.
            const realParent = fs.realpathSync(path.dirname(target))
            if (realParent !== path.dirname(target)) throw new Error("its directory was replaced by a link")
            fs.renameSync(temp, target)
          } catch (error) {
            fs.rmSync(temp, { force: true })
            throw error
          }
        },
        catch: io("write", relative)
      }).pipe(
        // A directory created just now could have been swapped for a link meanwhile: check again.
        Effect.zipLeft(resolve(relative))
      ))

  const remove = (relative: string) =>
    Effect.flatMap(resolve(relative), (target) =>
      Effect.try({ try: () => fs.rmSync(target, { force: true }), catch: io("delete", relative) }))

  const chmod = (relative: string, mode: number) =>
    Effect.flatMap(resolve(relative), (target) =>
      Effect.try({ try: () => fs.chmodSync(target, mode), catch: io("chmod", relative) }))

  const list = (relative: string) =>
    Effect.flatMap(relative === "." || relative === "" ? Effect.succeed(root) : resolve(relative), (target) =>
      Effect.try({
        try: () =>
          fs.readdirSync(target, { withFileTypes: true })
            .map((entry) => (entry.isDirectory() ? `${entry.name}/` : entry.name))
            .sort(),
        catch: io("list", relative)
      }))

  /** `resolve` for a path that may itself be a link: its directory is checked, the last component is not followed. */
  const resolveEntry = (relative: string) =>
    Effect.suspend(() => {
      const problem = relativePathProblem(relative)
      if (problem !== undefined) return Effect.fail(unsafe(relative, problem))
      const normalized = normalizeRelative(relative)
      const parent = path.posix.dirname(normalized)
      const name = path.posix.basename(normalized)
      return Effect.map(parent === "." ? Effect.succeed(root) : resolve(parent), (directory) => path.join(directory, name))
    })

  const entry = (relative: string) =>
    Effect.flatMap(resolveEntry(relative), (target) =>
      Effect.try({
        try: (): EntryState => {
          let found: fs.Stats
          try {
            found = fs.lstatSync(target)
          } catch (error) {
            if (codeOf(error) === "ENOENT" || codeOf(error) === "ENOTDIR") return { kind: "absent" }
            throw error
          }
          if (found.isSymbolicLink()) return { kind: "link", target: fs.readlinkSync(target) }
          if (found.isDirectory()) return { kind: "directory", mode: found.mode & 0o7777 }
          if (!found.isFile()) return { kind: "other", description: "not a regular file" }
          return { kind: "file", data: fs.readFileSync(target), mode: found.mode & 0o7777 }
        },
        catch: io("read", relative)
      }))

  const writeLink = (relative: string, linkTarget: string) =>
    Effect.flatMap(resolveEntry(relative), (target) =>
      Effect.try({
        try: () => {
          fs.mkdirSync(path.dirname(target), { recursive: true })
          const temp = path.join(path.dirname(target), `${TEMP_PREFIX}${randomBytes(6).toString("hex")}${TEMP_SUFFIX}`)
          try {
            fs.symlinkSync(linkTarget, temp)
            fs.renameSync(temp, target)
          } catch (error) {
            fs.rmSync(temp, { force: true })
            throw error
          }
        },
        catch: io("link", relative)
      }).pipe(Effect.zipLeft(resolveEntry(relative))))

  const makeDirectory = (relative: string, mode: number) =>
    Effect.flatMap(resolve(relative), (target) =>
      Effect.try({
        try: () => {
          fs.mkdirSync(target, { recursive: true })
          fs.chmodSync(target, mode)
        },
        catch: io("create directory", relative)
      }).pipe(Effect.zipLeft(resolve(relative))))

  const removeEntry = (relative: string) =>
    Effect.flatMap(resolveEntry(relative), (target) =>
      Effect.try({
        try: () => {
          let found: fs.Stats
          try {
            found = fs.lstatSync(target)
          } catch (error) {
            if (codeOf(error) === "ENOENT") return true
            throw error
          }
          if (!found.isDirectory()) {
            fs.rmSync(target, { force: true })
            return true
          }
          try {
            fs.rmdirSync(target)
            return true
          } catch (error) {
            if (codeOf(error) === "ENOTEMPTY" || codeOf(error) === "EEXIST") return false
            throw error
          }
        },
        catch: io("delete", relative)
      }))

  return { root, resolve, inspect, stat, write, remove, chmod, list, entry, writeLink, makeDirectory, removeEntry }
}

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
