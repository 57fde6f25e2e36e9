/**
 * The Postgres backend beyond the shared contract, against a real server started for this
 * file: options and credentials (the password never shown), schemas and versions, the row
 * lock's wait, reads racing a truncate, an application's own transactions, lost connections,
 * integrity checks, the live feed and closing.
 */
import { inspect } from "node:util"
import * as Reactivity from "@effect/experimental/Reactivity"
import { PgClient } from "@effect/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import { Chunk, Clock, Effect, Fiber, Layer, Redacted, type Scope, Stream } from "effect"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { PostgresCheckpointer, postgresCheckpointer } from "../src/checkpoint-postgres.js"
import { Checkpointer, type FollowItem } from "../src/core.js"
import {
  CheckpointBusyError,
  CheckpointConflictError,
  CheckpointerClosedError,
  CheckpointIntegrityError,
  ConfigurationError,
  FileSnapshot,
  InvalidEventError,
  type PromiseCheckpointerWithIntegrity,
  SchemaVersionError,
  StorageError,
  UserMessage
} from "../src/index.js"
import { sha256Hex } from "../src/core/internal/sha256.js"
import { eventually } from "./support/agent.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"
import { expectConfigurationError, thrownBy } from "./support/refusals.js"

let server: PostgresServer
beforeAll(async () => {
  // pg_stat_statements counts the statements a follower runs (the live feed's tests).
  server = await startPostgres({ settings: { shared_preload_libraries: "pg_stat_statements" } })
  server.psql("CREATE EXTENSION pg_stat_statements")
})
afterAll(() => server?.destroy())

const message = (text: string) => new UserMessage({ content: text, origin: "user" })
const contentOf = (stored: { readonly event: unknown }) => String((stored.event as UserMessage).content)

let schemas = 0
const freshSchema = (label: string) => `t_${label}_${++schemas}`

const open: Array<PromiseCheckpointerWithIntegrity> = []
const checkpointer = (options: Parameters<typeof postgresCheckpointer>[0]) => {
  const c = postgresCheckpointer(options)
  open.push(c)
  return c
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()))
})

/** What a promise rejected with. */
const rejection = (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    (value) => new Error(`expected a rejection, got ${JSON.stringify(value)}`),
    (error: unknown) => error
  )

describe("postgresCheckpointer options and credentials", () => {
  it("invalid options throw ConfigurationError at the call, naming the option and never quoting the URL or password", () => {
    const secret = "s3cr3t-Pa55"
    const cases: Array<[unknown, string, string]> = [
      [{ url: `mysql://u:${secret}@h/db` }, "url", "expected a postgres:// URL"],
      [{ url: `not a url ${secret}` }, "url", "is not a URL"],
      [{ url: "" }, "url", "expected a non-empty string"],
      [{ password: 42 }, "password", "got a value not shown here"],
      [{ url: 7 }, "url", "got a value not shown here"],
      [{ port: 0 }, "port", "expected a port number (1-65535), got 0"],
      [{ port: 70000 }, "port", "got 70000"],
      [{ schema: "bad-name" }, "schema", `expected a PostgreSQL identifier`],
      [{ schema: "1x" }, "schema", `got "1x"`],
      [{ maxConnections: 0 }, "maxConnections", "expected a positive integer, got 0"],
      [{ busyTimeoutMs: -1 }, "busyTimeoutMs", "expected a number >= 0, got -1"],
      [{ hostname: "db" }, "hostname", `unknown option (did you mean "host"?)`],
      [{ ssl: "yes" }, "ssl", `expected true or false, got "yes"`],
      [{ maxStoreBytes: -1 }, "maxStoreBytes", "expected a non-negative integer, got -1"]
    ]
    for (const [options, option, detail] of cases) {
      const error = thrownBy(() => checkpointer(options as Parameters<typeof postgresCheckpointer>[0]))
      expectConfigurationError(error, option, detail)
      expect(inspect(error, { depth: 10 })).not.toContain(secret)
    }
  })

  it("a wrong password is ConfigurationError (password) that does not show it; the right one works", async () => {
    const { user, password } = server.passwordRole
    const wrong = "not-the-password-42"
    const error = await rejection(
      checkpointer({ host: server.host, port: server.port, user, password: wrong, database: "postgres" }).head("s")
    )
    expect(error).toBeInstanceOf(ConfigurationError)
    expect(error).toMatchObject({ option: "password" })
    expect(inspect(error, { depth: 10 })).not.toContain(wrong)
    const withUrl = await rejection(
      checkpointer({ url: `postgres://${user}:${wrong}@${server.host}:${server.port}/postgres` }).head("s")
    )
    expect(withUrl).toBeInstanceOf(ConfigurationError)
    expect(inspect(withUrl, { depth: 10 })).not.toContain(wrong)

    const right = checkpointer({ url: `postgres://${user}:${password}@${server.host}:${server.port}/postgres`, schema: freshSchema("pw") })
    expect(await right.append("s", [message("x")])).toBe(1)
  })

  it("an unknown database is ConfigurationError (database); an unreachable server is StorageError, within connectTimeoutMs", async () => {
    const unknown = await rejection(checkpointer({ url: `${server.url.replace(/\/postgres$/, "/nope")}` }).head("s"))
    expect(unknown).toBeInstanceOf(ConfigurationError)
    expect(unknown).toMatchObject({ option: "database" })
    const started = Date.now()
    // A port nothing listens on (the server's own port plus one is free in a test cluster's range only by luck: use 1).
    const unreachable = await rejection(checkpointer({ host: "127.0.0.1", port: 1, connectTimeoutMs: 2000 }).head("s"))
    expect(unreachable).toBeInstanceOf(StorageError)
    expect(unreachable).toMatchObject({ operation: "connect" })
    expect(Date.now() - started).toBeLessThan(10_000)
  })
})

