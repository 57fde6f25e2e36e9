/**
 * Worker for test/sqlite.processes.test.ts and test/postgres.processes.test.ts: appends batches
 * to one session of a SQLite database or a PostgreSQL schema until it is killed (SIGKILL at a
 * random moment), or, on PostgreSQL, until the server under it stops.
 *
 *   node --import tsx test/workers/batch-crasher.ts '<json CrasherConfig>'
 *
 * It opens its checkpointer, prints "ready" and waits for a line on stdin ("go"), so a
 * test can start it ahead of time and pay Node's start-up while other work runs. Then it
 * prints `start <head>` and appends batches of 1-20 events with the current head as
 * expected head, printing `append <head> <size>` before each append and `ack <head>` as
 * soon as it resolves. Every event is a
 * `UserMessage` "c<cycle>b<batch>:<part>/<size>". It stops (printing "done") only after
 * `maxBatches` appends, a safety net should nobody kill it.
 *
 * `say` returns once the line is in the pipe (../support/lineNow.ts): the line is the parent's,
 * so every acknowledged head the parent sees was returned by a resolved append.
 */
import { type PromiseCheckpointer, UserMessage } from "../../src/index.js"
import { openStore } from "../support/stores.js"
import { sayNow } from "../support/lineNow.js"

export interface CrasherConfig {
  readonly backend: "sqlite" | "postgres"
  /** The database file, or `<url>#<schema>`. */
  readonly location: string
  readonly session: string
  readonly cycle: number
  readonly synchronous: "normal" | "full"
  readonly maxBatches: number
  /**
   * Keep going when an append fails (the server went away): print `fail <tag>`, then read the
   * head until the store answers again, print `resume <head>`, and go on with the next batch.
   * An append whose outcome was unknown is never retried, so it is in the log once or not at all.
   */
  readonly resilient?: boolean
}

const config = JSON.parse(process.argv[2] ?? "{}") as CrasherConfig

const say = sayNow

const headOnceAvailable = async (checkpointer: PromiseCheckpointer, session: string): Promise<number> => {
  for (;;) {
    try {
      return await checkpointer.head(session)
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
}

const main = async () => {
  const checkpointer = await openStore(config.backend, config.location, { synchronous: config.synchronous })
  await checkpointer.list() // open it: schema checks, runtime
  say("ready")
  await new Promise<void>((resolve) =>
    process.stdin.once("data", () => {
      process.stdin.destroy()
      resolve()
    })
  )
  let head = await checkpointer.head(config.session)
  say(`start ${head}`)
  for (let batch = 0; batch < config.maxBatches; batch++) {
    const size = 1 + Math.floor(Math.random() * 20)
    const id = `c${config.cycle}b${batch}`
    const events = Array.from({ length: size }, (_, part) => new UserMessage({ content: `${id}:${part}/${size}` }))
    say(`append ${head} ${size}`)
    let next: number
    try {
      next = await checkpointer.append(config.session, events, head)
    } catch (error) {
      if (config.resilient !== true) throw error
      say(`fail ${(error as { _tag?: string })._tag ?? String(error)}`)
      head = await headOnceAvailable(checkpointer, config.session)
      say(`resume ${head}`)
      continue
    }
    if (next !== head + size) throw new Error(`append of ${size} at head ${head} returned ${next}`)
    head = next
    say(`ack ${head}`)
  }
  say("done")
  await checkpointer.close()
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`crasher failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
    process.exit(1)
  }
)
