/**
 * Worker for test/sqlite.processes.test.ts: appends batches to one session of a SQLite
 * database until it is killed (SIGKILL at a random moment).
 *
 *   node --import tsx test/workers/sqlite-crasher.ts '<json SqliteCrasherConfig>'
 *
 * It opens its checkpointer, prints "ready" and waits for a line on stdin ("go"), so a
 * test can start it ahead of time and pay Node's start-up while other work runs. Then it
 * prints `start <head>` and appends batches of 1-20 events with the current head as
 * expected head, printing `append <head> <size>` before each append and `ack <head>` as
 * soon as it resolves. Every event is a
 * `UserMessage` "c<cycle>b<batch>:<part>/<size>". It stops (printing "done") only after
 * `maxBatches` appends, a safety net should nobody kill it.
 *
 * Writes to a pipe are synchronous on Linux: once `say` returns, the line is the parent's,
 * so every acknowledged head the parent sees was returned by a resolved append.
 */
import { sqliteCheckpointer } from "../../src/checkpoint-sqlite.js"
import { UserMessage } from "../../src/index.js"

export interface SqliteCrasherConfig {
  readonly file: string
  readonly session: string
  readonly cycle: number
  readonly synchronous: "normal" | "full"
  readonly maxBatches: number
}

const config = JSON.parse(process.argv[2] ?? "{}") as SqliteCrasherConfig

const say = (line: string) => process.stdout.write(line + "\n")

const main = async () => {
  const checkpointer = sqliteCheckpointer({ file: config.file, synchronous: config.synchronous })
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
    const next = await checkpointer.append(config.session, events, head)
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
    process.stderr.write(`sqlite crasher failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
    process.exit(1)
  }
)