describe("schemas and versions", () => {
  it("a fresh database gets the schema, its tables and the version marker; two schemas are two separate stores", async () => {
    const a = freshSchema("a")
    const b = freshSchema("b")
    const first = checkpointer({ url: server.url, schema: a })
    const second = checkpointer({ url: server.url, schema: b })
    await first.append("shared-id", [message("in a")])
    await second.append("shared-id", [message("in b"), message("again b")])
    expect(server.psql(`SELECT value FROM ${a}.lite_agent_meta WHERE key = 'schema_version'`)).toBe(String(PostgresCheckpointer.SCHEMA_VERSION))
    expect(server.psql(`SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE schemaname = '${a}'`)).toBe(
      "lite_agent_events,lite_agent_meta,lite_agent_migrations,lite_agent_objects,lite_agent_sessions"
    )
    expect((await first.read("shared-id")).map(contentOf)).toEqual(["in a"])
    expect((await second.read("shared-id")).map(contentOf)).toEqual(["in b", "again b"])
  })

  it("a schema written by a newer version is refused by every call with SchemaVersionError, and nothing in it changes", async () => {
    const schema = freshSchema("newer")
    const writer = checkpointer({ url: server.url, schema })
    await writer.append("s", [message("kept")])
    await writer.close()
    server.psql(`UPDATE ${schema}.lite_agent_meta SET value = '99' WHERE key = 'schema_version'`)
    const before = server.psql(`SELECT count(*) || ':' || max(event) FROM ${schema}.lite_agent_events`)
    const c = checkpointer({ url: server.url, schema })
    for (const call of [c.head("s"), c.append("s", [message("never")]), c.list(), c.truncate("s", 0), c.delete("s")]) {
      const error = await rejection(call)
      expect(error).toBeInstanceOf(SchemaVersionError)
      expect(error).toMatchObject({ found: 99, supported: PostgresCheckpointer.SCHEMA_VERSION })
    }
    expect(server.psql(`SELECT count(*) || ':' || max(event) FROM ${schema}.lite_agent_events`)).toBe(before)
    expect(server.psql(`SELECT value FROM ${schema}.lite_agent_meta WHERE key = 'schema_version'`)).toBe("99")
  })

  it("8 checkpointers opening one empty schema at the same moment all succeed, and the schema is created once", async () => {
    const schema = freshSchema("together")
    const many = Array.from({ length: 8 }, () => checkpointer({ url: server.url, schema }))
    const heads = await Promise.all(many.map((c, index) => c.append(`s${index}`, [message(`from ${index}`)])))
    expect(heads).toEqual(Array.from({ length: 8 }, () => 1))
    expect((await many[0]!.list()).map((s) => s.id).sort()).toEqual(Array.from({ length: 8 }, (_, index) => `s${index}`).sort())
  })
})

/** A raw connection holding `BEGIN; SELECT … FOR UPDATE` on a session's row until `release`. */
const holdRowLock = async (schema: string, sessionId: string) => {
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  let locked!: () => void
  const isLocked = new Promise<void>((resolve) => (locked = resolve))
  const done = Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const connection = yield* sql.reserve
        yield* connection.executeUnprepared("BEGIN", [], undefined)
        yield* connection.execute(`SELECT head FROM ${schema}.lite_agent_sessions WHERE id = $1 FOR UPDATE`, [sessionId], undefined)
        locked()
        yield* Effect.promise(() => released)
        yield* connection.executeUnprepared("COMMIT", [], undefined)
      })
    ).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(server.url) })))
  )
  await isLocked
  return { release: async () => {
    release()
    await done
  } }
}

