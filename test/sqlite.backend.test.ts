/**
 * The SQLite backend beyond the shared contract: options, versions and migrations, the object
 * store's table, the busy wait that never freezes the event loop, reads racing a truncate, and
 * closing.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import Database from "better-sqlite3"
import { SqliteClient } from "@effect/sql-sqlite-node"
import * as SqlClient from "@effect/sql/SqlClient"
import { Chunk, Effect, Fiber, Layer, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Checkpointer } from "../src/core.js"
import { SqliteCheckpointer, sqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import {
  CheckpointBusyError,
  FileSnapshot,
  CheckpointConflictError,
  InvalidEventError,
  CheckpointerClosedError,
  ConfigurationError,
  type PromiseCheckpointerWithIntegrity,
  SchemaVersionError,
  SnapshotBlobError,
  UserMessage
} from "../src/index.js"
import { expectConfigurationError, thrownBy } from "./support/refusals.js"
import { storedSnapshotJson } from "./support/contents.js"
import { nodeArgs } from "./support/processes.js"
import { sha256Hex } from "../src/core/internal/sha256.js"

const run = promisify(execFile)
const freshFile = () => join(mkdtempSync(join(tmpdir(), "lite-agent-sqlite-")), "sessions.db")
const message = (text: string) => new UserMessage({ content: text, origin: "user" })

const open: Array<PromiseCheckpointerWithIntegrity> = []
const checkpointer = (options: Parameters<typeof sqliteCheckpointer>[0]) => {
  const c = sqliteCheckpointer(options)
  open.push(c)
  return c
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()))
})

describe("sqliteCheckpointer options", () => {
  it("invalid options throw ConfigurationError at the call, naming the option; an unopenable file fails the first call", async () => {
    const cases: Array<[unknown, string, string]> = [
      [{ file: freshFile(), busyTimeoutMs: -1 }, "busyTimeoutMs", "expected a number >= 0, got -1"],
      [{ file: freshFile(), busyTimeoutMs: Number.NaN }, "busyTimeoutMs", "got NaN"],
      [{ file: freshFile(), busyTimeoutMs: "5" }, "busyTimeoutMs", `got "5"`],
      [{ file: freshFile(), synchronous: "off" }, "synchronous", `got "off"`],
      [{ file: "" }, "file", `expected a path or ":memory:", got ""`],
      [{}, "file", "is required"],
      [{ path: freshFile() }, "path", "unknown option"],
      [{ file: freshFile(), integrityCheckOnOpen: "yes" }, "integrityCheckOnOpen", `expected true or false, got "yes"`]
    ]
    for (const [options, option, detail] of cases) {
      expectConfigurationError(thrownBy(() => checkpointer(options as Parameters<typeof sqliteCheckpointer>[0])), option, detail)
    }
    const error = await checkpointer({ file: join(freshFile(), "no-such-dir", "x.db") }).head("s").catch((e: unknown) => e)
    expect(error).toBeInstanceOf(ConfigurationError)
    expect(error).toMatchObject({ option: "file" })
  })

  it("busyTimeoutMs 0 is valid: a busy database fails at once with CheckpointBusyError", async () => {
    const file = freshFile()
    const c = checkpointer({ file, busyTimeoutMs: 0 })
    await c.append("s", [message("x")])
    const holder = new Database(file)
    holder.exec("BEGIN IMMEDIATE")
    try {
      await expect(c.append("s", [message("y")])).rejects.toBeInstanceOf(CheckpointBusyError)
    } finally {
      holder.exec("ROLLBACK")
      holder.close()
    }
  })

  it("refuses SQLite libraries older than 3.51.3", () => {
    expect(SqliteCheckpointer.sqliteVersionProblem("3.51.3")).toBeUndefined()
    expect(SqliteCheckpointer.sqliteVersionProblem("3.53.2")).toBeUndefined()
    expect(SqliteCheckpointer.sqliteVersionProblem("4.0.0")).toBeUndefined()
    expect(SqliteCheckpointer.sqliteVersionProblem("3.51.2")).toMatch(/older than 3\.51\.3/)
    expect(SqliteCheckpointer.sqliteVersionProblem("3.9.10")).toMatch(/WAL-reset/)
    expect(SqliteCheckpointer.sqliteVersionProblem("garbage")).toBeDefined()
  })
})

/** Rows of a query, read through a connection of its own. */
const rawRows = (file: string, query: string) => {
  const raw = new Database(file, { readonly: true })
  try {
    return raw.prepare(query).all()
  } finally {
    raw.close()
  }
}

