/**
 * The default backend: one append-only log file per session in a directory.
 *
 * Layout under `dir` (every session in a directory of its own, so no session's files can
 * be mistaken for another's):
 *
 * ```
 * <dir>/<sessionId>/log                   header line + one line per event (see format.ts)
 * <dir>/<sessionId>/torn-<ms>-<offset>    bytes cut off a torn tail, kept for inspection
 * <dir>/<sessionId>/log.tmp-<random>      a truncate or a first append in progress
 * <dir>/.objects/<ab>/<cdef…>             an object (a file snapshot, a stored argument) of every session
 * <dir>/.objects/tmp/, .objects/trash/    objects being written, and being collected (objectStore.ts)
 * <dir>/.trash/                           deleted sessions on their way out
 * ```
 *
 * Mutations hold the session lock (the `SessionLock` service: lock files in `<dir>/.locks`
 * by default, see lockFile.ts) for their whole duration, codec included, and confirm they still
 * hold it right before they write. Logs of recent sessions stay open between mutations, with
 * their committed head and end; after taking the lock a mutation reuses them only once it has
 * checked no one else can have changed them (openLogs.ts), and reads the tail again otherwise.
 * Objects are shared by every session of the directory (objectStore.ts).
 *
 * The parts: logRecords.ts (records to and from lines under the codec), logReader.ts (reading
 * a log), logRewrite.ts (truncating, atomic replaces, torn tails), lockedSessions.ts (a session's
 * mutations under its lock). This file resolves the options, composes them into the driver, and
 * builds the layers.
 */
import { homedir } from "node:os"
import { join } from "node:path"
import { Clock, Context, Deferred, Duration, Effect, Exit, Layer, Random, Schema, type Scope, Stream } from "effect"
import * as Checkpointer from "../../core/Checkpointer.js"
import { ConfigurationError, type CheckpointerError, StorageError } from "../../core/errors.js"
import { decodeOptions, NonEmptyString, numberAtLeast, oneOf, recognised, renamedOptions } from "../../core/internal/options.js"
import { storeQuotaFields } from "../../core/internal/storeQuota.js"
import { sessionIdProblem } from "../../core/sessionId.js"
import { errnoOf } from "../internal/causes.js"
import { CheckpointerIntegrity, type IntegrityReport } from "../../core/integrity.js"
import { isLogCodec, jsonCodec, LogCodec } from "./codec.js"
import { HEADER_VERSION_OFFSET, LOG_VERSION } from "./format.js"
import { makeLogChanges } from "./logChanges.js"
import { makeLockedSessions } from "./lockedSessions.js"
import { layerNode, LogFiles } from "./LogFiles.js"
import { makeLogReader } from "./logReader.js"
import { makeLogRecords } from "./logRecords.js"
import { makeLogRewrite } from "./logRewrite.js"
import { makeObjectStore } from "./objectStore.js"
import { makeOpenLogs } from "./openLogs.js"
import { type HeldSessionLock, SessionLock } from "./SessionLock.js"
import * as SessionLocks from "./SessionLock.js"

/** Options renamed since: the old name is refused with the new one. */
const renamed = renamedOptions({ lockTimeoutMs: "busyTimeoutMs" })

export const FileCheckpointerOptions = Schema.Struct({
  /**
   * Where session logs live. Default: `$LITE_AGENT_HOME/sessions`, or
   * `~/.lite-agent/sessions` — outside any project tree.
   */
  dir: Schema.optional(NonEmptyString),
  /**
   * `"normal"` (default): an acknowledged append survives a crash of the process.
   * `"full"`: it also survives an OS crash or power loss — data is flushed to disk
   * (fsync) before the append returns.
   */
  synchronous: Schema.optional(oneOf("normal", "full")),
  /**
   * How long a mutation waits for another process's session lock before `CheckpointBusyError`
   * (as the SQLite and Postgres backends' `busyTimeoutMs`). Default 10000.
   */
  busyTimeoutMs: Schema.optional(numberAtLeast(0)),
  /**
   * How long a lock holder that stops renewing its lock (paused, stalled, or on another
   * kernel and dead) keeps it; see the README's "Locking". A dead holder on this machine loses
   * it at once. Default 5000, at least 100; every process sharing the directory should agree.
   */
  lockLeaseMs: Schema.optional(numberAtLeast(SessionLocks.MIN_LEASE_MS)),
  ...storeQuotaFields
}).annotations(renamed)
export interface FileCheckpointerOptions extends Schema.Schema.Type<typeof FileCheckpointerOptions> {}