describe("writers of one session wait for each other in the server", () => {
  it("a writer held up longer than busyTimeoutMs gets CheckpointBusyError; the event loop keeps running meanwhile", async () => {
    const schema = freshSchema("busy")
    const c = checkpointer({ url: server.url, schema, busyTimeoutMs: 300 })
    await c.append("s", [message("first")])
    const lock = await holdRowLock(schema, "s")
    try {
      let ticks = 0
      const timer = setInterval(() => ticks++, 10)
      const started = Date.now()
      const error = await rejection(c.append("s", [message("blocked")], 1))
      clearInterval(timer)
      expect(error).toBeInstanceOf(CheckpointBusyError)
      expect(error).toMatchObject({ sessionId: "s" })
      expect(Date.now() - started).toBeGreaterThanOrEqual(250)
      expect(ticks).toBeGreaterThan(10)
      // Other sessions are not held up by this one's lock.
      expect(await c.append("other", [message("free")])).toBe(1)
    } finally {
      await lock.release()
    }
    expect(await c.append("s", [message("after")], 1)).toBe(2)
  })

  it("a waiting writer gets the lock once the holder commits, then checks its expected head against what the holder left", async () => {
    const schema = freshSchema("wait")
    const c = checkpointer({ url: server.url, schema })
    const other = checkpointer({ url: server.url, schema })
    await c.append("s", [message("first")])
    const lock = await holdRowLock(schema, "s")
    const waiting = c.append("s", [message("second")], 1)
    const stale = rejection(other.append("s", [message("stale")], 1))
    await new Promise((resolve) => setTimeout(resolve, 200))
    await lock.release()
    const results = await Promise.allSettled([waiting, stale])
    // Exactly one of the two appends with expected head 1 won.
    const heads = [await c.head("s")]
    expect(heads).toEqual([2])
    const outcomes = [results[0].status === "fulfilled" ? "won" : "lost", (await stale) instanceof CheckpointConflictError ? "lost" : "won"]
    expect(outcomes.sort()).toEqual(["lost", "won"])
  })
})

describe("reads", () => {
  it("a long read never mixes the log before and after a concurrent truncate", async () => {
    const schema = freshSchema("reads")
    const reader = checkpointer({ url: server.url, schema })
    const writer = checkpointer({ url: server.url, schema })
    await writer.append("s", Array.from({ length: 2500 }, (_, i) => message(`old ${i + 1}`)))
    const seen: Array<string> = []
    const outcome = await (async () => {
      for await (const stored of reader.readIterable("s")) {
        seen.push(contentOf(stored))
        if (seen.length === 1) {
          await writer.truncate("s", 100, 2500)
          await writer.append("s", Array.from({ length: 2400 }, (_, i) => message(`new ${i + 101}`)))
        }
      }
      return "completed"
    })().catch((e: unknown) => e)
    expect(outcome).toBeInstanceOf(CheckpointConflictError)
    expect(seen.every((text, i) => text === `old ${i + 1}`)).toBe(true)
    const fresh = await reader.read("s")
    expect(fresh.map(contentOf).slice(99, 101)).toEqual(["old 100", "new 101"])
  })
})

describe("living beside an application's own SQL", () => {
  it("over the application's PgClient, its transaction around a call neither captures nor breaks it", async () => {
    const schema = freshSchema("app")
    const program = Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const c = yield* Checkpointer
      yield* sql`CREATE TABLE ${sql(schema + "_app")} (x int)`
      const inside = yield* sql.withTransaction(Effect.gen(function*() {
        yield* sql`INSERT INTO ${sql(schema + "_app")} VALUES (1)`
        const head = yield* c.append("s", [message("inside the app's transaction")])
        return [head, Chunk.size(yield* Stream.runCollect(c.read("s"))), yield* c.head("s")]
      }).pipe(Effect.zipLeft(Effect.fail("the application rolls back")))).pipe(Effect.flip)
      const appRows = yield* sql<{ n: string }>`SELECT count(*) AS n FROM ${sql(schema + "_app")}`
      return { inside, appRows: Number(appRows[0]!.n), head: yield* c.head("s") }
    })
    const client = PgClient.layer({ url: Redacted.make(server.url) })
    const layer = Layer.provideMerge(PostgresCheckpointer.layerWithClient({ schema }), client)
    const result = await Effect.runPromise(program.pipe(Effect.provide(layer)))
    // The application's insert rolled back with its transaction; the checkpointer's append stands.
    expect(result).toEqual({ inside: "the application rolls back", appRows: 0, head: 1 })
  })
})

