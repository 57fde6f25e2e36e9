/**
 * The promise face of any `Checkpointer` layer: the contract's operations as promises
 * that reject with the library's own error instances.
 */
import { Chunk, Context, Effect, Layer, ManagedRuntime, type Runtime, Stream } from "effect"
import { fullToolInput } from "../core/fullToolInput.js"
import {
  Checkpointer,
  type FollowItem,
  type FollowOptions,
  type ReadOptions,
  type SessionInfo,
  type SessionStats,
  type SnapshotInfo,
  type DuOptions,
  type GcOptions,
  type GcReport,
  type PruneBranchesOptions,
  type PruneBranchesReport,
  type StoreUsage
} from "../core/Checkpointer.js"
import type { SessionEventInput } from "../core/encoding.js"
import { CheckpointerClosedError } from "../core/errors.js"
import { CheckpointerIntegrity, type IntegrityReport } from "../core/integrity.js"
import type { JsonValue, StoredEvent, ToolUseBlock } from "../core/events.js"
import { runForPromise } from "./run.js"

export interface PromiseCheckpointer {
  /** Append events (class instances or their encoded JSON); resolves to the new head. */
  append(sessionId: string, events: ReadonlyArray<SessionEventInput>, expectedHead?: number): Promise<number>
  /** Every stored event after `sinceSeq`, in seq order. */
  read(sessionId: string, options?: ReadOptions): Promise<Array<StoredEvent>>
  /** The same as `read`, streamed: long sessions never sit in memory whole. */
  readIterable(sessionId: string, options?: ReadOptions): AsyncIterable<StoredEvent>
  /**
   * The session's events after `sinceSeq`, then each event any process appends, as it lands
   * (`{ type: "event", stored }`); a truncate or a delete by anyone is `{ type: "reset", head,
   * generation }`, after which the current log follows from seq 1. It ends when `signal` aborts
   * or the loop breaks.
   */
  follow(sessionId: string, options?: FollowOptions & { readonly signal?: AbortSignal | undefined }): AsyncIterable<FollowItem>
  head(sessionId: string): Promise<number>
  list(): Promise<Array<SessionInfo>>
  delete(sessionId: string): Promise<void>
  truncate(sessionId: string, toSeq: number, expectedHead?: number): Promise<number>
  /** Events, log bytes, and the objects a session's events reference. */
  stats(sessionId: string): Promise<SessionStats>
  /** The bytes of a stored file snapshot, checked against their hash. */
  readSnapshot(sessionId: string, sha256: string): Promise<Uint8Array>
  /** A logged tool call's input as the model sent it, its stored arguments read back from the snapshot store. */
  toolInput(sessionId: string, block: ToolUseBlock): Promise<JsonValue>
  /** The stored objects the session's events reference, with their stored sizes. */
  listSnapshots(sessionId: string): Promise<Array<SnapshotInfo>>
  /**
   * Delete the objects no session's log references that were stored or touched longer ago than
   * `options.graceMs` (default one hour, at least five minutes): safe while other processes append.
   */
  gc(options?: GcOptions): Promise<GcReport>
  /**
   * What the store holds: objects and logs, each session's share (referenced, shared, its own), and
   * what no session references. Reads every log. `{ branches: true }`: each session's live branches too.
   */
  du(options?: DuOptions): Promise<StoreUsage>
  /**
   * Prune the branches restores, undos and switches left behind, last active at least `olderThanMs`
   * ago (unlabelled unless `keepLabeled: false`; none a fork shares), in every session or `sessionId`:
   * each session gets one `BranchesPruned` event; nothing is deleted until `gc`.
   */
  pruneBranches(options: PruneBranchesOptions): Promise<PruneBranchesReport>
  /** Release the backend. Idempotent; every later call rejects with `CheckpointerClosedError`. */
  close(): Promise<void>
  /** The same store as an Effect layer (for `createLiteAgent` and Effect programs). */
  readonly layer: Layer.Layer<Checkpointer, unknown>
}

export interface PromiseCheckpointerWithIntegrity extends PromiseCheckpointer {
  /** Verify every stored session without changing anything. */
  checkIntegrity(): Promise<IntegrityReport>
}

