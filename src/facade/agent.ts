/**
 * `createLiteAgent` and `query`: the agent runtime for plain TypeScript callers. Every method
 * is the Effect service's, run on one `ManagedRuntime` built from the options' layers, and
 * rejects with the library's own error instances.
 */
import { Effect, Either, Exit, Fiber, Layer, ManagedRuntime } from "effect"
import * as MemoryCheckpointer from "../backends/memory.js"
import { ConfigurationError } from "../core/errors.js"
import { AgentClosedError } from "../agent/errors.js"
import type { Checkpoint } from "../core/session.js"
import type { SessionInfo } from "../core/Checkpointer.js"
import type { UserContent } from "../core/events.js"
import type { AgentEvent, LiteAgentResult } from "../agent/AgentEvents.js"
import { agentOptionsProblem, LiteAgent as LiteAgentTag, layerWithWorkdir, type LiteAgentService } from "../agent/LiteAgent.js"
import type { BackgroundTaskInfo } from "../agent/MaintenanceLock.js"
import type { SendOptions } from "../agent/turn.js"
import { SessionPointer } from "../agent/SessionPointer.js"
import { fileToolsOptionsProblem } from "../tools/FileTools.js"
import { workdirProblem } from "../tools/Workspace.js"
import type { ModelProvider } from "../provider/ModelProvider.js"
import type { RestoreOptions, RestoreResult } from "../tools/TimeTravel.js"
import * as FileCheckpointer from "../backends/file/FileCheckpointer.js"
import { type PromiseCheckpointer, toPromiseCheckpointer } from "./checkpointer.js"
import { iterateStream, runForPromise, valueOrThrow } from "./run.js"

export interface LiteAgentOptions {
  /** Where the model comes from: `anthropic()` or `scripted(turns)` from `@lite-agent/sdk/provider`. */
  readonly model: ModelProvider
  /** Default: the provider's default model. */
  readonly modelName?: string
  /** The directory the file tools and `shell` work in. Default: `process.cwd()`. */
  readonly workdir?: string
  /** Where sessions persist. Default: `fileCheckpointer()` (closed with the agent). */
  readonly checkpointer?: PromiseCheckpointer
  /** `false`: no persistence at all; the session methods reject with `SessionsDisabledError`. */
  readonly sessions?: boolean
  readonly systemPrompt?: string
  /** Model calls per turn at most. Default 25. */
  readonly maxSteps?: number
  /** Default timeout of a foreground `shell` call. Default 120 000 ms. */
  readonly bashTimeoutMs?: number
  /** Timeout of background `shell` tasks. Default 30 minutes. */
  readonly backgroundTimeoutMs?: number
  /** Files larger than this are not snapshotted (restore then refuses them). Default 10 MiB. */
  readonly snapshotMaxBytes?: number
  /** The session to start in. Default: a new one. */
  readonly sessionId?: string
}

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
  /** Roll back to just before a checkpoint; the agent must be idle. Then `sessionId` is current. */
  restore(sessionId: string, seq: number, options?: RestoreOptions): Promise<RestoreResult>
  /** Background tasks not yet reported in their session's log. */
  backgroundTasks(): Promise<Array<BackgroundTaskInfo>>
  /** Every event from now on: persisted events, tool activity, background starts, `checkpoint_restore`. */
  subscribe(listener: (event: AgentEvent) => void): () => void
  /** Stop background tasks and release what the agent opened. Idempotent. */
  close(): Promise<void>
}

const checkOptions = (options: LiteAgentOptions) => {
  if (options.sessions === false && options.checkpointer !== undefined) {
    throw new ConfigurationError({ option: "checkpointer", detail: "sessions: false means no persistence; do not pass a checkpointer" })
  }
  // The same checks the layers apply when they are built, here at once.
  const problem = agentOptionsProblem(options) ?? fileToolsOptionsProblem(options) ??
    (options.workdir === undefined ? undefined : workdirProblem(options.workdir))
  if (problem !== undefined) throw problem
  if (typeof options.model?.layer !== "function") {
    throw new ConfigurationError({ option: "model", detail: "expected a provider such as anthropic() or scripted(turns)" })
  }
}

/** Create an agent. Invalid options throw `ConfigurationError`; nothing is opened until the first call. */
export const createLiteAgent = (options: LiteAgentOptions): LiteAgent => {
  checkOptions(options)
  const pointer = new SessionPointer(options.sessions !== false, options.sessionId)
  // A checkpointer the agent opened itself is closed with it; the caller's is left open.
  const ownCheckpointer = options.sessions === false
    ? toPromiseCheckpointer(MemoryCheckpointer.layer)
    : options.checkpointer === undefined
    ? toPromiseCheckpointer(FileCheckpointer.layer({}))
    : undefined
  const checkpointer = ownCheckpointer ?? options.checkpointer
  if (checkpointer === undefined) throw new ConfigurationError({ option: "checkpointer", detail: "no checkpointer" })
  const agentLayer = layerWithWorkdir(options.workdir ?? process.cwd(), {
    pointer,
    modelName: options.modelName ?? options.model.defaultModelName,
    ...(options.systemPrompt === undefined ? {} : { systemPrompt: options.systemPrompt }),
    ...(options.maxSteps === undefined ? {} : { maxSteps: options.maxSteps }),
    ...(options.bashTimeoutMs === undefined ? {} : { bashTimeoutMs: options.bashTimeoutMs }),
    ...(options.backgroundTimeoutMs === undefined ? {} : { backgroundTimeoutMs: options.backgroundTimeoutMs }),
    ...(options.snapshotMaxBytes === undefined ? {} : { snapshotMaxBytes: options.snapshotMaxBytes })
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
    resume: (sessionId) => orThrow(pointer.resume(sessionId)),
    clear: () => orThrow(pointer.clear()),
    listSessions: () => call((agent) => Effect.map(agent.listSessions(), (sessions) => [...sessions])),
    deleteSession: (sessionId) => call((agent) => agent.deleteSession(sessionId)),
    listCheckpoints: (sessionId) => call((agent) => Effect.map(agent.listCheckpoints(sessionId), (checkpoints) => [...checkpoints])),
    restore: (sessionId, seq, restoreOptions) => call((agent) => agent.restore(sessionId, seq, restoreOptions)),
    backgroundTasks: () => call((agent) => Effect.map(agent.backgroundTasks, (tasks) => [...tasks])),
    subscribe: (listener) => {
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

export interface QueryParams {
  readonly prompt: UserContent
  readonly options: LiteAgentOptions
}

/**
 * One turn, one-shot: create an agent with `options`, run `prompt` in its session
 * (`options.sessionId` to continue one), yield every event, close the agent.
 */
export async function* query({ options, prompt }: QueryParams): AsyncGenerator<AgentEvent, void, undefined> {
  const agent = createLiteAgent(options)
  try {
    yield* agent.run(prompt)
  } finally {
    await agent.close()
  }
}
