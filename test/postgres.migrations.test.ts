/**
 * The Postgres backend's schema migrations, against a real server started for this file: a
 * schema created by the hand-written migration of releases before the Migrator is adopted with
 * its sessions intact; a version-1 schema's per-session snapshots become the shared object
 * store, every referenced object reading back as it was; a schema marked newer is refused and
 * left as it is; the Migrator creates the same tables; checkpointers opening an empty schema at
 * the same moment all succeed and migrate it once; a mixed-case schema opens again.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { postgresCheckpointer } from "../src/checkpoint-postgres.js"
import { FileSnapshot, type PromiseCheckpointerWithIntegrity, SchemaVersionError, StorageError, UserMessage } from "../src/index.js"
import { sha256Hex } from "../src/core/internal/sha256.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"
import { storedSnapshotJson } from "./support/contents.js"

let server: PostgresServer
beforeAll(async () => {
  server = await startPostgres()
})
afterAll(() => server?.destroy())

const message = (text: string) => new UserMessage({ content: text, origin: "user" })
const contentOf = (stored: { readonly event: unknown }) => String((stored.event as UserMessage).content)

let schemas = 0
const freshSchema = (label: string) => `m_${label}_${++schemas}`

const open: Array<PromiseCheckpointerWithIntegrity> = []
const checkpointer = (schema: string) => {
  const c = postgresCheckpointer({ url: server.url, schema })
  open.push(c)
  return c
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()))
})

/**
 * What releases before the Migrator ran on an empty schema, in one transaction: their
 * migration's DDL and version marker (schema version 1), copied as they were.
 */
const createPreMigratorSchema = (schema: string) => {
  const s = `"${schema}"`
  server.psql(`
    CREATE SCHEMA ${s};
    CREATE TABLE IF NOT EXISTS ${s}.lite_agent_meta (key text PRIMARY KEY, value text NOT NULL);
    CREATE TABLE ${s}.lite_agent_sessions (
      id text PRIMARY KEY,
      head bigint NOT NULL,
      mtime bigint NOT NULL,
      generation bigint NOT NULL
    );
    CREATE TABLE ${s}.lite_agent_events (
      session_id text NOT NULL,
      seq bigint NOT NULL,
      ts bigint NOT NULL,
      event text NOT NULL,
      PRIMARY KEY (session_id, seq)
    );
    CREATE TABLE ${s}.lite_agent_blobs (
      session_id text NOT NULL,
      sha256 text NOT NULL,
      data bytea NOT NULL,
      PRIMARY KEY (session_id, sha256)
    );
    INSERT INTO ${s}.lite_agent_meta (key, value) VALUES ('schema_version', '1')
      ON CONFLICT (key) DO UPDATE SET value = excluded.value;
  `)
}

/** What the Migrator of a version-1 release left besides: its table, recording migration 1. */
const recordVersion1Migration = (schema: string) =>
  server.psql(`
    CREATE TABLE "${schema}".lite_agent_migrations (
      migration_id integer primary key,
      created_at timestamp with time zone not null default now(),
      name text not null
    );
    INSERT INTO "${schema}".lite_agent_migrations (migration_id, name) VALUES (1, 'create_tables');
  `)

const DATA_TABLES = ["lite_agent_sessions", "lite_agent_events"]

/**
 * Sessions "a" (two events, a snapshot) and "b" (one event) in `schema`, rows as the code before
 * the Migrator wrote them: the rows of the log did not change, so they are written by today's
 * code in a scratch schema and copied; the snapshot is written by hand into version 1's store.
 */
const fillWithSessions = async (schema: string) => {
  const scratch = freshSchema("scratch")
  const writer = checkpointer(scratch)
  await writer.append("a", [message("one"), message("two")])
  await writer.append("b", [message("bee")])
  await writer.close()
  for (const table of DATA_TABLES) server.psql(`INSERT INTO "${schema}".${table} SELECT * FROM ${scratch}.${table}`)
  server.psql(`INSERT INTO "${schema}".lite_agent_blobs VALUES ('a', encode(sha256('kept'::bytea), 'hex'), 'kept'::bytea)`)
  server.psql(`DROP SCHEMA ${scratch} CASCADE`)
}

const migrationsOf = (schema: string) =>
  server.psql(`SELECT string_agg(migration_id || ':' || name, ',' ORDER BY migration_id) FROM "${schema}".lite_agent_migrations`)
const markerOf = (schema: string) => server.psql(`SELECT value FROM "${schema}".lite_agent_meta WHERE key = 'schema_version'`)
const tableExists = (schema: string, table: string) => server.psql(`SELECT to_regclass('"${schema}".${table}') IS NOT NULL`) === "t"
const ALL_MIGRATIONS = "1:create_tables,2:shared_objects"

