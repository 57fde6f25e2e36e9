/**
 * The storage contract every backend provides. Backends implement a small driver of
 * primitives; `make` adds everything they share — argument validation, event validation
 * and encoding, seq allocation, expected-head checks, decoding with contiguity checks, the
 * snapshot store's rules and the closed state — so those rules are written once.
 *
 * The object store: file bytes never enter the log. `append` takes events holding bytes
 * inline (a `content` file state, a tool call's large argument: each kind's blob lens says
 * where), stores the bytes as objects (by SHA-256, once for every session of the store however
 * often they recur) and logs a reference instead — objects first, then the log, so a logged
 * reference always names a stored object and a crash in between leaves only an unreferenced
 * object, which `gc` removes once no writer can be about to reference it
 * (internal/objectCollection.ts).
 */
import { Context, Effect, Either, Schema, type Scope, Stream } from "effect"
import type { SessionEventInput } from "./encoding.js"
import {
  CheckpointConflictError,
  CheckpointerClosedError,
  type CheckpointerError,
  type ConfigurationError,
  InvalidEventError,
  InvalidSeqError,
  InvalidSessionIdError,
  SnapshotBlobError
} from "./errors.js"
import type { StoredEvent } from "./events.js"
import * as ForkedAppends from "./internal/forkedAppends.js"
import * as ForkedReads from "./internal/forkedReads.js"
import * as Manifests from "./internal/manifests.js"
import * as ForkOrigins from "./internal/forkOrigins.js"
import { normalizeEvents } from "./internal/eventCodec.js"
import { collect, type GcOptions, type GcReport, type StoreUsage, usage } from "./internal/objectCollection.js"
import { type DuOptions, usageByBranch } from "./internal/branchUsage.js"
import { pruneBranches, type PruneBranchesOptions, type PruneBranchesReport } from "./pruneBranches.js"
import { blobReferences } from "./internal/blobs.js"
import { sha256Hex } from "./internal/sha256.js"
import { makeKeyedSignals } from "./internal/keyedSignals.js"
import { decodeOptions, PositiveMilliseconds } from "./internal/options.js"
import type { CheckpointerDriver, SessionInfo, SessionVersion, SnapshotInfo } from "./CheckpointerDriver.js"
import { type FollowItem, followSession } from "./follow.js"

import { sessionIdProblem } from "./sessionId.js"
import * as StoreQuota from "./internal/storeQuota.js"

export type { FollowItem } from "./follow.js"
export { type BranchUsage, DEFAULT_GRACE_MS, type GcOptions, type GcReport, MIN_GRACE_MS, type ObjectBytes, type SessionUsage, type StoreUsage } from "./internal/objectCollection.js"
export { DuOptions } from "./internal/branchUsage.js"
export { type QuotaUsage, quotaReason, StoreQuotaOptions, type StoreRoom } from "./internal/storeQuota.js"
export { PruneBranchesOptions, type PruneBranchesReport, type SessionPruning } from "./pruneBranches.js"
export {
  type CheckpointerDriver,
  type LockedSession,
  NO_GENERATION,
  type ObjectStore,
  type RecordPage,
  type SessionInfo,
  type SessionVersion,
  type SnapshotBlob,
  type SnapshotInfo,
  type StoredObject
} from "./CheckpointerDriver.js"

/** What a session costs in storage. */
export interface SessionStats {
  /** Events in the log (its head). */
  readonly events: number
  /** Bytes the log takes as stored. */
  readonly logBytes: number
  /** Bytes the objects its events reference take as stored (after the codec), shared with other sessions or not. */
  readonly snapshotBytes: number
  /** Objects its events reference. */
  readonly snapshots: number
}

export const ReadOptions = Schema.Struct({
  /** Return only the events after this seq (exclusive). Default 0: all of them. */
  sinceSeq: Schema.optional(Schema.Unknown)
})
export interface ReadOptions {
  /** Return only the events after this seq (exclusive). Default 0: all of them. */
  readonly sinceSeq?: number | undefined
}

