/**
 * Followers' wake-ups are keyed by session, on real stores: with many sessions followed, a
 * commit by another connection (as another process's would be) wakes the followers of the
 * session it changed only — each wake-up is a look (a `version` query, maybe a read), so a
 * commit must not cost a look per followed session. A SQLite commit is heard from the WAL's
 * file events at once, not at the next poll. And no wake-up is lost: a follower polling only
 * every 10 minutes still sees every other connection's append to its session.
 */
import Database from "better-sqlite3"
import { Effect, Exit, Redacted, Scope } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { PgClient } from "@effect/sql-pg"
import * as Reactivity from "@effect/experimental/Reactivity"
import { type PromiseCheckpointerWithIntegrity, UserMessage } from "../src/index.js"
import { makeChangeFeed } from "../src/backends/postgres/changeFeed.js"
import { makeTransactions } from "../src/backends/postgres/transactions.js"
import { fileWrites, makeCommitWatch } from "../src/backends/sqlite/commitWatch.js"
import { makeTempDir, removeTempDirs } from "./support/processes.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"
import { openStore, postgresLocation } from "./support/stores.js"

let server: PostgresServer
beforeAll(async () => {
  server = await startPostgres()
})
afterAll(() => {
  server?.destroy()
  removeTempDirs()
})

const sessions = Array.from({ length: 20 }, (_, i) => `session-${i}`)
const message = (content: string) => new UserMessage({ content })