/**
 * A database as version 2 wrote it: sessions "a" and "b" with a snapshot store each, both
 * holding the blob "shared" their FileSnapshots reference, and "a" also one only it references.
 */
const version2Database = () => {
  const file = freshFile()
  const bytes = {
    shared: new TextEncoder().encode("the bytes both sessions captured\n"),
    onlyA: Uint8Array.from({ length: 70_000 }, (_, i) => (i * 7919) % 256)
  }
  const raw = new Database(file)
  raw.pragma("journal_mode = WAL")
  raw.exec(`
    CREATE TABLE lite_agent_migrations (
      migration_id integer PRIMARY KEY NOT NULL,
      created_at datetime NOT NULL DEFAULT current_timestamp,
      name VARCHAR(255) NOT NULL
    );
    CREATE TABLE lite_agent_sessions (
      id TEXT PRIMARY KEY NOT NULL,
      head INTEGER NOT NULL,
      mtime INTEGER NOT NULL,
      generation INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE lite_agent_events (
      session_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      ts INTEGER NOT NULL,
      event TEXT NOT NULL,
      PRIMARY KEY (session_id, seq)
    ) STRICT, WITHOUT ROWID;
    CREATE TABLE lite_agent_blobs (
      session_id TEXT NOT NULL,
      sha256 TEXT NOT NULL,
      data BLOB NOT NULL,
      PRIMARY KEY (session_id, sha256)
    ) STRICT, WITHOUT ROWID;
    INSERT INTO lite_agent_migrations (migration_id, name) VALUES (1, 'sessions_and_events'), (2, 'snapshot_blobs');
  `)
  const ts = 1_700_000_000_000
  const snapshot = (path: string, data: Uint8Array) => storedSnapshotJson(path, sha256Hex(data), data.length)
  const events: Array<[string, number, string]> = [
    ["a", 1, JSON.stringify({ content: "capture two files", origin: "user", _tag: "UserMessage" })],
    ["a", 2, snapshot("shared.txt", bytes.shared)],
    ["a", 3, snapshot("only-a.bin", bytes.onlyA)],
    ["b", 1, snapshot("shared.txt", bytes.shared)]
  ]
  const insertEvent = raw.prepare("INSERT INTO lite_agent_events (session_id, seq, ts, event) VALUES (?, ?, ?, ?)")
  for (const [session, seq, event] of events) insertEvent.run(session, seq, ts + seq, event)
  raw.prepare("INSERT INTO lite_agent_sessions (id, head, mtime, generation) VALUES (?, ?, ?, ?)").run("a", 3, ts + 3, 11)
  raw.prepare("INSERT INTO lite_agent_sessions (id, head, mtime, generation) VALUES (?, ?, ?, ?)").run("b", 1, ts + 1, 12)
  const insertBlob = raw.prepare("INSERT INTO lite_agent_blobs (session_id, sha256, data) VALUES (?, ?, ?)")
  for (const [session, data] of [["a", bytes.shared], ["a", bytes.onlyA], ["b", bytes.shared]] as const) {
    insertBlob.run(session, sha256Hex(data), Buffer.from(data))
  }
  raw.pragma("user_version = 2")
  raw.close()
  return { file, bytes }
}

