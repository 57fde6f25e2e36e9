/**
 * Workspace captures: what changed under the workdir since the session's last capture — by a
 * file tool, a shell command, a background task, a restore or the user between turns — as
 * `WorkspaceCaptured` events whose files' bytes go to the snapshot store (once per content).
 *
 * A capture walks the workdir with the stat cache of `workspaceScan` (only files whose stat data
 * changed are read) and compares what it finds with what the session's fold says its last
 * capture saw (`SessionState.workspace`), so it records exactly the changes, whoever made them.
 * The walk is synchronous and runs on the calling fiber: the turn waits for it anyway.
 */
import { createHash } from "node:crypto"
import { realpathSync } from "node:fs"
import { basename, isAbsolute, relative as relativePath, resolve as resolvePath, sep } from "node:path"
import { Context, Effect, HashMap, Layer, Option, Schema } from "effect"
import type { CaptureCause, CapturedPath, CapturedState } from "../core/events.js"
import { WorkspaceCaptured } from "../core/events.js"
import { Checkpointer, type CheckpointerService } from "../core/Checkpointer.js"
import type { ConfigurationError } from "../core/errors.js"
import type { ManifestChunk } from "../core/events/workspace.js"
import { chunkEntries, encodeChunk, entryStateOf, type ManifestEntry } from "../core/manifest.js"
import { sha256Hex } from "../core/internal/sha256.js"
import { decodeOptions, NonNegativeInteger, PositiveInteger } from "../core/internal/options.js"
import { type KnownPathState, sameKnownState, type SessionState } from "../core/session.js"
import { messageOf } from "../backends/internal/causes.js"
import { WorkspaceIOError } from "./errors.js"
import { DEFAULT_SNAPSHOT_MAX_BYTES } from "./FileTools.js"
import { type Baseline, findBaseline } from "./workspaceBaseline.js"
import { fitQuota } from "./captureQuota.js"
import { makeScanner, type ReadProblem, type ScannedEntry, type WorkspaceScanner } from "./workspaceScan.js"
import { makeWatcher } from "./workspaceWatch.js"

export const WorkspaceOptions = Schema.Struct({
  /**
   * `all` (the default): capture the whole workdir at every checkpoint and after every change a
   * tool can make, so a restore undoes what shell commands did too. `tools`: only the file tools'
   * own snapshots (the spec's behaviour).
   */
  capture: Schema.optional(Schema.Literal("all", "tools")),
  /** More paths to leave out, in gitignore syntax relative to the workdir (`.git` and `.gitignore`d paths always are). */
  ignore: Schema.optional(Schema.Array(Schema.String)),
  /** Larger files are reported as not covered. Default: the snapshot cap (10 MiB). */
  maxFileBytes: Schema.optional(NonNegativeInteger),
  /** Changed files one capture stores at most; the rest are reported as not covered. Default 50,000. */
  maxFiles: Schema.optional(PositiveInteger),
  /** Bytes one capture stores at most; the rest are reported as not covered. Default 1 GiB. */
  maxBytes: Schema.optional(NonNegativeInteger)
})
export interface WorkspaceOptions extends Schema.Schema.Type<typeof WorkspaceOptions> {}

/**
 * Patterns that leave a session store out of the capture when it lives inside the workdir (a
 * store that captured itself would record every append): the directory of a file store, or a
 * SQLite database with its `-wal`, `-shm` and `-journal` files. None when it is elsewhere.
 */