export interface CheckpointerService {
  /**
   * Append `events` in one atomic step and return the new head. With `expectedHead`, fails
   * with `CheckpointConflictError` (writing nothing) unless the head is exactly that.
   * `append(id, [])` writes nothing, creates nothing and returns the current head, still
   * checking `expectedHead` — a cheap compare.
   */
  readonly append: (
    sessionId: string,
    events: ReadonlyArray<SessionEventInput>,
    expectedHead?: number
  ) => Effect.Effect<number, CheckpointerError>
  /** The stored events after `sinceSeq`, in seq order, streamed. */
  readonly read: (sessionId: string, options?: ReadOptions) => Stream.Stream<StoredEvent, CheckpointerError>
  /** The last seq; 0 for an empty or unknown session. */
  readonly head: (sessionId: string) => Effect.Effect<number, CheckpointerError>
  /** The head and the generation (changed by every truncate and delete, never by an append). */
  readonly version: (sessionId: string) => Effect.Effect<SessionVersion, CheckpointerError>
  /** Every existing session, most recently active first. */
  readonly list: () => Effect.Effect<ReadonlyArray<SessionInfo>, CheckpointerError>
  /** Remove a session and everything stored for it. Deleting an unknown session does nothing. */
  readonly delete: (sessionId: string) => Effect.Effect<void, CheckpointerError>
  /**
   * Drop every event after `toSeq` and return the new head (`toSeq`). `toSeq` must be
   * between 0 and the head; `toSeq === head` changes nothing; a larger one fails with
   * `InvalidSeqError`. Truncating to 0 leaves an existing, empty session. Objects only the
   * dropped events referenced stay until `gc`.
   */
  readonly truncate: (
    sessionId: string,
    toSeq: number,
    expectedHead?: number
  ) => Effect.Effect<number, CheckpointerError>
  /** Events, log bytes, and the objects its events reference (zeros for an unknown session). */
  readonly stats: (sessionId: string) => Effect.Effect<SessionStats, CheckpointerError>
  /**
   * The bytes of a stored object (a file snapshot, a stored argument) checked against their hash
   * (`SnapshotBlobError` when missing or damaged). Objects are shared by every session of the
   * store: `sessionId` is the session whose event names it, for the error.
   */
  readonly readSnapshot: (sessionId: string, sha256: string) => Effect.Effect<Uint8Array, CheckpointerError>
  /** The stored objects the session's events (as read: a fork's include those it shares) reference. */
  readonly listSnapshots: (sessionId: string) => Effect.Effect<ReadonlyArray<SnapshotInfo>, CheckpointerError>
  /**
   * Delete the objects no session's log references (every branch, every fork) that were stored
   * or touched longer ago than the grace period: safe while other processes append (see
   * internal/objectCollection.ts).
   */
  readonly gc: (options?: GcOptions) => Effect.Effect<GcReport, CheckpointerError>
  /**
   * What the store holds: its objects and logs, each session's share — the objects it references,
   * those it shares with other sessions and those only it holds (what deleting it frees) — and
   * what no session references (what `gc` frees once past the grace period). Reads every log.
   * With `branches: true`, each session's live branches too: what each references and holds alone.
   */
  readonly du: (options?: DuOptions) => Effect.Effect<StoreUsage, CheckpointerError>
  /**
   * Prune the branches restores, undos and switches left behind, last active at least
   * `olderThanMs` ago (unlabelled, unless `keepLabeled: false`; none a fork shares), in every
   * session or `sessionId`: one `BranchesPruned` appended to each (see pruneBranches.ts).
   */
  readonly pruneBranches: (options: PruneBranchesOptions) => Effect.Effect<PruneBranchesReport, CheckpointerError>
  /**
   * The room the store's quota (`maxStoreBytes`) leaves for new content, and which of `hashes`
   * the store holds already; undefined without a quota. Asked by the writers that stop storing
   * new content past the quota (see internal/storeQuota.ts); appends are never refused for it.
   */
  readonly storeRoom: (hashes: ReadonlyArray<string>) => Effect.Effect<StoreQuota.StoreRoom | undefined, CheckpointerError>
  /**
   * The session's events after `sinceSeq`, then each event any process appends, as it lands —
   * a stream that ends only when its consumer stops. A truncate, or a delete and re-creation,
   * by anyone is a `reset` item, after which the events from seq 1 of the current log follow:
   * never a silent mix of the old and the new log. Each look reads only the new events.
   */
  readonly follow: (sessionId: string, options?: FollowOptions) => Stream.Stream<FollowItem, CheckpointerError>
}

