/**
 * `createLiteAgent` and `query`: the agent runtime for plain TypeScript callers. Every method
 * is the Effect service's, run on one `ManagedRuntime` built from the options' layers, and
 * rejects with the library's own error instances.
 */
import { Effect, Either, Exit, Fiber, Layer, ManagedRuntime, Schema, Stream } from "effect"
import * as MemoryCheckpointer from "../backends/memory.js"
import { ConfigurationError } from "../core/errors.js"
import { AgentClosedError } from "../agent/errors.js"
import type { Checkpoint, SessionTree } from "../core/session.js"
import type { PruneBranchesOptions, PruneBranchesReport, SessionInfo, SessionStats } from "../core/Checkpointer.js"
import { UserContent } from "../core/events.js"
import type { AgentEvent, LiteAgentResult } from "../agent/AgentEvents.js"
import {
  agentOptionFields,
  LiteAgent as LiteAgentTag,
  layerWithWorkdir,
  type LiteAgentService,
  type PruneOptions
} from "../agent/LiteAgent.js"
import type { BackgroundTaskInfo } from "../agent/MaintenanceLock.js"
import type { SendOptions } from "../agent/turn.js"
import {
  type CompactionEvent,
  type CompactionResult,
  type CompactOptions,
  defaultAutoCompact
} from "../agent/compaction.js"
import { SessionPointer } from "../agent/SessionPointer.js"
import { fileToolsOptionFields } from "../tools/FileTools.js"
import { storeIgnorePatterns, WorkspaceOptions } from "../tools/WorkspaceCapture.js"
import { AnyString, decodeOptionsOrThrow, described, expecting, quoteValue, recognised } from "../core/internal/options.js"
import { workdirProblem } from "../tools/Workspace.js"
import type { ModelProvider } from "../provider/ModelProvider.js"
import type { ForkOptions, ForkResult, InterruptedRestore, MoveOptions, RestoreOptions, RestoreResult } from "../tools/TimeTravel.js"
import * as FileCheckpointer from "../backends/file/FileCheckpointer.js"
import { type PromiseCheckpointer, toPromiseCheckpointer } from "./checkpointer.js"
import { iterateStream, runForPromise, valueOrThrow } from "./run.js"

const isModelProvider = (value: unknown): value is ModelProvider =>
  typeof value === "object" && value !== null && "layer" in value && typeof value.layer === "function" &&
  "defaultModelName" in value && typeof value.defaultModelName === "string"

const isPromiseCheckpointer = (value: unknown): value is PromiseCheckpointer =>
  typeof value === "object" && value !== null && "layer" in value && Layer.isLayer(value.layer) &&
  ["append", "read", "head", "list", "delete", "truncate", "close"].every((method) =>
    typeof (value as Record<string, unknown>)[method] === "function"
  )

export const LiteAgentOptions = Schema.Struct({
  /** Where the model comes from: `anthropic()` or `scripted(turns)` from `@lite-agent/sdk/provider`. */
  model: recognised("a provider such as anthropic() or scripted(turns)", isModelProvider),
  /** The directory the file tools and `shell` work in: an existing, writable directory. Default: `process.cwd()`. */
  workdir: Schema.optional(AnyString),
  /** Where sessions persist. Default: `fileCheckpointer()` (closed with the agent). */
  checkpointer: Schema.optional(
    recognised(
      "a checkpointer: fileCheckpointer(), sqliteCheckpointer(), memoryCheckpointer() or an object with the PromiseCheckpointer methods and its layer",
      isPromiseCheckpointer
    )
  ),
  /**
   * The default file checkpointer's settings (the spec's `storage`): where logs live, the codec
   * (which also covers file snapshots) and durability. Not together with `checkpointer`.
   */
  storage: Schema.optional(
    described(
      Schema.Struct({
        dir: FileCheckpointer.FileCheckpointerLayerOptions.fields.dir,
        codec: FileCheckpointer.FileCheckpointerLayerOptions.fields.codec,
        synchronous: FileCheckpointer.FileCheckpointerLayerOptions.fields.synchronous
      }),
      "storage settings { dir?, codec?, synchronous? }"
    )
  ),
  ...agentOptionFields,
  ...fileToolsOptionFields,
  /** What restore covers: `{ capture: "all" | "tools", ignore?, maxFileBytes?, maxFiles?, maxBytes? }` (default: the whole workdir). */
  workspace: Schema.optional(WorkspaceOptions)
})
export interface LiteAgentOptions extends Schema.Schema.Type<typeof LiteAgentOptions> {}