describe("lost connections", () => {
  it("connections killed by the server: calls in flight fail with StorageError or succeed, never half-done; the pool reconnects", async () => {
    const schema = freshSchema("killed")
    const c = checkpointer({ url: server.url, schema, applicationName: "lite-agent-killed" })
    await c.append("s", [message("0")])
    let acknowledged = 1
    const failures: Array<unknown> = []
    const writing = (async () => {
      for (let i = 1; i <= 300; i++) {
        const batch = [message(`${i}:a`), message(`${i}:b`)]
        try {
          const head = await c.append("s", batch)
          acknowledged = head
        } catch (error) {
          failures.push(error)
        }
      }
    })()
    for (let round = 0; round < 5; round++) {
      await new Promise((resolve) => setTimeout(resolve, 30))
      server.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'lite-agent-killed'")
    }
    await writing
    for (const failure of failures) expect(failure).toBeInstanceOf(StorageError)
    const events = await c.read("s")
    expect(events.map((e) => e.seq)).toEqual(Array.from({ length: events.length }, (_, i) => i + 1))
    // Whole batches only: every "<n>:a" is followed by its "<n>:b".
    const contents = events.map(contentOf).slice(1)
    for (let i = 0; i < contents.length; i += 2) expect(contents[i + 1]).toBe(contents[i]!.replace(":a", ":b"))
    expect(events.length).toBeGreaterThanOrEqual(acknowledged)
    // After the storm, the pool works again.
    expect(await c.append("s", [message("after")], events.length)).toBe(events.length + 1)
    console.log(`postgres killed connections: ${failures.length} appends failed with StorageError, ${events.length} events stored`)
  })
})

