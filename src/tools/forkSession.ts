/**
 * Fork: a new session that starts from just before a checkpoint of a session (or from its tip)
 * — the conversation up to there and the workspace as it was there. Its log is one
 * `SessionForked` (the source's events are shared, not copied) and what it does next.
 *
 * - In the session's workdir, the fork is the source's whole log with its leaf moved to the point:
 *   the move is a restore (or, for a point on another branch, a switch) of the fork, with its
 *   intent in the fork's log — planned and checked against the disk before the fork exists,
 *   crash-resumable by the same call (with the same `id`), and undone by `undo` on the fork
 *   (back to the source's tip, conversation and files). The source's log is not touched.
 * - In another directory (`workdir`), the files at the point are written into a staging
 *   directory beside it, the fork's log is created, and the staging directory is renamed into
 *   place: a crash before the log leaves only the staging directory (the same call clears it and
 *   starts again), one after it only the rename to do (the same call does it).
 */
import { randomUUID } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Effect, Either, Stream } from "effect"
import { type CheckpointerService, checkSeqArgument } from "../core/Checkpointer.js"
import { type CheckpointerError, ConfigurationError, InvalidSessionIdError, type Refusal } from "../core/errors.js"
import { sha256Hex } from "../core/internal/sha256.js"
import { EVENT_FORMAT_VERSION, LeafMoved, SessionForked, SessionMetadata, type StoredEvent } from "../core/events.js"
import { decodeOptions } from "../core/internal/options.js"
import { planMaterialise } from "../core/restore.js"
import * as Session from "../core/session.js"
import { sessionIdProblem } from "../core/sessionId.js"
import { RestoreRefusedError, SessionWorkdirError, WorkspaceIOError } from "./errors.js"
import { homeFor, rehomed } from "./sessionWorkdir.js"
import type { SessionStatesService } from "./SessionStates.js"
import { ForkOptions, type ForkResult, nothingRestored, type RestoreError, type RestoreResult } from "./timeTravelTypes.js"
import * as Workspace from "./Workspace.js"

/** How a fork's move runs: planned only, over the user's edits too, abortable. */
export interface MoveRun {
  readonly dryRun: boolean
  readonly includeUserEdits: boolean
  readonly signal: AbortSignal | undefined
}

export interface ForkDeps {
  readonly checkpointer: CheckpointerService
  readonly states: SessionStatesService
  readonly workspace: Workspace.WorkspaceService
  /** Restore the session folded to `state` to just before checkpoint `seq` (conversation and files). */
  readonly restore: (
    sessionId: string,
    state: Session.SessionState,
    seq: number,
    options: MoveRun
  ) => Effect.Effect<RestoreResult, RestoreError>
  /** Move the leaf of the session folded to `state` to `leaf` (another branch), with its files. */
  readonly switchTo: (
    sessionId: string,
    state: Session.SessionState,
    leaf: number,
    options: MoveRun
  ) => Effect.Effect<RestoreResult, RestoreError>
}

/** Where a fork starts: the source's leaf, or the node before checkpoint `seq` (restored to when on the current branch). */
type ForkPoint = { readonly leaf: number; readonly checkpoint: number | undefined; readonly onBranch: boolean }

const refusal = (sessionId: string, seq: number, reason: Refusal["reason"], detail: string) =>
  new RestoreRefusedError({ sessionId, seq, refusals: [{ reason, detail }] })

/** The node a fork from checkpoint `seq` starts at (a user message of any branch), or why there is none. */
const forkPoint = (sessionId: string, source: Session.SessionState, seq: number | undefined): ForkPoint | RestoreRefusedError => {
  if (seq === undefined) return { leaf: source.leaf, checkpoint: undefined, onBranch: true }
  const node = Session.checkpointNode(source, seq)
  if (node === "pruned") {
    return refusal(sessionId, seq, "branch_pruned", `seq ${seq} is on a branch of session "${sessionId}" that was pruned: no fork starts there`)
  }
  if (node === undefined) {
    return refusal(sessionId, seq, "not_a_checkpoint", `seq ${seq} is not a checkpoint of session "${sessionId}" (a prompt, from listCheckpoints or tree)`)
  }
  return { leaf: node.before, checkpoint: seq, onBranch: node.onBranch }
}