export const storeIgnorePatterns = (workdir: string, store: { readonly directory: string } | { readonly file: string }): Array<string> => {
  const real = (path: string): string => {
    try {
      return realpathSync(path)
    } catch {
      // Not there yet (a store about to be made): its parent's real path, then its name.
      const parent = resolvePath(path, "..")
      return parent === path ? path : resolvePath(real(parent), basename(path))
    }
  }
  const root = real(workdir)
  const target = real("directory" in store ? store.directory : store.file)
  const relative = relativePath(root, target)
  if (relative === "" || relative.startsWith("..") || isAbsolute(relative)) return []
  const escaped = "/" + relative.split(sep).join("/").replace(/[\\*?[\]!# ]/g, (char) => `\\${char}`)
  return "directory" in store ? [`${escaped}/`] : [escaped, `${escaped}-wal`, `${escaped}-shm`, `${escaped}-journal`]
}

export const DEFAULT_CAPTURE_MAX_FILES = 50_000
export const DEFAULT_CAPTURE_MAX_BYTES = 1024 * 1024 * 1024
/** A capture's changes go to the log in events of at most this many paths and bytes (a baseline can be large). */
const EVENT_MAX_PATHS = 1_000
const EVENT_MAX_BYTES = 32 * 1024 * 1024

export interface WorkspaceCaptureService {
  /** False with `capture: "tools"`: `capture` then records nothing. */
  readonly enabled: boolean
  /**
   * The events recording what changed since the session's last capture (as `state` folds it),
   * attributed to `cause`. None when nothing changed — except for a `checkpoint` capture, which
   * is always recorded (it marks the turn after it as covered). The caller appends the events
   * right after `state.head`, in order. `problems`: paths the capture could not read (or store, past the store's quota), recorded
   * `unavailable` with why (a restore leaves them alone and says so); the next capture walks the
   * whole workdir to look at them again. A capture that fails as a whole is one event saying so
   * (`failure`, and a problem at "."): a restore refuses until the next capture, a walk of the
   * whole workdir, has seen what changed.
   */
  readonly capture: (
    sessionId: string,
    state: SessionState,
    cause: CaptureCause
  ) => Effect.Effect<Captured>
}

export interface Captured {
  readonly events: ReadonlyArray<WorkspaceCaptured>
  readonly problems: ReadonlyArray<ReadProblem>
  /** Files the capture read and hashed (their stat data was new, changed or racily clean). */
  readonly hashedFiles: number
}

export class WorkspaceCapture extends Context.Tag("@lite-agent/tools/WorkspaceCapture")<WorkspaceCapture, WorkspaceCaptureService>() {}

const isGitignore = (path: string) => path === ".gitignore" || path.endsWith("/.gitignore")

/** What the walk found, as the session keeps a state (to compare with what its last capture saw). */
const knownOfFound = (found: ScannedEntry): KnownPathState =>
  found.kind === "file"
    ? { _tag: "stored", sha256: found.sha256, size: found.size, mode: found.mode }
    : found.kind === "unavailable"
    ? (found.size === undefined ? { _tag: "unavailable", reason: found.reason } : { _tag: "unavailable", reason: found.reason, size: found.size })
    : found.kind === "link"
    ? { _tag: "link", target: found.target }
    : { _tag: "directory", mode: found.mode }

/** Changes cut into events small enough for any log. */
export const captureEvents = (cause: CaptureCause, coverage: string, changes: ReadonlyArray<CapturedPath>): Array<WorkspaceCaptured> => {
  const events: Array<WorkspaceCaptured> = []
  let batch: Array<CapturedPath> = []
  let bytes = 0
  const flush = () => {
    events.push(new WorkspaceCaptured({ cause, changes: batch, coverage }))
    batch = []
    bytes = 0
  }
  for (const change of changes) {
    const size = change.state._tag === "content" ? change.state.size : 0
    if (batch.length > 0 && (batch.length >= EVENT_MAX_PATHS || bytes + size > EVENT_MAX_BYTES)) flush()
    batch.push(change)
    bytes += size
  }
  if (batch.length > 0 || (events.length === 0 && cause._tag === "checkpoint")) flush()
  return events
}

/**
 * A session's first capture as one event listed by a manifest of the whole tree (with each file's
 * stat data): chunks the baseline already has are named, the rest written. Undefined when the
 * changes are not a first listing (a path gone, or not first seen).
 */
const manifestCapture = (
  cause: CaptureCause,
  coverage: string,
  changes: ReadonlyArray<CapturedPath>,
  scanner: WorkspaceScanner,
  baseline: Baseline | undefined
): WorkspaceCaptured | undefined => {
  const entries: Array<ManifestEntry> = []
  for (const change of changes) {
    const state = entryStateOf(change.state)
    if (state === undefined || change.firstSeen !== true) return undefined
    const hashed = state._tag === "stored" ? scanner.hashedOf(change.path) : undefined
    entries.push(
      hashed !== undefined && state._tag === "stored" && hashed.sha256 === state.sha256
        ? { path: change.path, state, stat: { size: hashed.size, mtimeMs: hashed.mtimeMs, ctimeMs: hashed.ctimeMs, ino: hashed.ino, hashedAtMs: hashed.hashedAtMs } }
        : { path: change.path, state }
    )
  }
  const manifest = chunkEntries(entries).map((chunk): ManifestChunk => {
    const data = encodeChunk(chunk)
    const sha256 = sha256Hex(data)
    return baseline?.chunks.has(sha256) === true ? { _tag: "stored", sha256, size: data.length, mode: 0 } : { _tag: "content", data, mode: 0, size: data.length, sha256 }
  })
  return new WorkspaceCaptured({ cause, changes, coverage, manifest })
}

/** A baseline's stat data as the scanner keeps it. */
const hashedOfBaseline = (baseline: Baseline) =>
  [...baseline.entries.values()].flatMap((entry) =>
    entry.stat === undefined || entry.state._tag !== "stored"
      ? []
      : [[entry.path, { ...entry.stat, mode: entry.state.mode, sha256: entry.state.sha256 }] as const]
  )

export const make = (workdir: string, input: WorkspaceOptions = {}, checkpointer?: CheckpointerService) =>
  Effect.gen(function*() {
    const options = yield* decodeOptions(WorkspaceOptions, input, "workspace options")
    const enabled = (options.capture ?? "all") === "all"
    const ignore = options.ignore ?? []
    const maxFileBytes = options.maxFileBytes ?? DEFAULT_SNAPSHOT_MAX_BYTES
    const maxFiles = options.maxFiles ?? DEFAULT_CAPTURE_MAX_FILES
    const maxBytes = options.maxBytes ?? DEFAULT_CAPTURE_MAX_BYTES
    // What decides which paths are covered: a different one makes paths new to it `firstSeen`.
    const coverage = createHash("sha256").update(JSON.stringify({ ignore, maxFileBytes })).digest("hex").slice(0, 16)
    const scanner = yield* Effect.try({
      try: () => makeScanner(workdir),
      catch: (cause) => new WorkspaceIOError({ operation: "open workdir", path: workdir, detail: messageOf(cause) })
    })

    const watcher = yield* Effect.acquireRelease(
      Effect.sync(() => (enabled ? makeWatcher(scanner.root) : undefined)),
      (made) => Effect.sync(() => made?.close())
    )
    /** The session this service captured last, and the seq its last capture event has if nobody wrote one since. */
    let last: { readonly sessionId: string; readonly lastCapture: number | undefined } | undefined
    /**
     * Covered files with other hard links: a write through another link is never reported for
     * their path (a watch is on the directory of the name written through), so every capture
     * looks at them.
     */
    let linked = new Set<string>()

    /**
     * What changed since the session's last capture: a walk of the whole workdir (`paths`
     * undefined), or a look at the paths the watcher reported.
     */
    const changesSince = (
      state: SessionState,
      paths: ReadonlySet<string> | undefined,
      baseline: Baseline | undefined
    ): { readonly changes: ReadonlyArray<CapturedPath>; readonly problems: ReadonlyArray<ReadProblem>; readonly hashedFiles: number } => {
      const known = state.workspace
      const scanOptions = {
        ignore,
        maxFileBytes,
        keepBytes: (path: string, sha256: string) => {
          if (baseline?.objects.has(sha256) === true) return false
          const last = Option.getOrUndefined(HashMap.get(known, path))
          return !(last !== undefined && last._tag === "stored" && last.sha256 === sha256)
        },
        beforeList: (directory: string) => watcher?.watch([directory])
      }
      let found: ReadonlyMap<string, ScannedEntry>
      let problems: ReadonlyArray<ReadProblem>
      let unlisted: ReadonlySet<string>
      let hashedFiles: number
      const gone: Array<string> = []
      if (paths === undefined || watcher === undefined) {
        // A full walk watches afresh: each directory from right before it is listed.
        watcher?.unwatch(watcher.watched())
        const walked = scanner.scan(scanOptions)
        found = walked.entries
        problems = walked.problems
        unlisted = walked.unlisted
        hashedFiles = walked.hashedFiles
        for (const path of HashMap.keys(known)) if (!found.has(path)) gone.push(path)
        linked = new Set([...found].flatMap(([path, entry]) => (entry.kind === "file" && entry.linked ? [path] : [])))
      } else {
        const looked = scanner.scanPaths([...paths, ...linked], {
          ...scanOptions,
          // A directory not watched as what it is now (new, or removed and made again) is walked, and watched from then.
          isListed: (directory, ino) => {
            if (watcher.watching(directory, ino)) return true
            watcher.unwatch([directory])
            return false
          }
        })
        found = looked.entries
        problems = looked.problems
        unlisted = looked.unlisted
        hashedFiles = looked.hashedFiles
        for (const path of looked.gone) linked.delete(path)
        for (const [path, entry] of found) {
          if (entry.kind === "file" && entry.linked) linked.add(path)
          else linked.delete(path)
        }
        const wasDirectory = (path: string) => Option.getOrUndefined(HashMap.get(known, path))?._tag === "directory"
        for (const path of looked.gone) if (HashMap.has(known, path)) gone.push(path)
        // What the session knew under a directory that is gone, no longer one, or was walked afresh,
        // and that the look did not find, is gone too (one pass over what it knows, only then).
        const gutted = new Set([...looked.gone, ...looked.walked].filter((path) => wasDirectory(path) || looked.walked.has(path) && found.get(path)?.kind === "directory"))
        if (gutted.size > 0) {
          const under = (path: string) => {
            for (let at = path.indexOf("/"); at >= 0; at = path.indexOf("/", at + 1)) if (gutted.has(path.slice(0, at))) return true
            return false
          }
          for (const path of HashMap.keys(known)) if (!found.has(path) && !looked.gone.has(path) && under(path)) gone.push(path)
          watcher.unwatch([...watcher.watched()].filter((directory) => looked.gone.has(directory) || (under(directory) && !found.has(directory))))
        }
      }
      const changed: Array<[string, ScannedEntry]> = []
      for (const [path, entry] of found) {
        if (!sameKnownState(Option.getOrUndefined(HashMap.get(known, path)), knownOfFound(entry))) changed.push([path, entry])
      }
      // New coverage rules (the first capture, other settings, a .gitignore changed): a path new to
      // this capture may have been there all along, so it is `firstSeen`, not created.
      const newlyCovered = state.coverage !== coverage ||
        changed.some(([path]) => isGitignore(path)) || gone.some(isGitignore)

      const changes: Array<CapturedPath> = []
      let files = 0
      let bytes = 0
      for (const [path, entry] of changed) {
        const firstSeen = newlyCovered && !HashMap.has(known, path) ? { firstSeen: true as const } : {}
        let state: CapturedState
        switch (entry.kind) {
          case "file": {
            // The store holds these bytes already (the baseline named them): a reference, nothing read.
            if (baseline?.objects.has(entry.sha256) === true) {
              state = { _tag: "stored", sha256: entry.sha256, size: entry.size, mode: entry.mode }
              break
            }
            if (files >= maxFiles || bytes + entry.size > maxBytes) {
              state = {
                _tag: "unavailable",
                reason: files >= maxFiles
                  ? `the capture's cap of ${maxFiles} changed files was reached`
                  : `the capture's cap of ${maxBytes} bytes was reached`,
                size: entry.size
              }
              break
            }
            const data = entry.data ?? scanner.read(path, entry.sha256)
            if (data === undefined) {
              state = { _tag: "unavailable", reason: "it changed while the workspace was read" }
              break
            }
            files++
            bytes += entry.size
            state = { _tag: "content", data, mode: entry.mode, size: entry.size, sha256: entry.sha256 }
            break
          }
          case "link":
            state = { _tag: "link", target: entry.target }
            break
          case "directory":
            state = { _tag: "directory", mode: entry.mode }
            break
          case "unavailable":
            state = entry.size === undefined
              ? { _tag: "unavailable", reason: entry.reason }
              : { _tag: "unavailable", reason: entry.reason, size: entry.size }
            break
        }
        changes.push({ path, state, ...firstSeen })
      }
      // A directory that could not be listed: what the session knew under it is unknown now, not gone.
      const unlistedAbove = (path: string) => {
        if (unlisted.size === 0) return undefined
        for (let at = path.indexOf("/"); at >= 0; at = path.indexOf("/", at + 1)) {
          if (unlisted.has(path.slice(0, at))) return path.slice(0, at)
        }
        return undefined
      }
      for (const path of gone) {
        const last = HashMap.unsafeGet(known, path)
        const directory = unlistedAbove(path)
        if (directory !== undefined) {
          const reason = `its directory ${directory} could not be listed`
          if (!(last._tag === "unavailable" && last.reason === reason)) changes.push({ path, state: { _tag: "unavailable", reason } })
        } else if (scanner.exists(path)) {
          const reason = "it is no longer covered (ignored now, or inside an ignored directory)"
          if (!(last._tag === "unavailable" && last.reason === reason)) changes.push({ path, state: { _tag: "unavailable", reason } })
        } else changes.push({ path, state: { _tag: "missing" } })
      }
      return { changes, problems, hashedFiles }
    }

    const service: WorkspaceCaptureService = {
      enabled,
      capture: (sessionId, state, cause) =>
        !enabled ? Effect.succeed({ events: [], problems: [], hashedFiles: 0 }) : Effect.gen(function*() {
          // Every change made before now reported; then the watcher's word is good only if nothing
          // but this service captured this session since its own last capture, with the same rules.
          const reported = watcher === undefined ? undefined : yield* Effect.promise(() => watcher.settle())
          const trusted = reported !== undefined && !reported.full && last?.sessionId === sessionId && state.captureFailed === undefined &&
            last.lastCapture === state.lastCapture && state.coverage === coverage && ![...reported.paths].some(isGitignore)
          // Until this capture is through, the next one cannot trust the watcher (what it reported is taken).
          last = undefined
          // The session's first capture: what the store knows of this tree spares reading and storing it again.
          const first = HashMap.isEmpty(state.workspace) && state.lastCapture === undefined
          const baseline = first && checkpointer !== undefined ? yield* findBaseline(checkpointer, sessionId, scanner.root, coverage) : undefined
          if (baseline !== undefined) scanner.prime(hashedOfBaseline(baseline))
          const looked = yield* Effect.either(Effect.try({
            try: () => changesSince(state, trusted ? reported.paths : undefined, baseline),
            catch: (error) => new WorkspaceIOError({ operation: "capture", path: workdir, detail: messageOf(error) })
          }))
          if (looked._tag === "Left") {
            const detail = looked.left.message
            return { events: [new WorkspaceCaptured({ cause, changes: [], coverage, failure: detail })], problems: [{ path: ".", detail }], hashedFiles: 0 }
          }
          // Past the store's quota, new content is not stored: those paths are problems too.
          const { changes, refused } = yield* fitQuota(checkpointer, looked.right.changes)
          const { hashedFiles } = looked.right
          const problems = [...looked.right.problems, ...refused]
          const listed = first && changes.length > 0 ? manifestCapture(cause, coverage, changes, scanner, baseline) : undefined
          const events = listed !== undefined ? [listed] : captureEvents(cause, coverage, changes)
          // Its events are appended next, right after the state's head (the callers' rule). What it
          // could not read is looked at again by a walk of the whole workdir next time.
          if (problems.length === 0) last = { sessionId, lastCapture: events.length > 0 ? state.head + events.length : state.lastCapture }
          return { events, problems, hashedFiles }
        })
    }
    return service
  })

/** Captures of `workdir` into the sessions of the `Checkpointer` (whose earlier captures of the tree a first capture starts from). */
export const layer = (workdir: string, options: WorkspaceOptions = {}): Layer.Layer<WorkspaceCapture, ConfigurationError | WorkspaceIOError, Checkpointer> =>
  Layer.scoped(WorkspaceCapture, Effect.flatMap(Checkpointer, (checkpointer) => make(workdir, options, checkpointer)))