describe("a schema created before the Migrator", () => {
  it("is adopted without running its DDL again, then migrated: its sessions stay readable and appendable, its snapshots kept", async () => {
    const schema = freshSchema("adopted")
    createPreMigratorSchema(schema)
    await fillWithSessions(schema)
    const c = checkpointer(schema)
    expect((await c.read("a")).map(contentOf)).toEqual(["one", "two"])
    expect(await c.append("a", [message("three")])).toBe(3)
    expect((await c.read("a")).map(contentOf)).toEqual(["one", "two", "three"])
    expect((await c.list()).map((session) => session.id).sort()).toEqual(["a", "b"])
    expect(await c.checkIntegrity()).toMatchObject({ ok: true })
    expect(server.psql(`SELECT count(*) FROM ${schema}.lite_agent_objects`)).toBe("1")
    expect(tableExists(schema, "lite_agent_blobs")).toBe(false)
    expect(migrationsOf(schema)).toBe(ALL_MIGRATIONS)
    expect(markerOf(schema)).toBe("2")
    await c.close()

    const reopened = checkpointer(schema)
    expect(await reopened.append("b", [message("bee again")])).toBe(2)
    expect(migrationsOf(schema)).toBe(ALL_MIGRATIONS)
  })

  it("4 checkpointers opening one at the same moment all succeed, and it is adopted once", async () => {
    const schema = freshSchema("adopted_together")
    createPreMigratorSchema(schema)
    await fillWithSessions(schema)
    const many = Array.from({ length: 4 }, () => checkpointer(schema))
    expect(await Promise.all(many.map((c) => c.head("a")))).toEqual([2, 2, 2, 2])
    expect(migrationsOf(schema)).toBe(ALL_MIGRATIONS)
    expect(server.psql(`SELECT count(*) FROM ${schema}.lite_agent_objects`)).toBe("1")
  })

  it("the Migrator creates the same tables, columns and keys as the hand-written migration did, once both are migrated", async () => {
    const before = freshSchema("hand_written")
    const after = freshSchema("migrator")
    createPreMigratorSchema(before)
    await checkpointer(before).list()
    await checkpointer(after).list()
    const shape = (schema: string) =>
      server.psql(`
        SELECT string_agg(table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable, ', '
                          ORDER BY table_name, ordinal_position)
          FROM information_schema.columns WHERE table_schema = '${schema}' AND table_name <> 'lite_agent_migrations'`) +
      "\n" +
      server.psql(`
        SELECT string_agg(replace(indexdef, '${schema}', 'S'), ', ' ORDER BY indexname)
          FROM pg_indexes WHERE schemaname = '${schema}' AND tablename <> 'lite_agent_migrations'`)
    expect(shape(after)).toBe(shape(before))
    expect(markerOf(after)).toBe(markerOf(before))
  })
})