const io = (operation: string, target: string) => (cause: unknown) =>
  new WorkspaceIOError({ operation, path: target, detail: cause instanceof Error ? cause.message : String(cause) })

const entriesOf = (directory: string): Effect.Effect<ReadonlyArray<string> | undefined, WorkspaceIOError> =>
  Effect.tryPromise({
    try: () => fs.promises.readdir(directory).catch((cause: NodeJS.ErrnoException) => (cause.code === "ENOENT" ? undefined : Promise.reject(cause))),
    catch: io("list", directory)
  })

export const make = (deps: ForkDeps) => {
  const { checkpointer, states, workspace } = deps

  /** The fork's fold once its `SessionForked` is stored, kept for its first use: the source's, one event on. */
  const rememberFork = (forkId: string, source: Session.SessionState) =>
    Effect.gen(function*() {
      const stored: ReadonlyArray<StoredEvent> = yield* Effect.map(
        Stream.runCollect(checkpointer.read(forkId, { sinceSeq: source.head })),
        (chunk) => Array.from(chunk)
      )
      const version = yield* checkpointer.version(forkId)
      const state = stored.reduce(Session.step, source)
      if (state.head === version.head) yield* states.remember(forkId, { state, generation: version.generation })
      return state
    })

  const resultOf = (
    forkId: string,
    from: { readonly session: string; readonly at: number },
    leaf: number,
    workdir: string,
    files: RestoreResult
  ): ForkResult => ({ ...files, sessionId: forkId, forkedFrom: from, leaf, workdir })

  const nothingMoved = (dryRun: boolean, resumed: boolean): RestoreResult => ({ ...nothingRestored, dryRun, resumed })

  const fork = (sessionId: string, seq: number | undefined, input: ForkOptions = {}): Effect.Effect<ForkResult, RestoreError> =>
    Effect.gen(function*() {
      const options = yield* decodeOptions(ForkOptions, input, "fork options")
      if (seq !== undefined) yield* checkSeqArgument(sessionId, "seq", seq)
      const forkId = options.id ?? randomUUID()
      const idProblem = sessionIdProblem(forkId)
      if (idProblem !== undefined) return yield* new InvalidSessionIdError({ sessionId: forkId, reason: idProblem })
      if (forkId === sessionId) return yield* new ConfigurationError({ option: "id", detail: "a fork needs an id of its own" })
      const { state: source } = yield* states.get(sessionId)
      if (source.head === 0) return yield* refusal(sessionId, seq ?? 0, "not_a_checkpoint", `session "${sessionId}" holds no events to fork`)
      if (source.pendingRestore !== undefined) {
        return yield* refusal(sessionId, seq ?? 0, "restore_interrupted", `session "${sessionId}" has a restore cut short: finish or undo it first`)
      }
      const point = forkPoint(sessionId, source, seq)
      if (point instanceof RestoreRefusedError) return yield* point
      const moveOptions = { dryRun: options.dryRun ?? false, includeUserEdits: options.includeUserEdits ?? false, signal: options.signal }
      const elsewhere = options.workdir === undefined ? undefined : realPathOf(path.resolve(options.workdir))
      if (elsewhere === undefined || elsewhere === workspace.root) {
        // Here, the files move from the source's state: this must be its workdir, unless the fork is made at home here.
        const home = homeFor({ sessionId, state: source, workdir: workspace.root, operation: "fork", rehome: options.rehome ?? false })
        if (home instanceof SessionWorkdirError) return yield* home
        return yield* forkHere(sessionId, forkId, source, point, moveOptions, home === "rehome")
      }
      return yield* forkElsewhere(sessionId, forkId, source, point, elsewhere, moveOptions)
    })

  /**
   * The directory as its real path (its parent's, for one not made yet), as a workspace's root
   * is: the fork's log names it, and an agent opened there must find its own root in it.
   */
  const realPathOf = (directory: string): string => {
    for (const [at, rest] of [[directory, ""], [path.dirname(directory), path.basename(directory)]] as const) {
      try {
        return path.join(fs.realpathSync(at), rest)
      } catch {
        // Not there (yet): the parent, or the checks below say what is wrong.
      }
    }
    return directory
  }

  /** In the session's workdir: the fork, then its leaf moved to the point with the files (a restore of the fork). */
  const forkHere = (
    sessionId: string,
    forkId: string,
    source: Session.SessionState,
    point: ForkPoint,
    options: MoveRun,
    /** The source's log names another workdir: the fork's names this one. */
    rehome: boolean
  ) =>
    Effect.gen(function*() {
      const move = (id: string, state: Session.SessionState, dryRun: boolean) =>
        point.checkpoint === undefined
          ? Effect.succeed(nothingMoved(dryRun, false))
          : point.onBranch
          ? deps.restore(id, state, point.checkpoint, { ...options, dryRun })
          : deps.switchTo(id, state, point.leaf, { ...options, dryRun })
      const existing = yield* checkpointer.head(forkId)
      if (existing > 0) {
        // The same fork again: finish what a crash cut short (or find it done).
        const { state } = yield* states.get(forkId)
        const from = yield* sameFork(forkId, sessionId, state)
        if (state.pendingRestore === undefined && state.leaf === point.leaf) return resultOf(forkId, from, state.leaf, workspace.root, nothingMoved(options.dryRun, true))
        const finished = yield* move(forkId, state, options.dryRun)
        return resultOf(forkId, from, point.leaf, workspace.root, { ...finished, resumed: true })
      }
      const forked = new SessionForked({ from: sessionId, at: source.head })
      const from = { session: sessionId, at: source.head }
      const started = rehome ? [forked, rehomed(workspace.root)] : [forked]
      // Planned and checked on the disk before the fork exists: a refused fork leaves nothing behind.
      let planned = source
      for (const [index, event] of started.entries()) {
        planned = Session.step(planned, { seq: source.head + index + 1, ts: source.lastTs ?? 0, event })
      }
      const dry = yield* move(sessionId, planned, true)
      if (dry.refusals.length > 0) return yield* new RestoreRefusedError({ sessionId, seq: point.checkpoint ?? 0, refusals: dry.refusals })
      if (options.dryRun) return resultOf(forkId, from, point.leaf, workspace.root, dry)
      yield* checkpointer.append(forkId, started, 0)
      const state = yield* rememberFork(forkId, source)
      const moved = yield* move(forkId, state, false)
      return resultOf(forkId, from, point.leaf, workspace.root, moved)
    })

  /** A fork already stored under this id must be one of this session: where it came from. */
  const sameFork = (forkId: string, sessionId: string, state: Session.SessionState) =>
    state.forkedFrom?.session === sessionId
      ? Effect.succeed(state.forkedFrom)
      : Effect.fail(new ConfigurationError({ option: "id", detail: `session "${forkId}" exists and is not a fork of "${sessionId}"` }))

  /** In a directory of its own: the files at the point staged beside it, the fork's log, then the rename into place. */
  const forkElsewhere = (
    sessionId: string,
    forkId: string,
    source: Session.SessionState,
    point: ForkPoint,
    directory: string,
    options: { readonly dryRun: boolean }
  ): Effect.Effect<ForkResult, RestoreError> =>
    Effect.gen(function*() {
      const root = workspace.root
      if (directory.startsWith(root + path.sep) || root.startsWith(directory + path.sep)) {
        return yield* new ConfigurationError({
          option: "workdir",
          detail: `${directory} is inside the session's workdir ${root} or holds it: a fork's files go to a directory of their own`
        })
      }
      const parent = path.dirname(directory)
      const parentProblem = Workspace.workdirProblem(parent)
      if (parentProblem !== undefined) return yield* parentProblem
      const staging = path.join(parent, `.${path.basename(directory)}.lite-agent-fork-${forkId}`)
      const existing = yield* checkpointer.head(forkId)
      if (existing > 0) {
        const { state } = yield* states.get(forkId)
        const from = yield* sameFork(forkId, sessionId, state)
        // Cut short after its log was stored: only the rename is left.
        if ((yield* entriesOf(staging)) !== undefined && !options.dryRun) yield* moveIntoPlace(staging, directory)
        return resultOf(forkId, from, state.leaf, directory, nothingMoved(options.dryRun, true))
      }
      const held = yield* entriesOf(directory)
      if (held !== undefined && held.length > 0) {
        return yield* new ConfigurationError({ option: "workdir", detail: `${directory} is not empty: a fork's files go to a new or empty directory` })
      }
      const forked = new SessionForked({ from: sessionId, at: source.head })
      const from = { session: sessionId, at: source.head }
      const atFork = Session.step(source, { seq: source.head + 1, ts: source.lastTs ?? 0, event: forked })
      const moved = point.leaf === atFork.leaf
        ? undefined
        : new LeafMoved({ from: atFork.leaf, to: point.leaf, reason: "restore" })
      const target = moved === undefined ? atFork : Session.step(atFork, { seq: source.head + 2, ts: source.lastTs ?? 0, event: moved })
      const plan = planMaterialise(target)
      const report: RestoreResult = {
        ...nothingMoved(options.dryRun, false),
        conversationRestored: moved !== undefined,
        notCovered: plan.notCovered,
        refusals: plan.refusals,
        plan: plan.files.map((file) => ({ path: file.path, action: file.action.kind, unverified: false, alreadyRestored: false }))
      }
      if (plan.refusals.length > 0) return yield* new RestoreRefusedError({ sessionId, seq: point.checkpoint ?? 0, refusals: plan.refusals })
      if (options.dryRun) return resultOf(forkId, from, point.leaf, directory, report)

      // A staging directory a crash left before the fork's log was stored goes first.
      yield* Effect.tryPromise({ try: () => fs.promises.rm(staging, { recursive: true, force: true }), catch: io("remove", staging) })
      yield* Effect.tryPromise({ try: () => fs.promises.mkdir(staging, { recursive: true }), catch: io("create", staging) })
      const stage = yield* Effect.try({ try: () => Workspace.make(staging), catch: io("open", staging) })
      // Files first, then directories (a directory's mode may forbid writing into it).
      const unavailable: Array<Refusal> = []
      for (const { action, path: relative } of plan.files) {
        if (action.kind === "write") {
          const data = action.data ?? (yield* bytesOf(sessionId, relative, action.sha256))
          if (typeof data === "string") unavailable.push({ path: relative, reason: "snapshot_missing", detail: data })
          else yield* stage.write(relative, data, action.mode)
        } else if (action.kind === "link") {
          yield* stage.writeLink(relative, action.target)
        }
      }
      if (unavailable.length > 0) {
        yield* Effect.ignore(Effect.tryPromise(() => fs.promises.rm(staging, { recursive: true, force: true })))
        return yield* new RestoreRefusedError({ sessionId, seq: point.checkpoint ?? 0, refusals: unavailable })
      }
      for (const { action, path: relative } of [...plan.files].reverse()) {
        if (action.kind === "directory") yield* stage.makeDirectory(relative, action.mode)
      }
      yield* checkpointer.append(
        forkId,
        [forked, ...(moved === undefined ? [] : [moved]), new SessionMetadata({ formatVersion: EVENT_FORMAT_VERSION, workdir: directory })],
        0
      )
      yield* moveIntoPlace(staging, directory)
      return resultOf(forkId, from, point.leaf, directory, { ...report, restoredFiles: plan.files.map((file) => file.path) })
    }).pipe(Effect.mapError((error): RestoreError => (error._tag === "UnsafePathError" ? io("write", error.path)(error) : error)))

  /**
   * A file's bytes by hash: from the snapshot store or, for a file the agent wrote and never
   * changed again (its bytes were never stored), from the workdir when it still holds exactly
   * them. Why not, otherwise.
   */
  const bytesOf = (sessionId: string, relative: string, sha256: string): Effect.Effect<Uint8Array | string, CheckpointerError> =>
    Effect.catchTag(checkpointer.readSnapshot(sessionId, sha256), "SnapshotBlobError", (missing) =>
      Effect.map(Effect.either(workspace.inspect(relative)), (onDisk) =>
        Either.isRight(onDisk) && onDisk.right.kind === "file" && sha256Hex(onDisk.right.data) === sha256
          ? onDisk.right.data
          : `its bytes are not stored (${missing.detail}) and the workdir holds something else there now`))

  /** Rename the staging directory to the fork's (an empty one there is replaced). */
  const moveIntoPlace = (staging: string, directory: string): Effect.Effect<void, WorkspaceIOError> =>
    Effect.tryPromise({
      try: async () => {
        await fs.promises.rmdir(directory).catch((cause: NodeJS.ErrnoException) => (cause.code === "ENOENT" ? undefined : Promise.reject(cause)))
        await fs.promises.rename(staging, directory)
      },
      catch: io("rename", directory)
    })

  return { fork }
}