/** `FileCheckpointer.layer`'s options: the backend's and the codec the logs are written with. */
export const FileCheckpointerLayerOptions = Schema.Struct({
  ...FileCheckpointerOptions.fields,
  /** How each record is stored: `jsonCodec` (default), `gzipCodec()`, `aes256gcmCodec(key)` or your own. */
  codec: Schema.optional(recognised("a codec such as gzipCodec() or aes256gcmCodec(key)", isLogCodec))
}).annotations(renamed)
export interface FileCheckpointerLayerOptions extends Schema.Schema.Type<typeof FileCheckpointerLayerOptions> {}

export const defaultDirectory = (): string =>
  join(process.env["LITE_AGENT_HOME"] ?? join(homedir(), ".lite-agent"), "sessions")

const LOG_FILE = "log"
/** How often the followed logs' status is looked at (file-system events can be lost, or never come on network file systems). */
const LOG_STAT_POLL_MS = 500
/** How often a follower reads its log's tail with no signal at all: the last resort, as the status looks cover the rest. */
const FOLLOW_POLL_MS = 30_000
/** A session directory's watch is renewed this often: a deleted and re-created directory is a new one to watch. */
const WATCH_RENEW_MS = 30_000

interface ResolvedOptions {
  readonly dir: string
  readonly synchronous: "normal" | "full"
  readonly busyTimeoutMs: number
  readonly maxStoreBytes: number | undefined
}

const resolveOptions = (input: FileCheckpointerOptions): Effect.Effect<ResolvedOptions, ConfigurationError> =>
  Effect.map(decodeOptions(FileCheckpointerOptions, input, "file checkpointer options"), (options) => ({
    dir: options.dir ?? defaultDirectory(),
    synchronous: options.synchronous ?? "normal",
    busyTimeoutMs: options.busyTimeoutMs ?? 10_000,
    maxStoreBytes: options.maxStoreBytes
  }))