export const FollowOptions = Schema.Struct({
  /** Start after this seq (exclusive). Default 0: every event. */
  sinceSeq: Schema.optional(Schema.Unknown),
  /** How often to look when no change was signalled. Default: the backend's (1000 ms for most). */
  pollMs: Schema.optional(PositiveMilliseconds),
  /**
   * The generation the follower's events up to `sinceSeq` belong to (from `version`): a log
   * rewritten since — even one grown back past `sinceSeq` — is then a `reset` first.
   */
  generation: Schema.optional(Schema.String)
})
export interface FollowOptions {
  /** Start after this seq (exclusive). Default 0: every event. */
  readonly sinceSeq?: number | undefined
  /** How often to look when no change was signalled. Default: the backend's (1000 ms for most). */
  readonly pollMs?: number | undefined
  /**
   * The generation the follower's events up to `sinceSeq` belong to (from `version`): a log
   * rewritten since — even one grown back past `sinceSeq` — is then a `reset` first.
   */
  readonly generation?: string | undefined
}

export class Checkpointer extends Context.Tag("@lite-agent/core/Checkpointer")<Checkpointer, CheckpointerService>() {}

const SHA256_HEX = /^[0-9a-f]{64}$/

/**
 * Events per emitted chunk, whatever size the backend reads in: some stream operators
 * (`Stream.runFold` among them) recurse once per element of a chunk.
 */
const READ_CHUNK_EVENTS = 256

/** A seq argument (`sinceSeq`, `toSeq`, a checkpoint's seq) must be a non-negative integer. */
export const checkSeqArgument = (
  sessionId: string,
  argument: string,
  value: number | undefined
): Effect.Effect<void, InvalidSeqError> =>
  value === undefined || (Number.isSafeInteger(value) && value >= 0)
    ? Effect.void
    : Effect.fail(new InvalidSeqError({ sessionId, argument, value, reason: "must be a non-negative integer" }))

const checkExpectedHead = (
  sessionId: string,
  expected: number | undefined,
  actual: number
): Effect.Effect<void, CheckpointConflictError> =>
  expected === undefined || expected === actual
    ? Effect.void
    : Effect.fail(new CheckpointConflictError({ sessionId, expected, actual }))

const byMostRecentActivity = (a: SessionInfo, b: SessionInfo): number =>
  b.mtime.getTime() - a.mtime.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)

/**
 * The `Checkpointer` service on a backend's driver, refusing every call with
 * `CheckpointerClosedError` once its scope has closed; `options.maxStoreBytes` gives the store a
 * quota (`ConfigurationError` when it is not a non-negative integer).
 */
export function make(driver: CheckpointerDriver): Effect.Effect<CheckpointerService, never, Scope.Scope>
export function make(driver: CheckpointerDriver, options: StoreQuota.StoreQuotaOptions): Effect.Effect<CheckpointerService, ConfigurationError, Scope.Scope>
export function make(driver: CheckpointerDriver, options?: StoreQuota.StoreQuotaOptions) {
  return options === undefined
    ? makeService(driver, undefined)
    : Effect.flatMap(decodeOptions(StoreQuota.StoreQuotaOptions, options, "store options"), (valid) => makeService(driver, valid.maxStoreBytes))
}

