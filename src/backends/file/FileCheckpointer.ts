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
 * <dir>/<sessionId>/blobs/<sha256>        a snapshot blob (blobs/.tmp-<random>: one being written)
 * <dir>/.trash/                           deleted sessions on their way out
 * ```
 *
 * Mutations hold the session lock (the `SessionLock` service: lock files in `<dir>/.locks`
 * by default, see lockFile.ts) for their whole duration, codec included, and confirm they still
 * hold it right before they write. Logs of recent sessions stay open between mutations, with
 * their committed head and end; after taking the lock a mutation reuses them only once it has
 * checked no one else can have changed them (openLogs.ts), and reads the tail again otherwise.
 * Snapshot blobs live beside the log (blobStore.ts).
 */
import { randomBytes } from "node:crypto"
import { homedir } from "node:os"
import { join } from "node:path"
import { Chunk, Context, Duration, Effect, Layer, Option, Random, Schedule, Schema, Stream } from "effect"
import * as Checkpointer from "../../core/Checkpointer.js"
import {
  CheckpointIntegrityError,
  CodecError,
  ConfigurationError,
  type CheckpointerError,
  SchemaVersionError,
  StorageError
} from "../../core/errors.js"
import type { StoredEventEncoded } from "../../core/events.js"
import { decodeOptions, NonEmptyString, numberAtLeast, oneOf, recognised, renamedOptions } from "../../core/internal/options.js"
import { sessionIdProblem } from "../../core/sessionId.js"
import { CheckpointerIntegrity, type IntegrityReport } from "../../core/integrity.js"
import { makeBlobStore } from "./blobStore.js"
import { isLogCodec, jsonCodec, LogCodec } from "./codec.js"
import { findCommittedEnd, ForwardScanner, headerLine, type LogHeader, parseHeader, recordLine, seekLine } from "./format.js"
import { layerNode, type LogHandle, LogFiles } from "./LogFiles.js"
import { makeOpenLogs, type OpenLog } from "./openLogs.js"
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
  lockLeaseMs: Schema.optional(numberAtLeast(SessionLocks.MIN_LEASE_MS))
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

const READ_CHUNK_BYTES = 1024 * 1024
const LOG_FILE = "log"
/** The generation of a log written before headers carried one; its first truncate gives it a real one. */
const LEGACY_GENERATION = "legacy"
const newGeneration = () => randomBytes(8).toString("hex")

/** The header is one short JSON line at the start of the log. */
const HEADER_READ_BYTES = 4096
/** How often a follower looks without a file-system event (events can be lost, or never come on network file systems). */
const FOLLOW_POLL_MS = 500
/** A session directory's watch is renewed this often: a deleted and re-created directory is a new one to watch. */
const WATCH_RENEW_MS = 30_000

interface ResolvedOptions {
  readonly dir: string
  readonly synchronous: "normal" | "full"
  readonly busyTimeoutMs: number
}

const resolveOptions = (input: FileCheckpointerOptions): Effect.Effect<ResolvedOptions, ConfigurationError> =>
  Effect.map(decodeOptions(FileCheckpointerOptions, input, "file checkpointer options"), (options) => ({
    dir: options.dir ?? defaultDirectory(),
    synchronous: options.synchronous ?? "normal",
    busyTimeoutMs: options.busyTimeoutMs ?? 10_000
  }))

/** The service plus its integrity check, built on the injected file primitives and codec. */
export const make = (options: FileCheckpointerOptions = {}) =>
  Effect.gen(function*() {
    const files = yield* LogFiles
    const codec = yield* LogCodec
    const { busyTimeoutMs, dir, synchronous } = yield* resolveOptions(options)
    const durable = synchronous === "full"

    // The directory must exist (it is created), be a directory, and be readable and writable.
    const realDir = yield* files.prepareDirectory(dir).pipe(
      Effect.mapError((e) => new ConfigurationError({ option: "dir", detail: `${dir}: ${e.detail}` }))
    )
    const trashDir = join(realDir, ".trash")
    // Leftovers of deletes interrupted by a crash; harmless if another process races us.
    yield* files.remove(trashDir).pipe(Effect.ignore)

    const sessionDir = (sessionId: string) => join(realDir, sessionId)
    const logPath = (sessionId: string) => join(realDir, sessionId, LOG_FILE)
    const randomSuffix = Effect.map(Random.nextInt, (n) => `${process.pid}-${Math.abs(n).toString(36)}`)
    const blobStore = makeBlobStore({ files, codec, directory: realDir, durable, tempSuffix: randomSuffix })

    const lock = yield* SessionLock
    const withSessionLock = <A, E>(sessionId: string, use: (held: HeldSessionLock) => Effect.Effect<A, E>) =>
      lock.withLock({ directory: realDir, sessionId, timeoutMs: busyTimeoutMs }, use)

    // ---------------------------------------------------------------------------------
    // Reading
    // ---------------------------------------------------------------------------------

    const checkCodec = (sessionId: string, header: LogHeader): Effect.Effect<void, CodecError> =>
      header.codec !== codec.name
        ? Effect.fail(
          new CodecError({
            codec: codec.name,
            operation: "decode",
            detail: `session "${sessionId}" was written with the "${header.codec}" codec; open it with that codec`
          })
        )
        : header.keyId !== codec.keyId
        ? Effect.fail(
          new CodecError({
            codec: codec.name,
            operation: "decode",
            detail: `session "${sessionId}" was written with a different key (key id ${header.keyId ?? "none"})`
          })
        )
        : Effect.void

    /** Header, committed head and end of an open log (no locking, no changes). */
    const inspect = (sessionId: string, file: LogHandle) =>
      Effect.gen(function*() {
        const size = yield* file.size
        const start = yield* file.readAt(0, Math.min(size, HEADER_READ_BYTES))
        const parsed = parseHeader(sessionId, start)
        if (parsed instanceof CheckpointIntegrityError || parsed instanceof SchemaVersionError) return yield* parsed
        yield* checkCodec(sessionId, parsed.header)
        const committed = yield* findCommittedEnd(file.readAt, parsed.end, size)
        return {
          size,
          headerEnd: parsed.end,
          head: committed.head,
          committedEnd: committed.end,
          generation: parsed.header.generation ?? LEGACY_GENERATION
        }
      })

    const openLogs = yield* makeOpenLogs({ files, logPath, readTail: inspect })

    const toRecords = (
      sessionId: string,
      scanned: ReadonlyArray<{ readonly seq: number; readonly payload: string }>
    ): Effect.Effect<Chunk.Chunk<unknown>, CheckpointerError> =>
      Effect.flatMap(
        // The default codec stores the JSON text itself: nothing to decode (this is the replay's hot path).
        codec === jsonCodec
          ? Effect.succeed(undefined)
          : codec.decode(scanned.map((record) => ({ sessionId, seq: record.seq, payload: record.payload }))),
        (texts) =>
          Effect.try({
            try: () =>
              Chunk.unsafeFromArray(scanned.map((record, index) => {
                const body = JSON.parse(texts === undefined ? record.payload : texts[index]!) as { readonly ts: unknown; readonly event: unknown }
                return { seq: record.seq, ts: body.ts, event: body.event }
              })),
            catch: (cause) =>
              new CheckpointIntegrityError({
                sessionId,
                seq: scanned[0]?.seq,
                detail: `a record passed its checksum but is not JSON: ${String(cause)}`
              })
          })
      )

    const read = (sessionId: string, sinceSeq: number): Stream.Stream<unknown, CheckpointerError> =>
      Stream.unwrapScoped(Effect.gen(function*() {
        const file = yield* files.open(logPath(sessionId), "read")
        if (file === undefined) return Stream.empty
        // Read the log as it is now; later appends belong to a later read.
        const { committedEnd, headerEnd } = yield* inspect(sessionId, file)
        // A tail read starts near its first record, not at the top of the log.
        const start = yield* seekLine(file.readAt, headerEnd, committedEnd, sinceSeq)
        const scanner = new ForwardScanner(sessionId, start.offset, sinceSeq, start.seq)
        return Stream.paginateChunkEffect(start.offset, (position) =>
          Effect.gen(function*() {
            if (position >= committedEnd) return [Chunk.empty(), Option.none()] as const
            const bytes = yield* file.readAt(position, Math.min(READ_CHUNK_BYTES, committedEnd - position))
            const scanned = scanner.push(bytes)
            if (scanned instanceof CheckpointIntegrityError) return yield* scanned
            const records = yield* toRecords(sessionId, scanned)
            const next = position + bytes.length
            return [records, next < committedEnd && bytes.length > 0 ? Option.some(next) : Option.none()] as const
          }))
      }))

    const version = (sessionId: string) =>
      Effect.scoped(Effect.gen(function*() {
        const file = yield* files.open(logPath(sessionId), "read")
        if (file === undefined) return { head: 0, generation: Checkpointer.NO_GENERATION }
        const { generation, head } = yield* inspect(sessionId, file)
        return { head, generation }
      }))
    const head = (sessionId: string) => Effect.map(version(sessionId), (current) => current.head)

    // ---------------------------------------------------------------------------------
    // Writing
    // ---------------------------------------------------------------------------------

    /**
     * Write `contents` to a new file beside `target`, flush it, rename it into place (once
     * `held` confirms the lock is still ours), flush the directory.
     */
    const replaceAtomically = (
      held: HeldSessionLock,
      directory: string,
      target: string,
      contents: ReadonlyArray<Uint8Array>
    ) =>
      Effect.gen(function*() {
        const temp = join(directory, `${LOG_FILE}.tmp-${yield* randomSuffix}`)
        const written = Effect.scoped(Effect.gen(function*() {
          const handle = yield* files.create(temp)
          let position = 0
          for (const part of contents) {
            yield* handle.writeAt(position, part)
            position += part.length
          }
          // Always flushed: the rename must never expose a file whose data is not on disk.
          yield* handle.flush
        }))
        // onError also runs on interruption: no temporary file is left behind either way.
        yield* written.pipe(
          Effect.zipRight(held.ensureHeld),
          Effect.zipRight(files.rename(temp, target)),
          Effect.onError(() => files.remove(temp).pipe(Effect.ignore))
        )
        yield* files.flushDirectory(directory)
      })

    /** Keep bytes cut off a torn tail beside the log rather than throwing them away. */
    const keepTornBytes = (sessionId: string, file: LogHandle, from: number, to: number) =>
      Effect.gen(function*() {
        const bytes = yield* file.readAt(from, to - from)
        yield* files.writeFile(join(sessionDir(sessionId), `torn-${Date.now()}-${from}`), bytes)
        if (durable) yield* files.flushDirectory(sessionDir(sessionId))
      })

    const encodeLines = (sessionId: string, records: ReadonlyArray<StoredEventEncoded>) =>
      Effect.flatMap(
        codec.encode(records.map((record) => ({
          sessionId,
          seq: record.seq,
          payload: JSON.stringify({ ts: record.ts, event: record.event })
        }))),
        (texts) => {
          if (texts.length !== records.length || texts.some((text) => typeof text !== "string" || text.includes("\n"))) {
            return Effect.fail(
              new CodecError({
                codec: codec.name,
                operation: "encode",
                detail: "the codec must return one single-line string per record"
              })
            )
          }
          const batchEnd = records.at(-1)!.seq
          return Effect.succeed(
            Buffer.from(texts.map((text, index) => recordLine(records[index]!.seq, batchEnd, text)).join(""), "utf8")
          )
        }
      )

    /**
     * What to keep when truncating to `toSeq`: the bytes before its batch, plus the batch's
     * records up to `toSeq` re-lined with `toSeq` as their batch end (so they stay committed).
     */
    const truncatedContents = (
      sessionId: string,
      file: LogHandle,
      headerEnd: number,
      committedEnd: number,
      toSeq: number
    ) =>
      Effect.gen(function*() {
        // A new header: the rewritten log is a new generation.
        const header = Buffer.from(headerLine(codec.name, codec.keyId, newGeneration()), "utf8")
        if (toSeq === 0) return [header]
        const scanner = new ForwardScanner(sessionId, headerEnd, 0)
        let position = headerEnd
        while (position < committedEnd) {
          const bytes = yield* file.readAt(position, Math.min(READ_CHUNK_BYTES, committedEnd - position))
          if (bytes.length === 0) break
          position += bytes.length
          const scanned = scanner.push(bytes)
          if (scanned instanceof CheckpointIntegrityError) return yield* scanned
          const target = scanned.find((record) => record.seq === toSeq)
          if (target === undefined) continue
          if (target.batchEnd === toSeq) return [header, yield* file.readAt(headerEnd, target.end - headerEnd)]
          const batch = scanned.filter((record) => record.batchEnd === target.batchEnd && record.seq <= toSeq)
          const kept = yield* file.readAt(headerEnd, batch[0]!.start - headerEnd)
          const relined = batch.map((record) => recordLine(record.seq, toSeq, record.payload)).join("")
          return [header, kept, Buffer.from(relined, "utf8")]
        }
        return yield* new CheckpointIntegrityError({ sessionId, seq: toSeq, detail: "record not found while truncating" })
      })

    /** The session's snapshot store, changed only while `held` is still the lock's. */
    const snapshotsOf = (
      held: HeldSessionLock,
      sessionId: string
    ): Pick<Checkpointer.LockedSession, "putBlobs" | "missingBlobs" | "deleteBlobs" | "storedBlobs"> => ({
      putBlobs: (added) => blobStore.put(sessionId, added, held.ensureHeld),
      missingBlobs: (hashes) => blobStore.missing(sessionId, hashes),
      deleteBlobs: (hashes) => blobStore.remove(sessionId, hashes, held.ensureHeld),
      storedBlobs: blobStore.list(sessionId)
    })

    /** The first append of a session: its log is written whole beside its path and renamed into place. */
    const newSession = (held: HeldSessionLock, sessionId: string): Checkpointer.LockedSession => {
      const directory = sessionDir(sessionId)
      return {
        head: 0,
        append: (records) =>
          Effect.gen(function*() {
            // Encode first: a failing codec leaves no trace.
            const lines = yield* encodeLines(sessionId, records)
            yield* held.ensureHeld
            yield* files.makeDirectory(directory)
            if (durable) yield* files.flushDirectory(realDir)
            const header = Buffer.from(headerLine(codec.name, codec.keyId, newGeneration()), "utf8")
            yield* replaceAtomically(held, directory, logPath(sessionId), [header, lines])
          }),
        truncate: () => Effect.void,
        ...snapshotsOf(held, sessionId),
        records: () => read(sessionId, 0)
      }
    }

    /** A session whose log exists, open as `log`; `log` follows what is written. */
    const existingSession = (held: HeldSessionLock, sessionId: string, log: OpenLog): Checkpointer.LockedSession => {
      const { file } = log
      /** Cut a torn tail back to the last committed batch, keeping the cut bytes. */
      const repair = Effect.suspend(() =>
        log.committedEnd < log.size
          ? held.ensureHeld.pipe(
            Effect.zipRight(keepTornBytes(sessionId, file, log.committedEnd, log.size)),
            Effect.zipRight(held.ensureHeld),
            Effect.zipRight(file.truncate(log.committedEnd)),
            Effect.zipRight(Effect.sync(() => {
              log.size = log.committedEnd
            }))
          )
          : Effect.void
      )
      return {
        head: log.head,
        append: (records) => {
          const write = (lines: Buffer) =>
            Effect.suspend(() => {
              const at = log.committedEnd
              // Until the write is known to be whole, the log is not reused as described.
              log.reusable = false
              const written = durable ? Effect.zipRight(file.writeAt(at, lines), file.flush) : file.writeAt(at, lines)
              // A failed write (disk full, I/O error) must not leave part of a batch behind. Cut it
              // back only while the lock is ours; after a takeover the new holder cuts it as a torn tail.
              return Effect.matchEffect(written, {
                onFailure: (error) =>
                  held.ensureHeld.pipe(Effect.zipRight(file.truncate(at)), Effect.ignore, Effect.zipRight(Effect.fail(error))),
                onSuccess: () => {
                  log.head = records.at(-1)!.seq
                  log.committedEnd = log.size = at + lines.length
                  log.reusable = true
                  return Effect.void
                }
              })
            })
          // Encode first: a failing codec leaves the file exactly as it was. Right before the
          // write: is the lock still ours?
          return Effect.flatMap(encodeLines(sessionId, records), (lines) =>
            log.committedEnd < log.size
              ? repair.pipe(Effect.zipRight(held.ensureHeld), Effect.zipRight(write(lines)))
              : Effect.zipRight(held.ensureHeld, write(lines)))
        },
        truncate: (toSeq) =>
          Effect.gen(function*() {
            const contents = yield* truncatedContents(sessionId, file, log.headerEnd, log.committedEnd, toSeq)
            yield* repair
            // The log is replaced by a new file: this one is done with.
            log.reusable = false
            yield* replaceAtomically(held, sessionDir(sessionId), logPath(sessionId), contents)
          }),
        ...snapshotsOf(held, sessionId),
        records: () => read(sessionId, 0)
      }
    }

    const withSession: Checkpointer.CheckpointerDriver["withSession"] = (sessionId, use) =>
      withSessionLock(sessionId, (held) =>
        Effect.flatMap(openLogs.take(sessionId, held.inherited), (log) =>
          log === undefined
            ? use(newSession(held, sessionId))
            : Effect.ensuring(
              use(existingSession(held, sessionId, log)),
              openLogs.keep(sessionId, log, (kept) => held.leave?.(kept))
            )))

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

    const remove = (sessionId: string) =>
      withSessionLock(sessionId, (held) =>
        Effect.gen(function*() {
          if ((yield* files.modifiedAt(sessionDir(sessionId))) === undefined) return
          const doomed = join(trashDir, `${sessionId}.${yield* randomSuffix}`)
          yield* files.makeDirectory(trashDir)
          yield* openLogs.forget(sessionId)
          yield* held.ensureHeld
          // One rename takes the whole session out of sight; removing the files can then fail harmlessly.
          yield* files.rename(sessionDir(sessionId), doomed)
          if (durable) yield* files.flushDirectory(realDir)
          yield* files.remove(doomed).pipe(Effect.ignore)
        }))

    const logBytes = (sessionId: string) =>
      Effect.scoped(Effect.flatMap(files.open(logPath(sessionId), "read"), (file) => (file === undefined ? Effect.succeed(0) : file.size)))

    /**
     * Wake-ups from the file system: the session's directory while it exists, else the sessions
     * directory until the session appears. Watches are renewed now and then (a deleted
     * directory's watch goes quiet); followers poll as well, for file systems without events.
     */
    const watchFiles = files.watch
    const watch = watchFiles === undefined ? undefined : (sessionId: string): Stream.Stream<unknown> =>
      Stream.unwrap(
        Effect.map(Effect.orElseSucceed(files.modifiedAt(sessionDir(sessionId)), () => undefined), (exists) =>
          exists === undefined
            ? Stream.take(Stream.filter(watchFiles(realDir), (name) => name === sessionId), 1)
            : Stream.interruptAfter(watchFiles(sessionDir(sessionId)), Duration.millis(WATCH_RENEW_MS)))
      ).pipe(Stream.repeat(Schedule.spaced(Duration.millis(FOLLOW_POLL_MS))))

    const service = yield* Checkpointer.make({
      withSession,
      read,
      head,
      version,
      list,
      delete: remove,
      readBlob: blobStore.read,
      listBlobs: blobStore.list,
      logBytes,
      ...(watch === undefined ? {} : { watch }),
      followPollMs: FOLLOW_POLL_MS
    })

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
          const tail = yield* inspect(id, file)
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
  ConfigurationError | StorageError,
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
): Layer.Layer<Checkpointer.Checkpointer | CheckpointerIntegrity, ConfigurationError | StorageError> =>
  Layer.unwrapEffect(Effect.map(
    decodeOptions(FileCheckpointerLayerOptions, input, "file checkpointer options"),
    ({ codec, ...options }) =>
      layerWithoutDependencies(options).pipe(
        Layer.provide(Layer.succeed(LogCodec, codec ?? jsonCodec)),
        Layer.provide(layerNode),
        Layer.provide(SessionLocks.layerNode(options.lockLeaseMs === undefined ? {} : { leaseMs: options.lockLeaseMs }))
      )
  ))