const until = async (what: string, condition: () => boolean, timeoutMs = 30_000) => {
  const started = Date.now()
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/** Subscribe to every session's wake-ups in `scope`, counting them per session. */
const countWakeUps = async (
  scope: Scope.CloseableScope,
  watch: (sessionId: string, onChange: () => void) => Effect.Effect<void, never, Scope.Scope>
) => {
  const counts = new Map(sessions.map((session) => [session, 0]))
  await Effect.runPromise(
    Effect.forEach(sessions, (session) => Scope.extend(watch(session, () => counts.set(session, counts.get(session)! + 1)), scope), {
      discard: true
    })
  )
  return counts
}

/**
 * Append to each session whose followers have not woken yet, until all have: a feed may start
 * hearing after the subscription returns (PostgreSQL's LISTEN runs in a fiber of its own), so a
 * first append may come before anyone is listening.
 */
const wakeEveryone = async (writer: PromiseCheckpointerWithIntegrity, counts: Map<string, number>) => {
  for (let round = 0; [...counts.values()].some((count) => count === 0); round++) {
    if (round === 50) throw new Error("followers never woke")
    for (const [session, count] of counts) if (count === 0) await writer.append(session, [message(`warm-up ${round}`)])
    await until("every follower's wake-up", () => [...counts.values()].every((count) => count > 0), 2_000).catch(() => undefined)
  }
}

/** Appends to one session, each waited for by its followers: the others must not wake at all. */
const appendToOneSession = async (writer: PromiseCheckpointerWithIntegrity, counts: Map<string, number>) => {
  const target = sessions[7]!
  for (const session of sessions) counts.set(session, 0)
  for (let i = 1; i <= 10; i++) {
    await writer.append(target, [message(`only ${i}`)])
    await until(`the wake-up for append ${i}`, () => counts.get(target)! >= i)
  }
  expect(counts.get(target)).toBe(10)
  const others = sessions.filter((session) => session !== target && counts.get(session)! > 0)
  expect(others).toEqual([])
}

/** Every session followed through `follower`, polling every 10 minutes; each sees `writer`'s append. */
const followersSeeOtherConnection = async (follower: PromiseCheckpointerWithIntegrity, writer: PromiseCheckpointerWithIntegrity) => {
  const stops = sessions.map(() => new AbortController())
  const seen = new Map<string, Array<string>>(sessions.map((session) => [session, []]))
  const heads = new Map<string, number>()
  for (const session of sessions) heads.set(session, await writer.head(session))
  const done = sessions.map(async (session, i) => {
    for await (const item of follower.follow(session, { sinceSeq: heads.get(session)!, signal: stops[i]!.signal, pollMs: 600_000 })) {
      if (item.type === "event") seen.get(session)!.push(String((item.stored.event as UserMessage).content))
    }
  })
  try {
    for (let round = 0; round < 3; round++) {
      for (const session of sessions) await writer.append(session, [message(`${session} ${round}`)])
      await until(`round ${round} at every follower`, () => [...seen.values()].every((items) => items.length > round))
    }
    for (const [session, items] of seen) expect(items).toEqual([0, 1, 2].map((round) => `${session} ${round}`))
  } finally {
    for (const stop of stops) stop.abort()
    await Promise.all(done)
  }
}

/** Two checkpointers on one store: the follower's sessions each get a first event, then followersSeeOtherConnection. */
const followersOfOneStoreSeeAnother = async (backend: "sqlite" | "postgres", location: string) => {
  const writer = await openStore(backend, location)
  const follower = await openStore(backend, location)
  try {
    for (const session of sessions) await writer.append(session, [message("first")])
    await followersSeeOtherConnection(follower, writer)
  } finally {
    await follower.close()
    await writer.close()
  }
}

/** A commit watch on a second connection to a SQLite store, counting wake-ups while a checkpointer appends to one session. */
const countSqliteWakeUps = async (watchOptions: { readonly pollMs: number; readonly withFileEvents: boolean }) => {
  const file = `${makeTempDir("keyed-sqlite")}/sessions.db`
  const writer = await openStore("sqlite", file)
  for (const session of sessions) await writer.append(session, [message("first")])
  const db = new Database(file)
  const head = db.prepare<[string], { head: number; generation: number }>("SELECT head, generation FROM lite_agent_sessions WHERE id = ?")
  const scope = Effect.runSync(Scope.make())
  try {
    const watch = await Effect.runPromise(Scope.extend(
      makeCommitWatch({
        dataVersion: () => Number(db.pragma("data_version", { simple: true })),
        versionOf: (sessionId) => {
          const row = head.get(sessionId)
          return row === undefined ? undefined : `${row.head}:${row.generation}`
        },
        read: (_operation, run) => Effect.sync(run),
        pollMs: watchOptions.pollMs,
        ...(watchOptions.withFileEvents ? { hints: fileWrites(file) } : {})
      }),
      scope
    ))
    const counts = await countWakeUps(scope, watch)
    await wakeEveryone(writer, counts)
    await appendToOneSession(writer, counts)
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
    db.close()
    await writer.close()
  }
}

describe("SQLite: another connection's commit wakes its session's followers only", () => {
  it("counts wake-ups per followed session while a second checkpointer appends to one", () =>
    countSqliteWakeUps({ pollMs: 5, withFileEvents: false }), 120_000)

  it("with a poll of 10 minutes, the WAL's file events wake each commit's followers (and only theirs)", () =>
    countSqliteWakeUps({ pollMs: 600_000, withFileEvents: true }), 120_000)

  it("a follower polling every 10 minutes sees every append another checkpointer makes", () =>
    followersOfOneStoreSeeAnother("sqlite", `${makeTempDir("keyed-sqlite")}/sessions.db`), 120_000)
})

describe("PostgreSQL: a notification wakes its session's followers only; `reconnected` wakes everyone", () => {
  it("counts wake-ups per followed session while a second checkpointer appends to one", async () => {
    const schema = `keyed_${Date.now().toString(36)}`
    const writer = await openStore("postgres", postgresLocation(server.url, schema))
    for (const session of sessions) await writer.append(session, [message("first")])
    const scope = Effect.runSync(Scope.make())
    try {
      const feed = await Effect.runPromise(
        Scope.extend(
          Effect.gen(function*() {
            const client = yield* PgClient.make({ url: Redacted.make(server.url), applicationName: "keyed-feed" })
            return yield* makeChangeFeed(client, schema, makeTransactions(client, 5000).query)
          }),
          scope
        ).pipe(Effect.provide(Reactivity.layer))
      )
      const counts = await countWakeUps(scope, feed.wakeUps)
      await wakeEveryone(writer, counts)
      await appendToOneSession(writer, counts)

      // The feed's connection lost: changes in between were not heard, so every follower looks.
      for (const session of sessions) counts.set(session, 0)
      server.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'keyed-feed' AND query ILIKE 'LISTEN%'")
      await until("every follower's wake-up after the reconnection", () => [...counts.values()].every((count) => count > 0))
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
      await writer.close()
    }
  })

  it("a follower polling every 10 minutes sees every append another checkpointer makes", () =>
    followersOfOneStoreSeeAnother("postgres", postgresLocation(server.url, `keyed_follow_${Date.now().toString(36)}`)), 120_000)
})
