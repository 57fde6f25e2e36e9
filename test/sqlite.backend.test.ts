/**
 * The SQLite backend beyond the shared contract: options, versions, the busy wait that
 * never freezes the event loop, reads racing a truncate, and closing.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import Database from "better-sqlite3"
import { SqliteClient } from "@effect/sql-sqlite-node"
import * as SqlClient from "@effect/sql/SqlClient"
import { Chunk, Effect, Layer, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { Checkpointer } from "../src/core.js"
import { SqliteCheckpointer, sqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import {
  CheckpointBusyError,
  FileSnapshot,
  CheckpointConflictError,
  CheckpointerClosedError,
  ConfigurationError,
  type PromiseCheckpointerWithIntegrity,
  SchemaVersionError,
  UserMessage
} from "../src/index.js"
import { expectConfigurationError, thrownBy } from "./support/refusals.js"
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

describe("schema and versioning", () => {
  it("a version-1 database (before the snapshot store) is migrated when opened; its events stay", async () => {
    const file = freshFile()
    const first = sqliteCheckpointer({ file })
    await first.append("s", [message("from version 1")])
    await first.close()
    // Put the file back to what version 1 wrote: no blobs table, one migration, user_version 1.
    const raw = new Database(file)
    raw.exec("DROP TABLE lite_agent_blobs")
    raw.prepare("DELETE FROM lite_agent_migrations WHERE migration_id = 2").run()
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
    } finally {
      after.close()
    }
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