describe("the object store", () => {
  const bytes = (text: string) => new TextEncoder().encode(text)
  const objectOf = (data: Uint8Array) => ({ sha256: sha256Hex(data), data })
  /** The driver over a pool of its own, in `schema`, for `use`. */
  const withDriver = <A>(schema: string, use: (parts: PostgresCheckpointer.PostgresDriverParts, client: PgClient.PgClient) => Effect.Effect<A, unknown, Scope.Scope>) =>
    Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const client = yield* PgClient.make({ url: Redacted.make(server.url) })
      const parts = yield* PostgresCheckpointer.makeDriverWithClient(client, { schema, busyTimeoutMs: 5000 })
      return yield* use(parts, client)
    })).pipe(Effect.provide(Reactivity.layer)))
  const byHash = <T extends { readonly sha256: string }>(items: ReadonlyArray<T>) => [...items].sort((a, b) => a.sha256.localeCompare(b.sha256))

  it("stores each object once, touches without moving a time back, names what a touch misses, and deletes only what is still untouched", async () => {
    const a = objectOf(bytes("object a"))
    const b = objectOf(new Uint8Array([0, 255, 0, 1, 92, 120]))
    const c = objectOf(bytes("never stored"))
    await withDriver(freshSchema("objects"), ({ driver: { objects } }) =>
      Effect.gen(function*() {
        yield* objects.put([a, b, a], 1000)
        expect(byHash(yield* objects.list)).toEqual(byHash([
          { sha256: a.sha256, storedBytes: a.data.length, touchedMs: 1000 },
          { sha256: b.sha256, storedBytes: b.data.length, touchedMs: 1000 }
        ]))
        yield* objects.put([a], 500)
        yield* objects.put([a], 3000)
        expect(yield* objects.touch([b.sha256, c.sha256, b.sha256], 2000)).toEqual([c.sha256])
        expect(yield* objects.touch([b.sha256], 1500)).toEqual([])
        expect(yield* objects.touch([], 1500)).toEqual([])
        expect(byHash(yield* objects.list).map((object) => object.touchedMs)).toEqual(
          byHash([{ sha256: a.sha256, touchedMs: 3000 }, { sha256: b.sha256, touchedMs: 2000 }]).map((object) => object.touchedMs)
        )
        expect(yield* objects.sizes([a.sha256, a.sha256, c.sha256, b.sha256])).toEqual([
          { sha256: a.sha256, storedBytes: a.data.length },
          { sha256: b.sha256, storedBytes: b.data.length }
        ])
        expect(yield* objects.read(b.sha256)).toEqual(b.data)
        expect(yield* objects.read(c.sha256)).toBeUndefined()
        // b (touched at 2000) is before the cutoff, a (3000) is not, c is not stored.
        expect(yield* objects.deleteUntouched([a.sha256, b.sha256, c.sha256], 2500)).toEqual([
          { sha256: b.sha256, storedBytes: b.data.length }
        ])
        expect(yield* objects.deleteUntouched([], 2500)).toEqual([])
        expect(yield* objects.read(b.sha256)).toBeUndefined()
        expect((yield* objects.list).map((object) => object.sha256)).toEqual([a.sha256])
        // Stored again after its delete: a new object.
        yield* objects.put([b], 4000)
        expect(yield* objects.read(b.sha256)).toEqual(b.data)
      }))
  })

  it("a put of 2,500 objects takes 3 statements, and every object reads back byte for byte", async () => {
    const schema = freshSchema("objects_many")
    const many = Array.from({ length: 2500 }, (_, index) => objectOf(bytes(`object ${index} `.repeat(1 + (index % 7)))))
    const inserts = () =>
      Number(server.psql(`SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE 'INSERT INTO "${schema}".lite_agent_objects%'`))
    await withDriver(schema, ({ driver: { objects } }) =>
      Effect.gen(function*() {
        const before = inserts()
        yield* objects.put(many, 1000)
        expect(inserts() - before).toBe(3)
        expect((yield* objects.list).length).toBe(2500)
        for (const object of [many[0]!, many[999]!, many[1000]!, many[2499]!]) expect(yield* objects.read(object.sha256)).toEqual(object.data)
        expect(yield* objects.touch(many.map((object) => object.sha256), 2000)).toEqual([])
        expect((yield* objects.deleteUntouched(many.map((object) => object.sha256), 3000)).length).toBe(2500)
      }))
  })

  it("a delete passes over an object another transaction holds, without waiting: it is being touched", async () => {
    const schema = freshSchema("objects_held")
    const x = objectOf(bytes("held"))
    await withDriver(schema, ({ driver: { objects } }, client) =>
      Effect.gen(function*() {
        yield* objects.put([x], 1000)
        const holder = yield* client.reserve
        yield* holder.execute("BEGIN", [], undefined)
        yield* holder.execute(`UPDATE "${schema}".lite_agent_objects SET touched_ms = 1000 WHERE sha256 = $1`, [x.sha256], undefined)
        expect(yield* Effect.timeout(objects.deleteUntouched([x.sha256], 2000), "2 seconds")).toEqual([])
        yield* holder.execute("ROLLBACK", [], undefined)
        expect(yield* objects.deleteUntouched([x.sha256], 2000)).toEqual([{ sha256: x.sha256, storedBytes: x.data.length }])
      }))
  })

  it("gc over the store deletes the objects no log references once untouched past the grace, and keeps the others", async () => {
    const schema = freshSchema("gc")
    const kept = bytes("referenced by a session")
    const dropped = bytes("referenced by a deleted session")
    const snapshot = (data: Uint8Array) =>
      new FileSnapshot({
        toolUseId: "t",
        path: "f",
        state: { _tag: "content", data, sha256: sha256Hex(data), size: data.length, mode: 0o644 }
      })
    /** The live clock, `offsetMs` ahead. */
    const aheadBy = (offsetMs: number): Clock.Clock => {
      const live = Clock.make()
      return {
        [Clock.ClockTypeId]: Clock.ClockTypeId,
        unsafeCurrentTimeMillis: () => live.unsafeCurrentTimeMillis() + offsetMs,
        currentTimeMillis: Effect.sync(() => live.unsafeCurrentTimeMillis() + offsetMs),
        unsafeCurrentTimeNanos: () => live.unsafeCurrentTimeNanos() + BigInt(offsetMs) * 1_000_000n,
        currentTimeNanos: Effect.sync(() => live.unsafeCurrentTimeNanos() + BigInt(offsetMs) * 1_000_000n),
        sleep: (duration) => live.sleep(duration)
      }
    }
    const program = Effect.gen(function*() {
      const c = yield* Checkpointer
      yield* c.append("keep", [snapshot(kept)])
      yield* c.append("gone", [snapshot(dropped)])
      yield* c.delete("gone")
      const now = yield* c.gc()
      const later = yield* Effect.withClock(aheadBy(2 * 60 * 60_000))(c.gc())
      return { now, later, read: yield* c.readSnapshot("keep", sha256Hex(kept)) }
    })
    const result = await Effect.runPromise(program.pipe(Effect.provide(PostgresCheckpointer.layer({ url: server.url, schema }))))
    expect(result.now).toEqual({ sessions: 1, objects: 2, referenced: 1, recent: 1, deleted: 0, freedBytes: 0 })
    expect(result.later).toEqual({ sessions: 1, objects: 2, referenced: 1, recent: 0, deleted: 1, freedBytes: dropped.length })
    expect(result.read).toEqual(kept)
    expect(server.psql(`SELECT string_agg(sha256, ',') FROM ${schema}.lite_agent_objects`)).toBe(sha256Hex(kept))
  })

  it("the store's quota counts the server's objects and logs: room asked for, an append past it still taken, du says it is reached", async () => {
    const data = bytes("a snapshot larger than the quota")
    const program = Effect.gen(function*() {
      const c = yield* Checkpointer
      const before = yield* c.storeRoom([sha256Hex(data)])
      yield* c.append("q", [new FileSnapshot({ toolUseId: "t", path: "f", state: { _tag: "content", data, sha256: sha256Hex(data), size: data.length, mode: 0o644 } })])
      return { before, after: yield* c.storeRoom([sha256Hex(data)]), usage: yield* c.du() }
    })
    const layer = PostgresCheckpointer.layer({ url: server.url, schema: freshSchema("quota"), maxStoreBytes: 10 })
    const { after, before, usage } = await Effect.runPromise(Effect.scoped(program.pipe(Effect.provide(layer))))
    expect(before).toEqual({ maxStoreBytes: 10, storeBytes: 0, roomBytes: 10, stored: new Set() })
    expect(after!.stored).toEqual(new Set([sha256Hex(data)]))
    expect(after!.roomBytes).toBe(0)
    expect(usage.quota).toEqual({ maxStoreBytes: 10, storeBytes: usage.objects.bytes + usage.logBytes, reached: true })
    expect(usage.objects.objects).toBe(1)
  })

  it("an append's objects are stored in its own transaction: a pool of one connection appends snapshots and references", async () => {
    const schema = freshSchema("one_connection")
    const c = checkpointer({ url: server.url, schema, maxConnections: 1, connectTimeoutMs: 2000 })
    const data = bytes("file content")
    const snapshot = (toolUseId: string, state: FileSnapshot["state"]) => new FileSnapshot({ toolUseId, path: "a.txt", state })
    expect(await c.append("s", [snapshot("t1", { _tag: "content", data, sha256: sha256Hex(data), size: data.length, mode: 0o644 })])).toBe(1)
    // Another session naming the object by its hash alone: touched, not stored again.
    expect(await c.append("r", [snapshot("t2", { _tag: "stored", sha256: sha256Hex(data), size: data.length, mode: 0o644 })])).toBe(1)
    expect(await c.readSnapshot("r", sha256Hex(data))).toEqual(data)
    // A reference to an object the store does not hold is refused, and nothing is written.
    const absent = bytes("absent")
    const refused = await rejection(
      c.append("q", [snapshot("t3", { _tag: "stored", sha256: sha256Hex(absent), size: absent.length, mode: 0o644 })])
    )
    expect(refused).toBeInstanceOf(InvalidEventError)
    expect(await c.head("q")).toBe(0)
    expect(server.psql(`SELECT count(*) FROM ${schema}.lite_agent_sessions WHERE id = 'q'`)).toBe("0")
    expect(server.psql(`SELECT count(*) FROM ${schema}.lite_agent_objects`)).toBe("1")
  })

  it("writers of two sessions storing and touching the same objects in crossing orders all succeed (a deadlock is tried again)", async () => {
    const schema = freshSchema("crossing")
    const c = checkpointer({ url: server.url, schema })
    const x = bytes("x")
    const y = bytes("y")
    const content = (data: Uint8Array) => new FileSnapshot({
      toolUseId: "t",
      path: "f",
      state: { _tag: "content", data, sha256: sha256Hex(data), size: data.length, mode: 0o644 }
    })
    const stored = (data: Uint8Array) => new FileSnapshot({
      toolUseId: "t",
      path: "g",
      state: { _tag: "stored", sha256: sha256Hex(data), size: data.length, mode: 0o644 }
    })
    await c.append("setup", [content(x), content(y)])
    const deadlocks = () => Number(server.psql("SELECT deadlocks FROM pg_stat_database WHERE datname = 'postgres'"))
    const before = deadlocks()
    const rounds = 4
    for (let round = 0; round < rounds; round++) {
      // "a" stores y, then touches x; "b" stores x, then touches y.
      expect(await Promise.all([c.append("a", [content(y), stored(x)]), c.append("b", [content(x), stored(y)])])).toEqual([
        2 * round + 2,
        2 * round + 2
      ])
    }
    console.log(`postgres crossing object writes: ${deadlocks() - before} deadlocks in ${rounds} rounds, each tried again`)
  })
})