describe("a version-1 schema's per-session snapshots", () => {
  const bytes = (text: string) => new TextEncoder().encode(text)
  /** Referenced by sessions "one" and "two", stored by both. */
  const shared = bytes("stored by two sessions\n")
  /** Referenced by "one" alone; bytes that are no text. */
  const own = new Uint8Array([0, 1, 2, 255, 254, 0, 10, 13, 0])
  /** Stored by "two", referenced by no event. */
  const unreferenced = bytes("named by no event")
  const sqlText = (text: string) => `'${text.replaceAll("'", "''")}'`
  const sqlBytes = (data: Uint8Array) => `decode('${Buffer.from(data).toString("hex")}', 'hex')`
  // Events as version 1 stored them ({ seq, ts, event } with the event as JSON text).
  const userMessage = (text: string) => JSON.stringify({ content: text, origin: "user", _tag: "UserMessage" })
  const fileSnapshot = (path: string, data: Uint8Array) => storedSnapshotJson(path, sha256Hex(data), data.length)
  const TS = 1_700_000_000_000
  const LOGS: Record<string, ReadonlyArray<string>> = {
    one: [userMessage("first"), fileSnapshot("a.txt", shared), fileSnapshot("bin.dat", own)],
    two: [fileSnapshot("a.txt", shared), userMessage("second")],
    three: [userMessage("third")]
  }

  /** Version 1's tables and marker, holding `LOGS` and their snapshots (one copy per session that stored it). */
  const fillVersion1 = (schema: string) => {
    const s = `"${schema}"`
    const sessions = Object.entries(LOGS).map(([id, events], index) => `(${sqlText(id)}, ${events.length}, ${TS + index}, ${index + 11})`)
    const events = Object.entries(LOGS).flatMap(([id, log]) =>
      log.map((event, index) => `(${sqlText(id)}, ${index + 1}, ${TS + index}, ${sqlText(event)})`))
    const blobs = [
      ["one", shared],
      ["one", own],
      ["two", shared],
      ["two", unreferenced]
    ].map(([id, data]) => `(${sqlText(id as string)}, '${sha256Hex(data as Uint8Array)}', ${sqlBytes(data as Uint8Array)})`)
    server.psql(`
      INSERT INTO ${s}.lite_agent_sessions (id, head, mtime, generation) VALUES ${sessions.join(", ")};
      INSERT INTO ${s}.lite_agent_events (session_id, seq, ts, event) VALUES ${events.join(", ")};
      INSERT INTO ${s}.lite_agent_blobs (session_id, sha256, data) VALUES ${blobs.join(", ")};
      -- A damaged copy of the shared object in a third session: the intact copy is the one kept.
      INSERT INTO ${s}.lite_agent_blobs (session_id, sha256, data) VALUES ('three', '${sha256Hex(shared)}', 'tampered'::bytea);
    `)
  }

  const expectMigrated = async (schema: string, c: PromiseCheckpointerWithIntegrity, openedAt: number) => {
    // Every referenced object reads back byte for byte, through each session that references it.
    expect(await c.readSnapshot("one", sha256Hex(shared))).toEqual(shared)
    expect(await c.readSnapshot("two", sha256Hex(shared))).toEqual(shared)
    expect(await c.readSnapshot("one", sha256Hex(own))).toEqual(own)
    // The objects no event names are kept too, for a collection to judge.
    expect(await c.readSnapshot("two", sha256Hex(unreferenced))).toEqual(unreferenced)
    expect(await c.listSnapshots("one")).toEqual(
      expect.arrayContaining([
        { sha256: sha256Hex(shared), storedBytes: shared.length },
        { sha256: sha256Hex(own), storedBytes: own.length }
      ])
    )
    expect(await c.listSnapshots("two")).toEqual([{ sha256: sha256Hex(shared), storedBytes: shared.length }])
    // The events read as before.
    for (const [id, log] of Object.entries(LOGS)) {
      const stored = await c.read(id)
      expect(stored.map(({ seq, ts }) => ({ seq, ts }))).toEqual(log.map((_, index) => ({ seq: index + 1, ts: TS + index })))
      expect(stored.map((record) => (record.event as { _tag: string })._tag)).toEqual(log.map((event) => JSON.parse(event)._tag))
    }
    expect((await c.read("one"))[2]!.event).toMatchObject({
      _tag: "FileSnapshot",
      path: "bin.dat",
      state: { _tag: "stored", sha256: sha256Hex(own), size: own.length }
    })
    expect((await c.read("two")).map(contentOf)).toEqual(["undefined", "second"])
    // One object per hash; version 1's store is gone; the objects were touched when migrated.
    expect(server.psql(`SELECT count(*) FROM "${schema}".lite_agent_objects`)).toBe("3")
    expect(tableExists(schema, "lite_agent_blobs")).toBe(false)
    const touched = server.psql(`SELECT min(touched_ms) || ' ' || max(touched_ms) FROM "${schema}".lite_agent_objects`).split(" ").map(Number)
    expect(touched[0]).toBeGreaterThanOrEqual(openedAt)
    expect(touched[1]).toBeLessThanOrEqual(Date.now())
    expect(markerOf(schema)).toBe("2")
    expect(migrationsOf(schema)).toBe(ALL_MIGRATIONS)
    expect(await c.checkIntegrity()).toMatchObject({ ok: true })
  }

  it("opens with migration 2: one object per hash, every referenced one reading back as stored; the events as before; the old store dropped", async () => {
    const schema = freshSchema("v1_blobs")
    createPreMigratorSchema(schema)
    recordVersion1Migration(schema)
    fillVersion1(schema)
    const openedAt = Date.now()
    const c = checkpointer(schema)
    await expectMigrated(schema, c, openedAt)
    // Written to after: a new snapshot of the shared bytes is the same object.
    const data = shared
    expect(
      await c.append("three", [
        new FileSnapshot({
          toolUseId: "t2",
          path: "copy.txt",
          state: { _tag: "content", data, sha256: sha256Hex(data), size: data.length, mode: 0o644 }
        })
      ])
    ).toBe(2)
    expect(server.psql(`SELECT count(*) FROM "${schema}".lite_agent_objects`)).toBe("3")
    expect(await c.readSnapshot("three", sha256Hex(shared))).toEqual(shared)
  })

  it("a version-1 schema made before the Migrator is adopted and migrated the same way", async () => {
    const schema = freshSchema("v1_hand_blobs")
    createPreMigratorSchema(schema)
    fillVersion1(schema)
    const openedAt = Date.now()
    await expectMigrated(schema, checkpointer(schema), openedAt)
  })

  it("a migration that fails part way leaves version 1 whole, and the next open migrates it", async () => {
    const schema = freshSchema("v1_failed")
    createPreMigratorSchema(schema)
    recordVersion1Migration(schema)
    fillVersion1(schema)
    // In the way of the migration's CREATE TABLE, after the copy's source was locked.
    server.psql(`CREATE TABLE "${schema}".lite_agent_objects (obstacle int)`)
    const failed = checkpointer(schema)
    const error = await failed.read("one").then(() => undefined, (failure: unknown) => failure)
    expect(error).toBeInstanceOf(StorageError)
    expect(markerOf(schema)).toBe("1")
    expect(migrationsOf(schema)).toBe("1:create_tables")
    expect(server.psql(`SELECT count(*) FROM "${schema}".lite_agent_blobs`)).toBe("5")
    await failed.close()

    server.psql(`DROP TABLE "${schema}".lite_agent_objects`)
    const openedAt = Date.now()
    await expectMigrated(schema, checkpointer(schema), openedAt)
  })

  it("a schema marked 3 is refused with SchemaVersionError, and nothing in it changes", async () => {
    const schema = freshSchema("v3")
    createPreMigratorSchema(schema)
    recordVersion1Migration(schema)
    fillVersion1(schema)
    server.psql(`UPDATE "${schema}".lite_agent_meta SET value = '3' WHERE key = 'schema_version'`)
    const contents = () =>
      ["lite_agent_meta", "lite_agent_migrations", "lite_agent_sessions", "lite_agent_events", "lite_agent_blobs"].map((table) =>
        server.psql(`SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM "${schema}".${table} t`)
      ).join(",") +
      server.psql(`SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE schemaname = '${schema}'`)
    const before = contents()
    const c = checkpointer(schema)
    for (const call of [() => c.read("one"), () => c.append("one", [message("x")]), () => c.readSnapshot("one", sha256Hex(shared))]) {
      const error = await call().then(() => undefined, (failure: unknown) => failure)
      expect(error).toBeInstanceOf(SchemaVersionError)
      expect(error).toMatchObject({ found: 3, supported: 2 })
    }
    expect(contents()).toBe(before)
    expect(markerOf(schema)).toBe("3")
    expect(tableExists(schema, "lite_agent_objects")).toBe(false)
  })
})

