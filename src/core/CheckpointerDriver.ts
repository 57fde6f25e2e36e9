/**
 * What a backend implements: the primitives of the storage contract. `make` (Checkpointer.ts)
 * builds the whole `Checkpointer` service on a driver, so the rules every backend shares are
 * written once; a backend writes only these.
 */
import type { Effect, Scope, Stream } from "effect"
import type { CheckpointerError } from "./errors.js"
import type { StoredEventEncoded } from "./events.js"

/** An object of the store: the SHA-256 of its content and the bytes it takes as stored (after the codec). */
export interface SnapshotInfo {
  readonly sha256: string
  readonly storedBytes: number
}

/** Content for the object store, under the hash of its bytes. */
export interface SnapshotBlob {
  readonly sha256: string
  readonly data: Uint8Array
}

/** A stored object, and when it was last stored or touched (epoch ms of the clock `make` passes in). */
export interface StoredObject extends SnapshotInfo {
  readonly touchedMs: number
}

/**
 * The store's objects: content-addressed bytes (file states, large tool-call arguments) kept
 * once for every session of the store. Sessions reference objects by hash from their events;
 * `make` decides which objects are garbage (see objectCollection.ts) — a backend only stores,
 * touches and deletes them, each atomically with respect to the others.
 *
 * Every object carries the time it was last stored or touched, as `make` gives it (`nowMs`):
 * the collector deletes only objects untouched since a cutoff, so a writer that touched an
 * object just before logging a reference to it never loses it.
 */
export interface ObjectStore {
  /**
   * Store each object not stored yet, durably (as durably as `append` stores records) before
   * returning, and touch (`nowMs`) each one already stored. A reader never sees part of an
   * object; two processes putting the same object at once both succeed.
   */
  readonly put: (objects: ReadonlyArray<SnapshotBlob>, nowMs: number) => Effect.Effect<void, CheckpointerError>
  /** Touch (`nowMs`) each of these objects that is stored; give back the hashes of those that are not. */
  readonly touch: (hashes: ReadonlyArray<string>, nowMs: number) => Effect.Effect<ReadonlyArray<string>, CheckpointerError>
  /** An object's bytes as they were put (the backend's own encoding undone), or undefined when it is not stored. */
  readonly read: (sha256: string) => Effect.Effect<Uint8Array | undefined, CheckpointerError>
  /** The stored objects among these hashes, with their stored sizes. */
  readonly sizes: (hashes: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<SnapshotInfo>, CheckpointerError>
  /** Every stored object. */
  readonly list: Effect.Effect<ReadonlyArray<StoredObject>, CheckpointerError>
  /**
   * Delete each of these objects whose touched time is still before `cutoffMs`, decided
   * atomically with respect to `put` and `touch` (an object touched meanwhile stays), and any
   * leftovers of writes or deletes a crash cut short; give back the objects deleted.
   */
  readonly deleteUntouched: (hashes: ReadonlyArray<string>, cutoffMs: number) => Effect.Effect<ReadonlyArray<SnapshotInfo>, CheckpointerError>
}

/**
 * Where a session's log stands: its head, and its generation — an opaque value that every
 * truncate and every delete (then re-creation) changes, and appends never do. Two equal
 * generations with heads h1 <= h2 mean the first log is a prefix of the second: what a cache
 * of the fold needs to fold only the new events.
 */
export interface SessionVersion {
  readonly head: number
  readonly generation: string
}

/** The generation of a session that does not exist. */
export const NO_GENERATION = "none"

export interface SessionInfo {
  readonly id: string
  /** The session's last activity (append or truncate). */
  readonly mtime: Date
}

/** Some of a session's records and its version, read in one snapshot: the records belong to the log of that generation. */
export interface RecordPage {
  /** Records in their JSON form, in seq order. */
  readonly records: ReadonlyArray<unknown>
  readonly head: number
  /** The generation the records were read from (`NO_GENERATION` when the session does not exist). */
  readonly generation: string
}

/** Exclusive write access to one session, handed to `make` by a driver. */
export interface LockedSession {
  /** The real current head, read after the exclusion was taken. */
  readonly head: number
  /** The session's generation, read with the head (`NO_GENERATION` when it does not exist yet). */
  readonly generation: string
  /** Store these records (seqs head+1…head+n, already encoded to JSON) atomically. */
  readonly append: (records: ReadonlyArray<StoredEventEncoded>) => Effect.Effect<void, CheckpointerError>
  /** Drop every record after `toSeq` (< head) atomically. */
  readonly truncate: (toSeq: number) => Effect.Effect<void, CheckpointerError>
  /** Every stored record of the session, as `read` gives them, seen from inside the exclusion (built on demand: most holders never read). */
  readonly records: () => Stream.Stream<unknown, CheckpointerError>
  /**
   * The first stored record of another session (undefined when it has none), read from inside
   * this exclusion: whether a session this one names is its fork is decided in the same
   * exclusion as the delete or truncate it forbids. A backend holding one connection reads it there.
   */
  readonly firstRecordOf: (otherSessionId: string) => Effect.Effect<unknown, CheckpointerError>
  /** Remove the whole session's log atomically (the objects it referenced stay for the collector); nothing for a session that does not exist. */
  readonly remove: Effect.Effect<void, CheckpointerError>
}

/** The primitives a backend implements. Session ids reaching a driver are already valid. */
export interface CheckpointerDriver {
  /** Run `use` while holding the session's write exclusion (in-process and, where it applies, cross-process). */
  readonly withSession: <A>(
    sessionId: string,
    use: (session: LockedSession) => Effect.Effect<A, CheckpointerError>
  ) => Effect.Effect<A, CheckpointerError>
  /** The stored records after `sinceSeq` in seq order, in their JSON form. */
  readonly read: (sessionId: string, sinceSeq: number) => Stream.Stream<unknown, CheckpointerError>
  /**
   * The first records after `sinceSeq` (at least one when there are any, at most `maxRecords`)
   * with the session's version, in one snapshot (none, and the version, when nothing is new):
   * a follower's look, in one step and without a stream. `generation`, when given, is the
   * generation the follower's records up to `sinceSeq` belong to: a driver that already holds
   * that log's next records (PostgreSQL: from the change notification) may answer with them and
   * the version they were committed at, without a read — the seqs of one generation never change.
   */
  readonly readPage: (
    sessionId: string,
    sinceSeq: number,
    maxRecords: number,
    generation?: string
  ) => Effect.Effect<RecordPage, CheckpointerError>
  readonly head: (sessionId: string) => Effect.Effect<number, CheckpointerError>
  readonly version: (sessionId: string) => Effect.Effect<SessionVersion, CheckpointerError>
  readonly list: Effect.Effect<ReadonlyArray<SessionInfo>, CheckpointerError>
  /** The store's objects, shared by every session. */
  readonly objects: ObjectStore
  /** Bytes the session's log takes as stored (0 when unknown). */
  readonly logBytes: (sessionId: string) => Effect.Effect<number, CheckpointerError>
  /**
   * Calls `onChange` whenever the session may have been changed by another process, for as
   * long as the scope lasts (spurious or merged calls are fine: each only makes a follower
   * look; `onChange` is cheap and never throws). Without it, and for what it misses, followers
   * poll. Changes made through this checkpointer are signalled by `make` itself.
   */
  readonly watch?: (sessionId: string, onChange: () => void) => Effect.Effect<void, never, Scope.Scope>
  /** How often a follower looks when no signal came. Default 1000 ms. */
  readonly followPollMs?: number
}