const makeFacade = <R, E>(layer: Layer.Layer<Checkpointer | R, E>) => {
  const runtime = ManagedRuntime.make(layer)
  let closed = false
  const runEffect = <A>(effect: Effect.Effect<A, unknown, Checkpointer | R>) =>
    closed ? Promise.reject(new CheckpointerClosedError()) : runForPromise(runtime, effect)
  // Looked up once: a call then runs its own effect alone.
  let service: Context.Tag.Service<Checkpointer> | undefined
  const run = <A>(use: (checkpointer: Context.Tag.Service<Checkpointer>) => Effect.Effect<A, unknown>) =>
    service !== undefined && !closed
      ? runForPromise(runtime, use(service))
      : runEffect(Effect.flatMap(Checkpointer, (found) => {
        service = found
        return use(found)
      }))

  const checkpointer: PromiseCheckpointer = {
    append: (sessionId, events, expectedHead) => run((c) => c.append(sessionId, events, expectedHead)),
    read: (sessionId, options) =>
      run((c) => Effect.map(Stream.runCollect(c.read(sessionId, options)), Chunk.toArray)),
    readIterable: (sessionId, options) => ({
      async *[Symbol.asyncIterator]() {
        if (closed) throw new CheckpointerClosedError()
        // Through runForPromise, so a layer that fails to build rejects with its own error.
        const base = await runForPromise(runtime, runtime.runtimeEffect)
        const service = Context.get(base.context as Context.Context<Checkpointer>, Checkpointer)
        const chunks = Stream.toAsyncIterableRuntime(Stream.chunks(service.read(sessionId, options)), base)
        for await (const chunk of chunks) yield* chunk
      }
    }),
    follow: (sessionId, options) => ({
      async *[Symbol.asyncIterator]() {
        if (closed) throw new CheckpointerClosedError()
        const { signal, ...followOptions } = options ?? {}
        if (signal?.aborted === true) return
        const base = await runForPromise(runtime, runtime.runtimeEffect)
        const service = Context.get(base.context as Context.Context<Checkpointer>, Checkpointer)
        const aborted = Effect.async<void>((resume) => {
          const onAbort = () => resume(Effect.void)
          signal?.addEventListener("abort", onAbort, { once: true })
          return Effect.sync(() => signal?.removeEventListener("abort", onAbort))
        })
        const items = service.follow(sessionId, followOptions).pipe(
          (stream) => (signal === undefined ? stream : Stream.interruptWhen(stream, aborted))
        )
        for await (const chunk of Stream.toAsyncIterableRuntime(Stream.chunks(items), base)) yield* chunk
      }
    }),
    head: (sessionId) => run((c) => c.head(sessionId)),
    list: () => run((c) => Effect.map(c.list(), (sessions) => [...sessions])),
    delete: (sessionId) => run((c) => c.delete(sessionId)),
    truncate: (sessionId, toSeq, expectedHead) => run((c) => c.truncate(sessionId, toSeq, expectedHead)),
    stats: (sessionId) => run((c) => c.stats(sessionId)),
    readSnapshot: (sessionId, sha256) => run((c) => c.readSnapshot(sessionId, sha256)),
    toolInput: (sessionId, block) => run((c) => fullToolInput(c, sessionId, block)),
    listSnapshots: (sessionId) => run((c) => Effect.map(c.listSnapshots(sessionId), (blobs) => [...blobs])),
    gc: (options) => run((c) => c.gc(options)),
    du: (options) => run((c) => c.du(options)),
    pruneBranches: (options) => run((c) => c.pruneBranches(options)),
    close: async () => {
      if (closed) return
      closed = true
      await runtime.dispose()
    },
    layer: Layer.effect(
      Checkpointer,
      Effect.flatMap(
        Effect.suspend((): Effect.Effect<Runtime.Runtime<Checkpointer | R>, unknown> =>
          closed ? Effect.fail(new CheckpointerClosedError()) : runtime.runtimeEffect
        ),
        (base) => Effect.succeed(Context.get(base.context as Context.Context<Checkpointer>, Checkpointer))
      )
    )
  }
  return { checkpointer, runEffect }
}

export const toPromiseCheckpointer = <E>(layer: Layer.Layer<Checkpointer, E>): PromiseCheckpointer =>
  makeFacade(layer).checkpointer

export const toPromiseCheckpointerWithIntegrity = <E>(
  layer: Layer.Layer<Checkpointer | CheckpointerIntegrity, E>
): PromiseCheckpointerWithIntegrity => {
  const { checkpointer, runEffect } = makeFacade<CheckpointerIntegrity, E>(layer)
  return {
    ...checkpointer,
    checkIntegrity: () => runEffect(Effect.flatMap(CheckpointerIntegrity, (integrity) => integrity.checkIntegrity))
  }
}