export interface LiteAgent {
  /** The session `send` and `run` use when `options.sessionId` is not given. */
  readonly sessionId: string
  /** Run one turn to completion in the current session (or `options.sessionId`). */
  send(input: UserContent, options?: SendOptions): Promise<LiteAgentResult>
  /** Run one turn, yielding its events as they happen; the last is `{ type: "result" }`. */
  run(input: UserContent, options?: SendOptions): AsyncGenerator<AgentEvent, void, undefined>
  /** Make `sessionId` current (an unknown id is an empty session). */
  resume(sessionId: string): void
  /** Rotate to a new empty session and return its id; the old transcript is kept. */
  clear(): string
  /** Persisted sessions, most recent first. */
  listSessions(): Promise<Array<SessionInfo>>
  deleteSession(sessionId: string): Promise<void>
  /** A session's rollback anchors (one per user prompt), oldest first. */
  listCheckpoints(sessionId: string): Promise<Array<Checkpoint>>
  /** What a session costs in storage: `{ events, logBytes, snapshotBytes, snapshots }`. */
  sessionStats(sessionId: string): Promise<SessionStats>
  /** Delete sessions older than `olderThanMs` and/or beyond the `keepLast` most recent (never the current one); the ids deleted. */
  pruneSessions(options: PruneOptions): Promise<Array<string>>
  /**
   * Prune the branches restores, undos and switches left behind, last active at least
   * `olderThanMs` ago (unlabelled unless `keepLabeled: false`; none a fork shares), in every
   * session or `options.sessionId`; the agent must be idle. Nothing is deleted until `gc`.
   */
  pruneBranches(options: PruneBranchesOptions): Promise<PruneBranchesReport>
  /** Roll back to just before a checkpoint; the agent must be idle. Then `sessionId` is current. */
  restore(sessionId: string, seq: number, options?: RestoreOptions): Promise<RestoreResult>
  /**
   * The session's restore that was cut short (a crash part-way), or undefined: until it is
   * finished (`restore` to the same checkpoint) or undone, `send` rejects with `RestoreInterruptedError`.
   */
  interruptedRestore(sessionId: string): Promise<InterruptedRestore | undefined>
  /** Put back every file the session's interrupted restore changed, as it was before it; the agent must be idle. */
  undoInterruptedRestore(sessionId: string): Promise<RestoreResult>
  /**
   * Undo the session's last move — a restore, a switch or a redo: back to where it started,
   * conversation and workspace; repeated, it walks the history of moves back. Refused
   * (`RestoreRefusedError`) with a reason per file edited outside since, or `nothing_to_undo`.
   * The agent must be idle; then `sessionId` is current.
   */
  undo(sessionId: string, options?: MoveOptions): Promise<RestoreResult>
  /** Redo the session's last undo (`nothing_to_redo` when there is none); the agent must be idle. */
  redo(sessionId: string, options?: MoveOptions): Promise<RestoreResult>
  /**
   * Switch to another branch of the session — by its tip's seq, from `tree` — with its
   * conversation and workspace (`not_a_branch` for any other seq); undone by `undo`. The agent
   * must be idle; then `sessionId` is current.
   */
  switchBranch(sessionId: string, leaf: number, options?: MoveOptions): Promise<RestoreResult>
  /**
   * Fork the session from just before checkpoint `seq` (or from its tip, with `seq` undefined): a
   * new session with the conversation up to there and the workspace as it was there — in this
   * workdir (the files move, as for a restore, refused the same way; then the fork is current) or
   * written into `options.workdir`, a new or empty directory. The agent must be idle.
   */
  fork(sessionId: string, seq?: number, options?: ForkOptions): Promise<ForkResult>
  /** The session's tree: `{ leaf, checkpoints, branches, undo, redo, forkedFrom? }` (see the time travel docs). */
  tree(sessionId: string): Promise<SessionTree>
  /** Name a checkpoint or a branch's tip for the tree (an empty name removes it); the session must be idle. */
  label(sessionId: string, seq: number, name: string): Promise<void>
  /**
   * Summarize the older part of the current session's conversation (or `options.sessionId`'s);
   * the agent must be idle. Await it for `{ before, after, … }`, or iterate it for its
   * `compaction` events as they happen (they reach `subscribe` too).
   */
  compact(instructions?: string, options?: CompactOptions): CompactionRun
  /** Background tasks not yet reported in their session's log. */
  backgroundTasks(): Promise<Array<BackgroundTaskInfo>>
  /** Every event from now on: persisted events, tool activity, background starts, `checkpoint_restore`. */
  subscribe(listener: (event: AgentEvent) => void): () => void
  /** Stop background tasks and release what the agent opened. Idempotent. */
  close(): Promise<void>
}