/** The service plus its integrity check, built on the injected file primitives and codec. */
export const make = (options: FileCheckpointerOptions = {}) =>
  Effect.gen(function*() {
    const files = yield* LogFiles
    const codec = yield* LogCodec
    const { busyTimeoutMs, dir, maxStoreBytes, synchronous } = yield* resolveOptions(options)
    const durable = synchronous === "full"

    // The directory must exist (it is created), be a directory, and be readable and writable;
    // one that exists but cannot be written (a read-only mount, no write permission) is opened for reading only.
    const prepared = yield* Effect.either(files.prepareDirectory(dir))
    const readOnlyDir = prepared._tag === "Left" ? yield* files.readableDirectory(dir) : undefined
    if (prepared._tag === "Left" && readOnlyDir === undefined) {
      return yield* new ConfigurationError({ option: "dir", detail: `${dir}: ${prepared.left.detail}` })
    }
    const realDir = prepared._tag === "Right" ? prepared.right : readOnlyDir!
    /** Every mutation of a directory open for reading only, refused before it takes a lock. */
    const writesRefused = prepared._tag === "Right" ? undefined : new StorageError({
      operation: "write",
      ...(prepared.left.cause === undefined ? {} : { code: errnoOf(prepared.left.cause) ?? "EACCES" }),
      detail: `${dir} is open for reading only (it cannot be written: ${prepared.left.detail}): appends, truncates and ` +
        `deletes are refused; make it writable by this process and open it again`
    })
    const trashDir = join(realDir, ".trash")
    // Leftovers of deletes interrupted by a crash; harmless if another process races us.
    if (writesRefused === undefined) yield* files.remove(trashDir).pipe(Effect.ignore)

    const sessionDir = (sessionId: string) => join(realDir, sessionId)
    const logPath = (sessionId: string) => join(realDir, sessionId, LOG_FILE)
    const randomSuffix = Effect.map(Random.nextInt, (n) => `${process.pid}-${Math.abs(n).toString(36)}`)
    const objects = makeObjectStore({ files, codec, directory: realDir, durable, tempSuffix: randomSuffix })

    const lock = yield* SessionLock
    const withSessionLock = <A, E>(sessionId: string, use: (held: HeldSessionLock) => Effect.Effect<A, E>) =>
      lock.withLock({ directory: realDir, sessionId, timeoutMs: busyTimeoutMs }, use)

    const logRecords = makeLogRecords(codec)
    const reader = makeLogReader({ files, logRecords, logPath })
    // The read handles it keeps open are closed with the checkpointer.
    yield* Effect.addFinalizer(() => reader.closeAll)
    const openLogs = yield* makeOpenLogs({ files, logPath, readTail: reader.inspect })
    /** Under the session's lock: one rename takes the whole session out of sight; removing the files can then fail harmlessly. */
    const remove = (held: HeldSessionLock, sessionId: string) =>
      Effect.gen(function*() {
        if ((yield* files.modifiedAt(sessionDir(sessionId))) === undefined) return
        const doomed = join(trashDir, `${sessionId}.${yield* randomSuffix}`)
        yield* files.makeDirectory(trashDir)
        yield* openLogs.forget(sessionId)
        yield* reader.forget(sessionId)
        yield* held.ensureHeld
        yield* files.rename(sessionDir(sessionId), doomed)
        if (durable) yield* files.flushDirectory(realDir)
        yield* files.remove(doomed).pipe(Effect.ignore)
      })

    const { existingSession, newSession } = makeLockedSessions({
      files,
      logRecords,
      rewrite: makeLogRewrite({ files, logRecords, durable, tempSuffix: randomSuffix }),
      directory: realDir,
      sessionDir,
      logPath,
      durable,
      read: reader.read,
      firstRecordOf: (sessionId) => Effect.map(reader.readPage(sessionId, 0, 1), (page) => page.records[0]),
      remove
    })

    const withSession: Checkpointer.CheckpointerDriver["withSession"] = (sessionId, use) =>
      writesRefused !== undefined ? Effect.fail(writesRefused) : withSessionLock(sessionId, (held) =>
        Effect.flatMap(openLogs.take(sessionId, held.inherited), (log) =>
          log === undefined
            ? use(newSession(held, sessionId))
            : Effect.ensuring(
              use(existingSession(held, sessionId, log)),
              openLogs.keep(sessionId, log, (kept) => held.leave?.(kept))
            )))

    /** A log this release now needs (its objects moved into the shared store): its header's version raised in place, one digit. */
    const markLog = (sessionId: string) =>
      withSessionLock(sessionId, (held) =>
        Effect.scoped(Effect.gen(function*() {
          const file = yield* files.open(logPath(sessionId), "update")
          if (file === undefined) return
          const digit = yield* file.readAt(HEADER_VERSION_OFFSET, 2)
          // A single digit then a comma: a header this library wrote, of an older version.
          if (digit.length < 2 || digit[1] !== 0x2c || digit[0]! < 0x30 || digit[0]! - 0x30 >= LOG_VERSION) return
          yield* held.ensureHeld
          yield* file.writeAt(HEADER_VERSION_OFFSET, Buffer.from(String(LOG_VERSION)))
          if (durable) yield* file.flush
        })))
    if (writesRefused === undefined) yield* objects.moveSessionBlobs(markLog, yield* Clock.currentTimeMillis)
    else yield* objects.findSessionBlobs

    const list = Effect.gen(function*() {
      const entries = yield* files.list(realDir)
      const sessions: Array<Checkpointer.SessionInfo> = []
      for (const id of entries) {
        if (sessionIdProblem(id) !== undefined) continue
        const mtime = yield* files.modifiedAt(logPath(id))
        if (mtime !== undefined) sessions.push({ id, mtime })
      }
      return sessions
    })

    const logBytes = (sessionId: string) =>
      Effect.scoped(Effect.flatMap(files.open(logPath(sessionId), "read"), (file) => (file === undefined ? Effect.succeed(0) : file.size)))

    /**
     * Wake-ups: from the file system's events (the session's directory while it exists, else
     * the sessions directory until the session appears; watches are renewed now and then, as a
     * deleted directory's watch goes quiet), and from a look at the followed logs' status every
     * `LOG_STAT_POLL_MS` (logChanges.ts), for events that are lost or never come.
     */
    const logChanges = makeLogChanges(logPath, LOG_STAT_POLL_MS)
    const watchFiles = files.watch
    /** Calls `onChange` for each file-system event of the session (or of its creation), watching again after a pause when a watch ends. */
    const fileEvents = (sessionId: string, onChange: () => void): Effect.Effect<never> =>
      watchFiles === undefined ? Effect.never : Effect.forever(Effect.gen(function*() {
        const exists = yield* Effect.orElseSucceed(files.modifiedAt(sessionDir(sessionId)), () => undefined)
        if (exists === undefined) {
          // Until the session's directory appears (or the watch ends): then watch the directory.
          yield* Effect.scoped(Effect.gen(function*() {
            const appeared = yield* Deferred.make<void>()
            const ended = yield* watchFiles(realDir, (name) => name === sessionId && Deferred.unsafeDone(appeared, Exit.void))
            yield* Effect.raceFirst(Deferred.await(appeared), ended)
          }))
          onChange()
        } else {
          // One timeout per watch, nothing per event but the callback: events are on a follower's hot path.
          yield* Effect.scoped(Effect.flatMap(watchFiles(sessionDir(sessionId), onChange), (ended) =>
            Effect.timeoutOption(ended, Duration.millis(WATCH_RENEW_MS))))
        }
        yield* Effect.sleep(Duration.millis(LOG_STAT_POLL_MS))
      }))
    const watch = (sessionId: string, onChange: () => void): Effect.Effect<void, never, Scope.Scope> =>
      Effect.zipRight(logChanges.subscribe(sessionId, onChange), Effect.asVoid(Effect.forkScoped(fileEvents(sessionId, onChange))))

    const service = yield* Checkpointer.make({
      withSession,
      read: reader.read,
      readPage: reader.readPage,
      head: (sessionId) => Effect.map(reader.version(sessionId), (current) => current.head),
      version: reader.version,
      list,
      objects: objects.objectStore,
      logBytes,
      watch,
      followPollMs: FOLLOW_POLL_MS
    }, { maxStoreBytes })

    const checkIntegrity: Effect.Effect<IntegrityReport, CheckpointerError> = Effect.gen(function*() {
      const sessions = yield* service.list()
      const problems: Array<string> = []
      const notes: Array<string> = []
      for (const { id } of sessions) {
        const outcome = yield* Effect.either(Stream.runDrain(service.read(id)))
        if (outcome._tag === "Left") problems.push(outcome.left.message)
        const torn = yield* Effect.either(Effect.scoped(Effect.gen(function*() {
          const file = yield* files.open(logPath(id), "read")
          if (file === undefined) return 0
          const tail = yield* reader.inspect(id, file)
          return tail.size - tail.committedEnd
        })))
        if (torn._tag === "Right" && torn.right > 0) {
          notes.push(`session "${id}": ${torn.right} bytes of torn tail (an interrupted append), cut on the next write`)
        }
      }
      const ok = problems.length === 0
      const summary = ok ? `${sessions.length} sessions checked, no damage` : `${problems.length} damaged`
      return { ok, detail: [summary, ...problems, ...notes].join("\n") }
    })

    return { service, integrity: { checkIntegrity } }
  })