describe("checkIntegrity", () => {
  it("reports damage the server's tables can show: a missing event, events without a session, an object whose bytes changed", async () => {
    const schema = freshSchema("integrity")
    const c = checkpointer({ url: server.url, schema })
    const data = new TextEncoder().encode("file content")
    await c.append("good", [message("1"), message("2")])
    await c.append("gap", [message("1"), message("2"), message("3")])
    await c.append("blob", [
      new FileSnapshot({
        toolUseId: "t1",
        path: "a.txt",
        state: { _tag: "content", data, sha256: sha256Hex(data), size: data.length, mode: 0o644 }
      })
    ])
    expect(await c.checkIntegrity()).toMatchObject({ ok: true })
    server.psql(`DELETE FROM ${schema}.lite_agent_events WHERE session_id = 'gap' AND seq = 2`)
    server.psql(`UPDATE ${schema}.lite_agent_objects SET data = 'tampered'::bytea WHERE sha256 = '${sha256Hex(data)}'`)
    server.psql(`INSERT INTO ${schema}.lite_agent_events VALUES ('orphan', 1, 0, '{}')`)
    const report = await c.checkIntegrity()
    expect(report.ok).toBe(false)
    expect(report.detail).toContain("session gap: head 3, but 2 events from seq 1 to 3")
    expect(report.detail).toContain("events of session orphan without a session row")
    expect(report.detail).toContain(`object ${sha256Hex(data)}: its bytes hash to ${sha256Hex(new TextEncoder().encode("tampered"))}`)
    expect(report.detail).not.toContain("good")
    // Reading the damaged session fails with the integrity error; the others read back.
    expect(await rejection(c.read("gap"))).toBeInstanceOf(CheckpointIntegrityError)
    server.psql(`UPDATE ${schema}.lite_agent_events SET event = '{not json' WHERE session_id = 'good' AND seq = 2`)
    const notJson = await rejection(c.read("good"))
    expect(notJson).toBeInstanceOf(CheckpointIntegrityError)
    expect(notJson).toMatchObject({ sessionId: "good", seq: 2 })
  })
})