const makeService = (backend: CheckpointerDriver, maxStoreBytes: number | undefined) =>
  Effect.gen(function*() {
    const quota = StoreQuota.make(backend, maxStoreBytes)
    // Every write goes through the quota's driver, which counts what is stored.
    const driver = quota.driver
    // A plain flag, not a Ref: it is read on every call, and only the finalizer sets it.
    let closed = false
    // Which sessions this checkpointer changed, for its followers (other processes' changes come
    // from `driver.watch`). Keyed: an append wakes its own session's followers only.
    const changed = makeKeyedSignals()
    // Followers look once more when it closes, and hear that it did.
    yield* Effect.addFinalizer(() => Effect.sync(() => {
      closed = true
      changed.signalAll()
    }))
    const signalChange = (sessionId: string) => <A, E>(effect: Effect.Effect<A, E>) =>
      Effect.tap(effect, () => (changed.size() === 0 ? Effect.void : Effect.sync(() => changed.signal(sessionId))))
    const ensureOpen = Effect.suspend(() => (closed ? Effect.fail(new CheckpointerClosedError()) : Effect.void))
    /** `effect`, once the checkpointer is known open and the session id valid (checked synchronously: every call pays it). */
    const guard = <A>(sessionId: string, effect: Effect.Effect<A, CheckpointerError>): Effect.Effect<A, CheckpointerError> =>
      Effect.suspend(() => {
        if (closed) return Effect.fail(new CheckpointerClosedError())
        const problem = sessionIdProblem(sessionId)
        return problem === undefined ? effect : Effect.fail(new InvalidSessionIdError({ sessionId: String(sessionId), reason: problem }))
      })

    // Forks: a session whose first event is a `SessionForked` reads as its source's first events
    // followed by its own, shifted (see forkOrigins.ts); every seq below is the session's as read.
    const forks = ForkOrigins.make(driver)
    const viewHead = forks.head
    const manifests = Manifests.make(driver)
    const { appendOwn, startFork } = ForkedAppends.make(driver, forks, manifests, signalChange)
    const { pageView, readView } = ForkedReads.make(driver, forks, manifests)
    const append: CheckpointerService["append"] = (sessionId, inputs, expectedHead) =>
      guard(
        sessionId,
        // Plain checks first, one Effect step at the end: this is every caller's hot path.
        Effect.suspend((): Effect.Effect<number, CheckpointerError> => {
          if (expectedHead !== undefined && !(Number.isSafeInteger(expectedHead) && expectedHead >= 0)) {
            return checkSeqArgument(sessionId, "expectedHead", expectedHead).pipe(Effect.as(0))
          }
          const normalized = normalizeEvents(sessionId, inputs)
          if (Either.isLeft(normalized)) return Effect.fail(normalized.left)
          const events = normalized.right
          if (events.length === 0) {
            return Effect.flatMap(viewHead(sessionId), (head) => Effect.as(checkExpectedHead(sessionId, expectedHead, head), head))
          }
          const forkAt = events.findIndex((event) => event._tag === "SessionForked")
          if (forkAt > 0) {
            return Effect.fail(new InvalidEventError({ sessionId, index: forkAt, detail: "a SessionForked is only the first event of a new session" }))
          }
          if (forkAt === 0) return startFork(sessionId, events, expectedHead)
          return Effect.flatMap(forks.of(sessionId), (origin) => appendOwn(sessionId, events, expectedHead, origin))
        })
      )

    const read: CheckpointerService["read"] = (sessionId, options) => {
      const sinceSeq = options?.sinceSeq ?? 0
      // An unknown key (`since`, `fromSeq`) must not silently read everything; the seq itself is checked as every seq argument.
      const checked = options === undefined
        ? checkSeqArgument(sessionId, "sinceSeq", sinceSeq)
        : Effect.zipRight(decodeOptions(ReadOptions, options, "read options"), checkSeqArgument(sessionId, "sinceSeq", sinceSeq))
      return Stream.unwrap(
        guard(sessionId, checked).pipe(
          // Suspended: each run of the stream counts seqs from the start again.
          Effect.as(Stream.suspend(() => Stream.rechunk(readView(sessionId, sinceSeq, 0), READ_CHUNK_EVENTS)))
        )
      )
    }

    const truncate: CheckpointerService["truncate"] = (sessionId, toSeq, expectedHead) =>
      guard(
        sessionId,
        Effect.gen(function*() {
          yield* checkSeqArgument(sessionId, "toSeq", toSeq)
          yield* checkSeqArgument(sessionId, "expectedHead", expectedHead)
          const origin = yield* forks.of(sessionId)
          const shared = origin?.at ?? 0
          if (origin !== undefined && toSeq <= shared) {
            return yield* new InvalidSeqError({
              sessionId,
              argument: "toSeq",
              value: toSeq,
              reason: `is not past the fork point (${shared}): a fork keeps the events it shares with "${origin.from}" and its SessionForked`
            })
          }
          const cut = yield* driver.withSession(sessionId, (session) =>
            Effect.gen(function*() {
              const head = session.head === 0 ? 0 : session.head + shared
              yield* checkExpectedHead(sessionId, expectedHead, head)
              if (toSeq > head) {
                return yield* new InvalidSeqError({ sessionId, argument: "toSeq", value: toSeq, reason: `is past the head (${head})` })
              }
              if (toSeq === head) return false
              // Forks read the events they share from here: none may lose one, nor the record
              // that names it (how the session finds its forks). Looked at inside the exclusion:
              // a fork made meanwhile is either found or checks its source once it exists.
              yield* forks.refuseShared(sessionId, session, "truncate", (fork) => fork.namedAt + shared > toSeq)
              yield* session.truncate(toSeq - shared)
              return true
            })).pipe(signalChange(sessionId))
          if (cut && toSeq === 0) forks.forget(sessionId)
          return toSeq
        })
      )

    const readSnapshot: CheckpointerService["readSnapshot"] = (sessionId, sha256) =>
      guard(
        sessionId,
        Effect.gen(function*() {
          if (typeof sha256 !== "string" || !SHA256_HEX.test(sha256)) {
            return yield* new SnapshotBlobError({
              sessionId,
              sha256: String(sha256),
              reason: "missing",
              detail: "not a SHA-256 digest (64 lowercase hex digits)"
            })
          }
          const data = yield* driver.objects.read(sha256)
          if (data === undefined) {
            return yield* new SnapshotBlobError({ sessionId, sha256, reason: "missing", detail: "no such object in the store" })
          }
          if (sha256Hex(data) !== sha256) {
            return yield* new SnapshotBlobError({
              sessionId,
              sha256,
              reason: "damaged",
              detail: `its ${data.length} bytes do not match the hash they are stored under`
            })
          }
          return data
        })
      )

    /** The stored objects the session's events, as read, reference. */
    const referencedObjects = (sessionId: string) =>
      Effect.flatMap(
        Stream.runFold(readView(sessionId, 0, 0), new Set<string>(), (hashes, { event }) => {
          for (const sha256 of blobReferences(event)) hashes.add(sha256)
          return hashes
        }),
        (hashes) => (hashes.size === 0 ? Effect.succeed([]) : driver.objects.sizes([...hashes]))
      )

    const service: CheckpointerService = {
      append,
      read,
      readSnapshot,
      listSnapshots: (sessionId) => guard(sessionId, referencedObjects(sessionId)),
      gc: (options) => Effect.zipRight(ensureOpen, Effect.ensuring(collect(driver, manifests, options), Effect.sync(quota.forget))),
      du: (options) => Effect.zipRight(ensureOpen, usageByBranch(driver, manifests, (id) => readView(id, 0, 0), usage(driver, manifests, quota), options)),
      storeRoom: (hashes) => Effect.zipRight(ensureOpen, quota.room(hashes)),
      pruneBranches: (options) => Effect.zipRight(ensureOpen, pruneBranches(service, options)),
      head: (sessionId) => guard(sessionId, viewHead(sessionId)),
      version: (sessionId) =>
        guard(
          sessionId,
          Effect.flatMap(driver.version(sessionId), (version) =>
            Effect.map(forks.under(sessionId, version.generation), (origin) =>
              origin === undefined || version.head === 0 ? version : { head: version.head + origin.at, generation: version.generation }))
        ),
      stats: (sessionId) =>
        guard(
          sessionId,
          Effect.map(
            Effect.all([viewHead(sessionId), driver.logBytes(sessionId), referencedObjects(sessionId)]),
            ([events, logBytes, blobs]): SessionStats => ({
              events,
              logBytes,
              snapshotBytes: blobs.reduce((total, blob) => total + blob.storedBytes, 0),
              snapshots: blobs.length
            })
          )
        ),
      list: () =>
        ensureOpen.pipe(Effect.zipRight(driver.list), Effect.map((sessions) => [...sessions].sort(byMostRecentActivity))),
      delete: (sessionId) =>
        guard(
          sessionId,
          Effect.gen(function*() {
            yield* driver.withSession(sessionId, (session) =>
              Effect.gen(function*() {
                // Forks read their first events from this session: it goes only once they have.
                // Decided inside the exclusion, so a fork made meanwhile is found or finds this gone.
                yield* forks.refuseShared(sessionId, session, "delete", () => true)
                yield* session.remove
              }))
            forks.forget(sessionId)
          }).pipe(signalChange(sessionId))
        ),
      truncate,
      follow: (sessionId, options) => {
        const sinceSeq = options?.sinceSeq ?? 0
        const checked = Effect.zipRight(
          decodeOptions(FollowOptions, options, "follow options"),
          checkSeqArgument(sessionId, "sinceSeq", sinceSeq)
        )
        return Stream.unwrap(
          guard(sessionId, checked).pipe(
            Effect.as(
              followSession(
                {
                  readPage: (id, after, generation) => guard(id, pageView(id, after, generation, 0)),
                  wakeUps: (id, wake) =>
                    Effect.zipRight(changed.subscribe(id, wake), driver.watch === undefined ? Effect.void : driver.watch(id, wake))
                },
                sessionId,
                sinceSeq,
                options?.pollMs ?? driver.followPollMs ?? 1000,
                options?.generation
              )
            )
          )
        )
      }
    }
    return service
  })