/** Requires `LogFiles`, a `LogCodec` and a `SessionLock`: the seam for injected file systems, codecs and locks. */
export const layerWithoutDependencies = (
  options: FileCheckpointerOptions = {}
): Layer.Layer<
  Checkpointer.Checkpointer | CheckpointerIntegrity,
  CheckpointerError,
  LogFiles | LogCodec | SessionLock
> =>
  Layer.scopedContext(Effect.map(make(options), ({ integrity, service }) =>
    Context.make(Checkpointer.Checkpointer, service).pipe(Context.add(CheckpointerIntegrity, integrity))))

/**
 * The file backend on Node's file system, with `options.codec` (default: plain JSON lines) and
 * the lock-file `SessionLock` (`options.lockLeaseMs`).
 */
export const layer = (
  input: FileCheckpointerLayerOptions = {}
): Layer.Layer<Checkpointer.Checkpointer | CheckpointerIntegrity, CheckpointerError> =>
  Layer.unwrapEffect(Effect.map(
    decodeOptions(FileCheckpointerLayerOptions, input, "file checkpointer options"),
    ({ codec, ...options }) =>
      layerWithoutDependencies(options).pipe(
        Layer.provide(Layer.succeed(LogCodec, codec ?? jsonCodec)),
        Layer.provide(layerNode),
        Layer.provide(SessionLocks.layerNode(options.lockLeaseMs === undefined ? {} : { leaseMs: options.lockLeaseMs }))
      )
  ))