type SessionChangeOf = Extract<PostgresCheckpointer.SessionChange, { sessionId: string }>
const isSessionChange = (change: PostgresCheckpointer.SessionChange): change is SessionChangeOf => change.kind !== "reconnected"

describe("the live feed", () => {
  it("streams every committed append, truncate and delete of its schema, from any process, with head and generation", async () => {
    const schema = freshSchema("feed")
    const writer = checkpointer({ url: server.url, schema })
    const elsewhere = checkpointer({ url: server.url, schema: freshSchema("feed_other") })
    await writer.list() // the schema exists before the feed starts
    const program = Effect.gen(function*() {
      const { changes } = yield* PostgresCheckpointer.PostgresChanges
      const fiber = yield* Effect.fork(Stream.runCollect(Stream.take(changes, 5)))
      yield* Effect.sleep("300 millis") // LISTEN is in place
      const run = <A>(promise: () => Promise<A>) => Effect.promise(promise)
      yield* run(() => writer.append("s", [message("1"), message("2")]))
      yield* run(() => elsewhere.append("s", [message("not this schema")]))
      yield* run(() => writer.append("s", [message("3")], 2))
      const afterAppends = yield* run(() => writer.read("s"))
      yield* run(() => writer.truncate("s", 1))
      yield* run(() => writer.append("t", [message("t1")]))
      yield* run(() => writer.delete("t"))
      return { changes: Chunk.toArray(yield* Fiber.join(fiber)), afterAppends: afterAppends.length }
    })
    const layer = PostgresCheckpointer.layer({ url: server.url, schema })
    const { changes: heard } = await Effect.runPromise(program.pipe(Effect.provide(layer), Effect.timeout("20 seconds")))
    const changes = heard.filter(isSessionChange)
    expect(changes).toHaveLength(heard.length)
    expect(changes.map(({ kind, sessionId, head }) => [kind, sessionId, head])).toEqual([
      ["append", "s", 2],
      ["append", "s", 3],
      ["truncate", "s", 1],
      ["append", "t", 1],
      ["delete", "t", 0]
    ])
    expect(changes[0]!.generation).toBe(changes[1]!.generation)
    expect(changes[2]!.generation).not.toBe(changes[1]!.generation)
    expect(changes[4]!.generation).toBe("none")
    const version = await Effect.runPromise(
      Effect.flatMap(Checkpointer, (c) => c.version("s")).pipe(Effect.provide(layer), Effect.scoped)
    )
    expect(version).toEqual({ head: 1, generation: changes[2]!.generation })
  })
})

describe("a follower that has just started", () => {
  it("sees another connection's append made at once, with no poll to find it: a follow listens before it first looks", async () => {
    const schema = freshSchema("follow_start")
    const writer = checkpointer({ url: server.url, schema })
    for (let trial = 0; trial < 20; trial++) {
      const session = `s${trial}`
      await writer.append(session, [message("first")])
      // A new checkpointer each trial: its live feed opens a connection of its own and LISTENs on it.
      const follower = checkpointer({ url: server.url, schema })
      // Its pool is connected: the first look is quick, as a running server's is.
      expect(await follower.head(session)).toBe(1)
      const stop = new AbortController()
      const seen: Array<string> = []
      const following = (async () => {
        for await (const item of follower.follow(session, { sinceSeq: 1, signal: stop.signal, pollMs: 600_000 })) {
          if (item.type === "event") seen.push(contentOf(item.stored))
        }
      })()
      try {
        await writer.append(session, [message(`right after ${trial}`)])
        await eventually(() => seen.length > 0, 15_000).catch(() => undefined)
        expect(seen, `trial ${trial}`).toEqual([`right after ${trial}`])
      } finally {
        stop.abort()
        await following
      }
    }
  })
})