/** The options, decoded and checked as the layers would when built, at once; throws `ConfigurationError`. */
const checkedOptions = (input: unknown, prefix = ""): LiteAgentOptions => {
  const options = decodeOptionsOrThrow(LiteAgentOptions, input, { name: "options", prefix })
  if (options.sessions === false && options.checkpointer !== undefined) {
    throw new ConfigurationError({ option: "checkpointer", detail: "sessions: false means no persistence; do not pass a checkpointer" })
  }
  if (options.sessions === false && options.storage !== undefined) {
    throw new ConfigurationError({ option: "storage", detail: "sessions: false means no persistence; do not pass storage settings" })
  }
  if (options.storage !== undefined && options.checkpointer !== undefined) {
    throw new ConfigurationError({
      option: "storage",
      detail: "storage configures the default file checkpointer; with your own checkpointer, configure that one instead"
    })
  }
  const problem = workdirProblem(options.workdir ?? process.cwd())
  if (problem !== undefined) throw problem
  return options
}

/** Create an agent. Invalid options throw `ConfigurationError`; nothing is opened until the first call. */
export const createLiteAgent = (input: LiteAgentOptions): LiteAgent => createAgent(checkedOptions(input))

const createAgent = (options: LiteAgentOptions): LiteAgent => {
  const pointer = new SessionPointer(options.sessions !== false, options.sessionId)
  // A checkpointer the agent opened itself is closed with it; the caller's is left open.
  const ownCheckpointer = options.sessions === false
    ? toPromiseCheckpointer(MemoryCheckpointer.layer)
    : options.checkpointer === undefined
    ? toPromiseCheckpointer(FileCheckpointer.layer(options.storage ?? {}))
    : undefined
  const checkpointer = ownCheckpointer ?? options.checkpointer
  if (checkpointer === undefined) throw new ConfigurationError({ option: "checkpointer", detail: "no checkpointer" })
  const { model, workdir, checkpointer: _given, sessions: _sessions, sessionId: _sessionId, storage: _storage, ...layerOptions } = options
  // The agent's own file store, when it lies inside the workdir, is never captured.
  const storeDirectory = options.sessions !== false && options.checkpointer === undefined
    ? options.storage?.dir ?? FileCheckpointer.defaultDirectory()
    : undefined
  const storeIgnore = storeDirectory === undefined ? [] : storeIgnorePatterns(workdir ?? process.cwd(), { directory: storeDirectory })
  const agentLayer = layerWithWorkdir(workdir ?? process.cwd(), {
    ...layerOptions,
    ...(storeIgnore.length === 0 ? {} : { workspace: { ...options.workspace, ignore: [...(options.workspace?.ignore ?? []), ...storeIgnore] } }),
    pointer,
    modelName: options.modelName ?? model.defaultModelName,
    autoCompact: options.autoCompact ?? defaultAutoCompact(model.contextTokens)
  }).pipe(
    Layer.provide(Layer.merge(checkpointer.layer, options.model.layer(options.modelName)))
  )
  const runtime = ManagedRuntime.make(agentLayer)
  const listeners = new Set<(event: AgentEvent) => void>()
  let closed = false
  let ready: Promise<LiteAgentService> | undefined
  // Built on first use; one listener fans out to the facade's, so `subscribe` works before that.
  const service = () =>
    (ready ??= runForPromise(
      runtime,
      Effect.tap(LiteAgentTag, (agent) =>
        agent.addListener((event) => {
          for (const listener of listeners) {
            try {
              listener(event)
            } catch {
              // One failing listener must not hide events from the others.
            }
          }
        }))
    ))
  // Calls in flight, interrupted by close(): nothing the agent started outlives it.
  const inFlight = new Set<Fiber.RuntimeFiber<unknown, unknown>>()
  const call = async <A>(use: (agent: LiteAgentService) => Effect.Effect<A, unknown>): Promise<A> => {
    if (closed) throw new AgentClosedError()
    const agent = await service()
    if (closed) throw new AgentClosedError()
    const fiber = runtime.runFork(use(agent))
    inFlight.add(fiber)
    try {
      const exit = await Effect.runPromise(Fiber.await(fiber))
      if (closed && Exit.isInterrupted(exit)) throw new AgentClosedError()
      return valueOrThrow(exit)
    } finally {
      inFlight.delete(fiber)
    }
  }
  const open = (): Either.Either<void, AgentClosedError> => (closed ? Either.left(new AgentClosedError()) : Either.void)
  const orThrow = <A, E>(either: Either.Either<A, E>): A => Either.getOrThrowWith(either, (error) => error)

  return {
    get sessionId() {
      return pointer.current
    },
    send: (input, sendOptions) => call((agent) => agent.send(input, sendOptions)),
    run: async function*(input, sendOptions) {
      const agent = await call((agent) => Effect.succeed(agent))
      if (closed) throw new AgentClosedError()
      yield* iterateStream(runtime, agent.run(input, sendOptions), {
        onFiber: (fiber) => {
          inFlight.add(fiber)
          fiber.addObserver(() => inFlight.delete(fiber))
        },
        interrupted: () => new AgentClosedError()
      })
    },
    resume: (sessionId) => orThrow(Either.flatMap(open(), () => pointer.resume(sessionId))),
    clear: () => orThrow(Either.flatMap(open(), () => pointer.clear())),
    listSessions: () => call((agent) => Effect.map(agent.listSessions(), (sessions) => [...sessions])),
    deleteSession: (sessionId) => call((agent) => agent.deleteSession(sessionId)),
    listCheckpoints: (sessionId) => call((agent) => Effect.map(agent.listCheckpoints(sessionId), (checkpoints) => [...checkpoints])),
    restore: (sessionId, seq, restoreOptions) => call((agent) => agent.restore(sessionId, seq, restoreOptions)),
    interruptedRestore: (sessionId) => call((agent) => agent.interruptedRestore(sessionId)),
    undoInterruptedRestore: (sessionId) => call((agent) => agent.undoInterruptedRestore(sessionId)),
    undo: (sessionId, moveOptions) => call((agent) => agent.undo(sessionId, moveOptions)),
    redo: (sessionId, moveOptions) => call((agent) => agent.redo(sessionId, moveOptions)),
    switchBranch: (sessionId, leaf, moveOptions) => call((agent) => agent.switchBranch(sessionId, leaf, moveOptions)),
    fork: (sessionId, seq, forkOptions) => call((agent) => agent.fork(sessionId, seq, forkOptions)),
    tree: (sessionId) => call((agent) => agent.tree(sessionId)),
    label: (sessionId, seq, name) => call((agent) => agent.label(sessionId, seq, name)),
    sessionStats: (sessionId) => call((agent) => agent.sessionStats(sessionId)),
    pruneSessions: (pruneOptions) => call((agent) => Effect.map(agent.pruneSessions(pruneOptions), (ids) => [...ids])),
    pruneBranches: (pruneOptions) => call((agent) => agent.pruneBranches(pruneOptions)),
    compact: (instructions, compactOptions) => {
      const events: Array<CompactionEvent> = []
      let settled = false
      const waiting = new Set<() => void>()
      const wakeAll = () => {
        for (const wake of waiting) wake()
        waiting.clear()
      }
      const result = call((agent) =>
        Stream.runForEach(agent.compactRun(instructions, compactOptions), (event) =>
          Effect.sync(() => {
            events.push(event)
            wakeAll()
          }))
      ).then(() => {
        const result = events.find((event) => event.phase === "done")?.result
        if (result === undefined) throw new Error("compaction ended without a result")
        return result
      })
      // Iterating alone must not leave an unhandled rejection behind.
      result.finally(() => {
        settled = true
        wakeAll()
      }).catch(() => {})
      return {
        then: (onFulfilled, onRejected) => result.then(onFulfilled, onRejected),
        catch: (onRejected) => result.catch(onRejected),
        finally: (onFinally) => result.finally(onFinally),
        [Symbol.asyncIterator]: async function*() {
          let next = 0
          for (;;) {
            if (next < events.length) {
              yield events[next++]!
              continue
            }
            if (settled) return
            await new Promise<void>((resolve) => waiting.add(resolve))
          }
        }
      }
    },
    backgroundTasks: () => call((agent) => Effect.map(agent.backgroundTasks, (tasks) => [...tasks])),
    subscribe: (listener) => {
      orThrow(open())
      if (typeof listener !== "function") {
        throw new ConfigurationError({ option: "listener", detail: `expected a function, got ${quoteValue(listener)}` })
      }
      listeners.add(listener)
      return () => {
        listeners.delete(listener)
      }
    },
    close: async () => {
      if (closed) return
      closed = true
      await Promise.all([...inFlight].map((fiber) => Effect.runPromise(Fiber.interrupt(fiber))))
      await runtime.dispose()
      await ownCheckpointer?.close()
    }
  }
}