describe("concurrent first opens", () => {
  it("4 checkpointers opening one empty schema at the same moment all succeed, and it is migrated once (3 rounds)", async () => {
    // The Migrator alone failed 2 or 3 of 4 such opens in every round measured (see migrations.ts).
    for (let round = 0; round < 3; round++) {
      const schema = freshSchema("together")
      const many = Array.from({ length: 4 }, () => checkpointer(schema))
      const heads = await Promise.all(many.map((c, index) => c.append(`s${index}`, [message(`from ${index}`)])))
      expect(heads).toEqual([1, 1, 1, 1])
      // The tables' DDL has no IF NOT EXISTS: a second run would have failed an open.
      expect(migrationsOf(schema)).toBe(ALL_MIGRATIONS)
      expect(markerOf(schema)).toBe("2")
      await Promise.all(open.splice(0).map((c) => c.close()))
    }
  })

  it("a mixed-case schema is found again by later opens, including several at once", async () => {
    const schema = `Mixed_${++schemas}`
    const first = checkpointer(schema)
    expect(await first.append("s", [message("x")])).toBe(1)
    await first.close()
    const many = Array.from({ length: 3 }, () => checkpointer(schema))
    expect(await Promise.all(many.map((c) => c.head("s")))).toEqual([1, 1, 1])
    expect(migrationsOf(schema)).toBe(ALL_MIGRATIONS)
  })
})

describe("a migration cut short", () => {
  /** What the Migrator leaves when its transaction never commits: its table, created before, and empty. */
  const leaveEmptyMigrationsTable = (schema: string) =>
    server.psql(`CREATE TABLE "${schema}".lite_agent_migrations (
      migration_id integer primary key,
      created_at timestamp with time zone not null default now(),
      name text not null
    )`)

  it("an empty migrations table is migrated into, in an empty schema and in one made before the Migrator, mixed-case names included", async () => {
    const empty = `Mixed_Empty_${++schemas}`
    server.psql(`CREATE SCHEMA "${empty}"`)
    leaveEmptyMigrationsTable(empty)
    expect(await checkpointer(empty).append("s", [message("x")])).toBe(1)
    expect(migrationsOf(empty)).toBe(ALL_MIGRATIONS)
    expect(markerOf(empty)).toBe("2")

    const made = `Mixed_Made_${++schemas}`
    createPreMigratorSchema(made)
    await fillWithSessions(made)
    leaveEmptyMigrationsTable(made)
    const c = checkpointer(made)
    expect((await c.read("a")).map(contentOf)).toEqual(["one", "two"])
    expect(await c.append("a", [message("three")])).toBe(3)
    expect(migrationsOf(made)).toBe(ALL_MIGRATIONS)
    expect(tableExists(made, "lite_agent_blobs")).toBe(false)
  })
})