describe("schema and versioning", () => {
  it("a version-1 database (before the snapshot store) is migrated when opened; its events stay", async () => {
    const file = freshFile()
    const first = sqliteCheckpointer({ file })
    await first.append("s", [message("from version 1")])
    await first.close()
    // Put the file back to what version 1 wrote: no blobs nor objects table, one migration, user_version 1.
    const raw = new Database(file)
    raw.exec("DROP TABLE lite_agent_objects")
    raw.prepare("DELETE FROM lite_agent_migrations WHERE migration_id >= 2").run()
    raw.pragma("user_version = 1")
    raw.close()

    const c = checkpointer({ file })
    const data = new TextEncoder().encode("snapshot after the upgrade")
    const sha256 = sha256Hex(data)
    await c.append("s", [new FileSnapshot({ toolUseId: "t", path: "a", state: { _tag: "content", data, mode: 0o644, size: data.length, sha256 } })])
    expect((await c.read("s")).map((stored) => stored.event._tag)).toEqual(["UserMessage", "FileSnapshot"])
    expect(Array.from(await c.readSnapshot("s", sha256))).toEqual(Array.from(data))
    const after = new Database(file, { readonly: true })
    try {
      expect(after.pragma("user_version", { simple: true })).toBe(SqliteCheckpointer.SCHEMA_VERSION)
      expect(after.prepare("SELECT migration_id FROM lite_agent_migrations ORDER BY migration_id").pluck().all()).toEqual([1, 2, 3])
      expect(after.prepare("SELECT sha256 FROM lite_agent_objects").pluck().all()).toEqual([sha256])
    } finally {
      after.close()
    }
  })

  it("a version-2 database (a snapshot store per session) is migrated to one object store: every snapshot reads back, the events as before", async () => {
    const { file, bytes } = version2Database()
    const eventsBefore = rawRows(file, "SELECT session_id, seq, ts, event FROM lite_agent_events ORDER BY session_id, seq")
    const sessionsBefore = rawRows(file, "SELECT id, head, mtime, generation FROM lite_agent_sessions ORDER BY id")
    const migratedFrom = Date.now()

    const c = checkpointer({ file })
    expect((await c.read("a")).map(({ event, seq }) => [seq, event._tag])).toEqual([[1, "UserMessage"], [2, "FileSnapshot"], [3, "FileSnapshot"]])
    expect((await c.read("b")).map(({ event, seq }) => [seq, event._tag])).toEqual([[1, "FileSnapshot"]])
    for (const [session, names] of [["a", ["shared", "onlyA"]], ["b", ["shared"]]] as const) {
      for (const name of names) {
        expect(Buffer.from(await c.readSnapshot(session, sha256Hex(bytes[name]))), `${session}: ${name}`).toEqual(Buffer.from(bytes[name]))
      }
      expect((await c.listSnapshots(session)).map((info) => info.sha256).sort()).toEqual(names.map((name) => sha256Hex(bytes[name])).sort())
    }
    // The store is one for every session: another session may reference what "a" stored.
    const onlyA = sha256Hex(bytes.onlyA)
    await c.append("c", [new FileSnapshot({ toolUseId: "t", path: "x", state: { _tag: "stored", sha256: onlyA, size: bytes.onlyA.length, mode: 0o644 } })])
    expect(Buffer.from(await c.readSnapshot("c", onlyA))).toEqual(Buffer.from(bytes.onlyA))
    await c.close()

    const raw = new Database(file, { readonly: true })
    try {
      expect(raw.pragma("user_version", { simple: true })).toBe(3)
      expect(raw.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'lite_agent_blobs'").all()).toEqual([])
      expect(raw.prepare("SELECT migration_id, name FROM lite_agent_migrations ORDER BY migration_id").all()).toEqual([
        { migration_id: 1, name: "sessions_and_events" },
        { migration_id: 2, name: "snapshot_blobs" },
        { migration_id: 3, name: "shared_objects" }
      ])
      const objects = raw.prepare<[], { sha256: string; data: Buffer; touched_ms: number }>(
        "SELECT sha256, data, touched_ms FROM lite_agent_objects ORDER BY sha256"
      ).all()
      expect(objects.map(({ data, sha256 }) => [sha256, data.toString()])).toEqual(
        [bytes.shared, bytes.onlyA].map((data) => [sha256Hex(data), Buffer.from(data).toString()]).sort()
      )
      // Touched when migrated: the collector keeps them for its grace period from then.
      for (const { touched_ms } of objects) expect(touched_ms).toBeGreaterThanOrEqual(migratedFrom)
      for (const { touched_ms } of objects) expect(touched_ms).toBeLessThanOrEqual(Date.now())
    } finally {
      raw.close()
    }
    expect(rawRows(file, "SELECT session_id, seq, ts, event FROM lite_agent_events WHERE session_id <> 'c' ORDER BY session_id, seq"))
      .toEqual(eventsBefore)
    expect(rawRows(file, "SELECT id, head, mtime, generation FROM lite_agent_sessions WHERE id <> 'c' ORDER BY id")).toEqual(sessionsBefore)
  })

  it("of a version-2 blob stored by several sessions, a copy whose bytes match its hash is the object kept", async () => {
    const { file, bytes } = version2Database()
    // Session "a" sorts first: its copy would be taken if copies were not checked.
    const raw = new Database(file)
    raw.prepare("UPDATE lite_agent_blobs SET data = ? WHERE session_id = 'a' AND sha256 = ?").run(Buffer.from("tampered"), sha256Hex(bytes.shared))
    raw.close()
    const c = checkpointer({ file })
    expect(Buffer.from(await c.readSnapshot("a", sha256Hex(bytes.shared)))).toEqual(Buffer.from(bytes.shared))
  })


  it("a new database is in WAL mode with the schema and its user_version marker", async () => {
    const file = freshFile()
    const c = checkpointer({ file })
    await c.append("s", [message("x")])
    const raw = new Database(file, { readonly: true })
    try {
      expect(raw.pragma("journal_mode", { simple: true })).toBe("wal")
      expect(raw.pragma("user_version", { simple: true })).toBe(SqliteCheckpointer.SCHEMA_VERSION)
      const tables = raw.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all()
      expect(tables).toEqual(expect.arrayContaining(["lite_agent_events", "lite_agent_sessions"]))
      expect(raw.prepare("SELECT session_id, seq FROM lite_agent_events").all()).toEqual([{ session_id: "s", seq: 1 }])
    } finally {
      raw.close()
    }
  })

  it("a database at a schema version past 3 (a later release's) is refused at once and not touched", async () => {
    const file = freshFile()
    const c = sqliteCheckpointer({ file })
    await c.append("s", [message("x")])
    await c.close()
    const raw = new Database(file)
    raw.pragma("user_version = 4")
    raw.close()
    const before = readFileSync(file)
    const error = await checkpointer({ file }).append("s", [message("y")]).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(SchemaVersionError)
    expect(error).toMatchObject({ found: 4, supported: 3 })
    expect(readFileSync(file)).toEqual(before)
  })

  it("a database written by a newer schema version is refused at once and not touched", async () => {
    const file = freshFile()
    const raw = new Database(file)
    raw.pragma("journal_mode = DELETE")
    raw.exec("CREATE TABLE future (x)")
    raw.pragma("user_version = 7")
    raw.close()
    const before = readFileSync(file)
    const error = await checkpointer({ file }).head("s").catch((e: unknown) => e)
    expect(error).toBeInstanceOf(SchemaVersionError)
    expect(error).toMatchObject({ found: 7, supported: SqliteCheckpointer.SCHEMA_VERSION })
    expect(readFileSync(file)).toEqual(before)
  })
})

describe("the object store", () => {
  const inStore = <A, E>(file: string, program: Effect.Effect<A, E, Checkpointer>) =>
    Effect.runPromise(Effect.scoped(Effect.provide(program, SqliteCheckpointer.layer({ file }))))
  const snapshotOf = (path: string, text: string) => {
    const data = new TextEncoder().encode(text)
    return new FileSnapshot({ toolUseId: "t", path, state: { _tag: "content", data, mode: 0o644, size: data.length, sha256: sha256Hex(data) } })
  }
  const objectRows = (file: string) =>
    rawRows(file, "SELECT sha256, length(data) AS bytes, touched_ms AS touchedMs FROM lite_agent_objects ORDER BY sha256") as Array<
      { sha256: string; bytes: number; touchedMs: number }
    >
  const age = (file: string, byMs: number, sha256?: string) => {
    const raw = new Database(file)
    raw.prepare(`UPDATE lite_agent_objects SET touched_ms = touched_ms - ?${sha256 === undefined ? "" : " WHERE sha256 = ?"}`)
      .run(...(sha256 === undefined ? [byMs] : [byMs, sha256]))
    raw.close()
  }
  const HOUR = 3_600_000

  it("stores each object once for every session, keeps it when its sessions go, and gc deletes it only once untouched for the grace period", async () => {
    const file = freshFile()
    const shared = sha256Hex(new TextEncoder().encode("shared"))
    const onlyB = sha256Hex(new TextEncoder().encode("only b"))
    await inStore(file, Effect.gen(function*() {
      const c = yield* Checkpointer
      const start = Date.now()
      yield* c.append("a", [snapshotOf("x", "shared")])
      yield* c.append("b", [snapshotOf("x", "shared"), snapshotOf("y", "only b")])
      const stored = objectRows(file)
      expect(stored.map((row) => [row.sha256, row.bytes])).toEqual([[shared, 6], [onlyB, 6]].sort())
      for (const row of stored) expect(row.touchedMs).toBeGreaterThanOrEqual(start)

      // Deleting a session leaves its objects to the collector.
      yield* c.delete("b")
      expect(objectRows(file)).toHaveLength(2)
      expect(yield* c.gc({ graceMs: 5 * 60_000 })).toEqual({ sessions: 1, objects: 2, referenced: 1, recent: 1, deleted: 0, freedBytes: 0 })

      // An hour later: the unreferenced one goes, the referenced one stays however old.
      age(file, HOUR)
      expect(yield* c.gc({ graceMs: 5 * 60_000 })).toEqual({ sessions: 1, objects: 2, referenced: 1, recent: 0, deleted: 1, freedBytes: 6 })
      expect(objectRows(file).map((row) => row.sha256)).toEqual([shared])
      expect(yield* Effect.flip(c.readSnapshot("b", onlyB))).toBeInstanceOf(SnapshotBlobError)
      expect(new TextDecoder().decode(yield* c.readSnapshot("a", shared))).toBe("shared")

      // Storing it again touches it: an old object stored anew is recent, and kept while unreferenced.
      yield* c.delete("a")
      age(file, HOUR)
      const touchedBefore = Date.now()
      yield* c.append("c", [snapshotOf("x", "shared")])
      yield* c.delete("c")
      expect(objectRows(file)[0]!.touchedMs).toBeGreaterThanOrEqual(touchedBefore)
      expect(yield* c.gc({ graceMs: 5 * 60_000 })).toMatchObject({ objects: 1, referenced: 0, recent: 1, deleted: 0 })

      // A touch never moves the time back: a later time already there stays.
      age(file, -10 * HOUR)
      const later = objectRows(file)[0]!.touchedMs
      yield* c.append("d", [snapshotOf("x", "shared")])
      expect(objectRows(file)[0]!.touchedMs).toBe(later)
    }))
  })

  it("appends with snapshots that queue behind another connection's lock store their objects in the transaction they share", async () => {
    const file = freshFile()
    await inStore(file, Effect.gen(function*() {
      const c = yield* Checkpointer
      yield* c.append("warm", [message("x")])
      const holder = new Database(file)
      holder.exec("BEGIN IMMEDIATE")
      const appends = yield* Effect.forkAll(
        Array.from({ length: 12 }, (_, i) => c.append(`s${i}`, [snapshotOf("same", "same bytes"), snapshotOf("own", `own ${i}`)]))
      )
      yield* Effect.sleep("50 millis")
      holder.exec("ROLLBACK")
      holder.close()
      expect(yield* Fiber.join(appends)).toEqual(Array.from({ length: 12 }, () => 2))
      expect(objectRows(file)).toHaveLength(13)
      for (let i = 0; i < 12; i++) {
        expect(new TextDecoder().decode(yield* c.readSnapshot(`s${i}`, sha256Hex(new TextEncoder().encode(`own ${i}`))))).toBe(`own ${i}`)
      }
    }))
  })

  it("an append naming an object the store does not hold is refused and logs nothing; one it holds is touched", async () => {
    const file = freshFile()
    const data = new TextEncoder().encode("kept")
    const sha256 = sha256Hex(data)
    const reference = (hash: string) =>
      new FileSnapshot({ toolUseId: "t", path: "x", state: { _tag: "stored", sha256: hash, size: data.length, mode: 0o644 } })
    await inStore(file, Effect.gen(function*() {
      const c = yield* Checkpointer
      const missing = yield* Effect.flip(c.append("s", [message("first"), reference(sha256)]))
      expect(missing).toBeInstanceOf(InvalidEventError)
      expect(missing).toMatchObject({ index: 1 })
      expect(yield* c.head("s")).toBe(0)
      yield* c.append("t", [snapshotOf("x", "kept")])
      age(file, HOUR)
      const before = Date.now()
      expect(yield* c.append("s", [reference(sha256)])).toBe(1)
      expect(objectRows(file)[0]!.touchedMs).toBeGreaterThanOrEqual(before)
      expect(yield* c.listSnapshots("s")).toEqual([{ sha256, storedBytes: data.length }])
    }))
  })
})

describe("waiting for the write lock", () => {
  it("waits without freezing the event loop, and reports a busy lock distinctly from a conflict", async () => {
    const file = freshFile()
    const c = checkpointer({ file, busyTimeoutMs: 300 })
    await c.append("s", [message("first")])
    const holder = new Database(file)
    holder.exec("BEGIN IMMEDIATE")
    try {
      const events: Array<string> = []
      const timer = new Promise<void>((resolve) =>
        setTimeout(() => {
          events.push("timer")
          resolve()
        }, 20)
      )
      const append = c.append("s", [message("blocked")], 1).catch((error: unknown) => {
        events.push("rejected")
        return error
      })
      const [error] = await Promise.all([append, timer])
      // A native busy wait would have held the loop until the append gave up.
      expect(events).toEqual(["timer", "rejected"])
      expect(error).toBeInstanceOf(CheckpointBusyError)
      expect(error).not.toBeInstanceOf(CheckpointConflictError)
      expect((error as CheckpointBusyError).waitedMs).toBeGreaterThanOrEqual(300)
    } finally {
      holder.exec("ROLLBACK")
      holder.close()
    }
    expect(await c.head("s")).toBe(1)
  })

  it("gets the lock once the other writer commits, then checks the expected head", async () => {
    const file = freshFile()
    const c = checkpointer({ file, busyTimeoutMs: 5000 })
    await c.append("s", [message("first")])
    const other = checkpointer({ file })
    const holder = new Database(file)
    holder.exec("BEGIN IMMEDIATE")
    const waiting = c.append("s", [message("mine")], 1).catch((e: unknown) => e)
    await new Promise((resolve) => setTimeout(resolve, 100))
    holder.exec("ROLLBACK")
    holder.close()
    expect(await waiting).toBe(2)
    // And a stale head after waiting is a conflict, not a busy error.
    await other.append("s", [message("theirs")])
    const stale = await c.append("s", [message("late")], 2).catch((e: unknown) => e)
    expect(stale).toBeInstanceOf(CheckpointConflictError)
    expect(stale).toMatchObject({ expected: 2, actual: 3 })
  })
})

describe("reads", () => {
  it("a long read never mixes the log before and after a concurrent truncate", async () => {
    const file = freshFile()
    const reader = checkpointer({ file })
    const writer = checkpointer({ file })
    await writer.append("s", Array.from({ length: 2000 }, (_, i) => message(`old ${i + 1}`)))
    const seen: Array<string> = []
    const outcome = await (async () => {
      for await (const stored of reader.readIterable("s")) {
        seen.push(String((stored.event as UserMessage).content))
        if (seen.length === 1) {
          // The first page is in hand; rewrite history under the reader.
          await writer.truncate("s", 100, 2000)
          await writer.append("s", Array.from({ length: 1900 }, (_, i) => message(`new ${i + 101}`)))
        }
      }
      return "completed"
    })().catch((e: unknown) => e)
    expect(outcome).toBeInstanceOf(CheckpointConflictError)
    expect(seen.every((text, i) => text === `old ${i + 1}`)).toBe(true)
    // A fresh read sees the new log whole.
    const fresh = await reader.read("s")
    expect(fresh.map((s) => String((s.event as UserMessage).content)).slice(99, 101)).toEqual(["old 100", "new 101"])
  })
})

describe("several processes opening a brand-new database at the same instant", () => {
  it("all of them create or find the schema and append; none sees a locked database", async () => {
    const file = freshFile()
    const worker = join(import.meta.dirname, "workers", "opener.ts")
    const results: Array<{ ok: boolean; head?: number; tag?: string; message?: string }> = []
    for (let trial = 0; trial < 2; trial++) {
      const trialFile = trial === 0 ? file : freshFile()
      // Far enough ahead for every process to have loaded its modules.
      const at = Date.now() + 6000
      const outputs = await Promise.all(
        [1, 2, 3, 4].map((n) =>
          run(process.execPath, [...nodeArgs(worker), "sqlite", trialFile, String(at), `p${n}`], {
            cwd: join(import.meta.dirname, "..")
          }))
      )
      const trialResults = outputs.map(({ stdout }) => JSON.parse(stdout.trim().split("\n").at(-1)!))
      expect(trialResults.filter((r) => !r.ok), JSON.stringify(trialResults)).toEqual([])
      expect(trialResults.map((r) => r.head).sort()).toEqual([1, 2, 3, 4])
      results.push(...trialResults)
    }
    expect(results).toHaveLength(8)
  })
})

describe("living beside an application's own SQL", () => {
  it("an application's @effect/sql transaction around a call neither captures nor breaks it", async () => {
    const program = Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const c = yield* Checkpointer
      yield* sql`CREATE TABLE app (x INTEGER)`
      return yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO app VALUES (1)`
        const head = yield* c.append("s", [message("inside the app's transaction")])
        const stored = yield* Stream.runCollect(c.read("s"))
        return [head, Chunk.size(stored), yield* c.head("s")]
      }))
    })
    const layer = Layer.merge(
      SqliteCheckpointer.layer({ file: freshFile() }),
      SqliteClient.layer({ filename: freshFile() })
    )
    expect(await Effect.runPromise(program.pipe(Effect.provide(layer)))).toEqual([1, 1, 1])
  })
})

describe("closing", () => {
  it("close is idempotent and any later use is CheckpointerClosedError", async () => {
    const file = freshFile()
    const c = sqliteCheckpointer({ file })
    await c.append("s", [message("x")])
    await c.close()
    await c.close()
    await expect(c.head("s")).rejects.toBeInstanceOf(CheckpointerClosedError)
    await expect(c.checkIntegrity()).rejects.toBeInstanceOf(CheckpointerClosedError)
    const reopened = checkpointer({ file })
    expect(await reopened.head("s")).toBe(1)
    expect(await reopened.checkIntegrity()).toEqual({ ok: true, detail: "quick_check: ok" })
  })
})