/**
 * A compaction under way: a promise of its result (rejecting with the error when it fails,
 * `CompactionCancelledError` when aborted) and an async iterable of its events, which ends
 * after the last one. Either or both can be used; it runs whether or not anyone listens.
 */
export interface CompactionRun extends PromiseLike<CompactionResult>, AsyncIterable<CompactionEvent> {
  catch<T = never>(onRejected: (reason: unknown) => T | PromiseLike<T>): Promise<CompactionResult | T>
  finally(onFinally: () => void): Promise<CompactionResult>
}

export interface QueryParams {
  readonly prompt: UserContent
  readonly options: LiteAgentOptions
}

// The options are decoded by createLiteAgent's schema, under the "options" prefix.
const QueryParamsSchema = Schema.Struct({
  prompt: expecting(UserContent, "a prompt: a string or an array of text blocks"),
  options: Schema.Unknown
})

/**
 * One turn, one-shot: create an agent with `options`, run `prompt` in its session
 * (`options.sessionId` to continue one), yield every event, close the agent.
 */
export async function* query(params: QueryParams): AsyncGenerator<AgentEvent, void, undefined> {
  const { options, prompt } = decodeOptionsOrThrow(QueryParamsSchema, params, "query parameters")
  const agent = createAgent(checkedOptions(options, "options"))
  try {
    yield* agent.run(prompt)
  } finally {
    await agent.close()
  }
}