describe("a follower's looks", () => {
  it("take small appends from their notification without a read; a large append and a truncate are read", async () => {
    const schema = freshSchema("carried")
    const writer = checkpointer({ url: server.url, schema })
    await writer.append("s", [message("1")])
    /** How often the schema's page statement (a follower's read) ran, and how often anything ran LISTEN. */
    const calls = (pattern: string) =>
      Number(server.psql(`SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE query LIKE '${pattern}'`))
    const pageReads = () => calls(`%LEFT JOIN LATERAL%"${schema}".lite_agent_events%`)
    const items: Array<FollowItem> = []
    const program = Effect.gen(function*() {
      const c = yield* Checkpointer
      const start = yield* c.version("s")
      server.psql("SELECT pg_stat_statements_reset()")
      // A poll of an hour: every look below is a wake-up's.
      const follower = c.follow("s", { sinceSeq: start.head, generation: start.generation, pollMs: 3_600_000 })
      yield* Effect.forkScoped(Stream.runForEach(follower, (item) => Effect.sync(() => items.push(item))))
      const until = (check: () => boolean) => Effect.promise(() => eventually(check))
      const run = <A>(promise: () => Promise<A>) => Effect.promise(promise)
      // Listening, and the first look (a read: nothing was heard yet) done.
      yield* until(() => calls("LISTEN%") >= 1 && pageReads() >= 1)
      const afterFirstLook = pageReads()

      for (const text of ["2", "3", "4"]) yield* run(() => writer.append("s", [message(text)]))
      yield* run(() => writer.append("s", [message("5"), message("6")]))
      yield* until(() => items.length === 5)
      const afterSmall = pageReads()

      yield* run(() => writer.append("s", [message("x".repeat(10_000))]))
      yield* until(() => items.length === 6)
      const afterLarge = pageReads()

      yield* run(() => writer.append("s", [message("8")]))
      yield* until(() => items.length === 7)
      const afterSmallAgain = pageReads()

      yield* run(() => writer.truncate("s", 2))
      yield* until(() => items.some((item) => item.type === "reset") && items.length === 10)
      return { afterFirstLook, afterSmall, afterLarge, afterSmallAgain, afterTruncate: pageReads() }
    })
    const reads = await Effect.runPromise(
      program.pipe(Effect.provide(PostgresCheckpointer.layer({ url: server.url, schema })), Effect.scoped, Effect.timeout("60 seconds"))
    )
    expect(reads.afterSmall).toBe(reads.afterFirstLook)
    expect(reads.afterLarge).toBe(reads.afterSmall + 1)
    expect(reads.afterSmallAgain).toBe(reads.afterLarge)
    expect(reads.afterTruncate).toBeGreaterThan(reads.afterSmallAgain)
    // What the follower got is what a read gets: every event once, in order, then the new log.
    expect(items.map((item) => item.type === "reset" ? `reset ${item.head}` : `${item.stored.seq}:${contentOf(item.stored).slice(0, 3)}`))
      .toEqual(["2:2", "3:3", "4:4", "5:5", "6:6", "7:xxx", "8:8", "reset 2", "1:1", "2:2"])
    const generations = new Set(items.filter((item) => item.type === "event").slice(0, 7).map((item) => item.generation))
    expect(generations.size).toBe(1)
  })
})

describe("closing", () => {
  it("close is idempotent and any later use is CheckpointerClosedError; the data stays", async () => {
    const schema = freshSchema("close")
    const c = postgresCheckpointer({ url: server.url, schema })
    await c.append("s", [message("x")])
    await c.close()
    await c.close()
    await expect(c.head("s")).rejects.toBeInstanceOf(CheckpointerClosedError)
    await expect(c.checkIntegrity()).rejects.toBeInstanceOf(CheckpointerClosedError)
    const reopened = checkpointer({ url: server.url, schema })
    expect(await reopened.head("s")).toBe(1)
    expect(await reopened.checkIntegrity()).toMatchObject({ ok: true })
  })
})

describe("the live feed across a server crash", () => {
  it("notices its connection is gone, listens again once the server is back, says `reconnected`, and goes on", async () => {
    const schema = freshSchema("feed_crash")
    const writer = checkpointer({ url: server.url, schema })
    await writer.list()
    const program = Effect.gen(function*() {
      const { changes } = yield* PostgresCheckpointer.PostgresChanges
      const heard: Array<PostgresCheckpointer.SessionChange> = []
      const fiber = yield* Effect.fork(Stream.runForEach(changes, (change) => Effect.sync(() => heard.push(change))))
      const until = (what: string, done: () => boolean) =>
        Effect.gen(function*() {
          while (!done()) yield* Effect.sleep("50 millis")
        }).pipe(Effect.timeoutFail({ duration: "30 seconds", onTimeout: () => new Error(`timed out waiting for ${what}`) }))
      yield* Effect.sleep("300 millis")
      yield* Effect.promise(() => writer.append("s", [message("before")]))
      yield* until("the first append", () => heard.length >= 1)
      server.crash()
      yield* Effect.sleep("500 millis")
      server.start()
      yield* until("reconnected", () => heard.some((change) => change.kind === "reconnected"))
      // The writer's pool lost its connections too: its first call may fail while it reconnects.
      yield* Effect.promise(() => writer.append("s", [message("after")]).catch(() => writer.append("s", [message("after")])))
      yield* until("the append after the restart", () => heard.filter(isSessionChange).length >= 2)
      yield* Fiber.interrupt(fiber)
      return heard
    })
    const heard = await Effect.runPromise(program.pipe(Effect.provide(PostgresCheckpointer.layer({ url: server.url, schema }))))
    expect(heard.map((change) => change.kind === "reconnected" ? "reconnected" : `${change.kind} ${change.head}`)).toEqual([
      "append 1",
      "reconnected",
      "append 2"
    ])
  })
})
