/**
 * Worker for test/file.processes.test.ts: appends to one session of a file checkpointer in
 * a separate Node process.
 *
 *   node --import tsx test/workers/appender.ts '<json config>'
 *
 * It opens its checkpointer, prints "ready" and waits for a line on stdin ("go"), so a
 * test can start it ahead of time and pay Node's start-up while other work runs. Then:
 *
 * - mode "crash": appends (mostly single events, one in five a batch of 2-5) with the
 *   current head as expected head until the session holds `target` events, printing
 *   `start <head>` first and `ack <head>` after every append resolves. Every event is a
 *   `UserMessage` "c<cycle>b<batch>:<part>/<size>". Meant to be killed at a random point.
 * - mode "once": one single-event append of `content`; prints `ok <head>` or
 *   `error <tag> <json>`.
 */
import { fileCheckpointer, UserMessage } from "../../src/index.js"
import { sayNow } from "../support/lineNow.js"

interface BaseConfig {
  readonly dir: string
  readonly session: string
  readonly synchronous?: "normal" | "full"
  readonly busyTimeoutMs?: number
}

export type AppenderConfig =
  | (BaseConfig & { readonly mode: "crash"; readonly cycle: number; readonly target: number })
  | (BaseConfig & { readonly mode: "once"; readonly content: string })

const config = JSON.parse(process.argv[2] ?? "{}") as AppenderConfig

// `say` returns once the line is in the pipe (../support/lineNow.ts): it is then the parent's.
const say = sayNow

const main = async () => {
  const checkpointer = fileCheckpointer({
    dir: config.dir,
    ...(config.synchronous === undefined ? {} : { synchronous: config.synchronous }),
    ...(config.busyTimeoutMs === undefined ? {} : { busyTimeoutMs: config.busyTimeoutMs })
  })
  await checkpointer.list() // open it: directory checks, runtime
  say("ready")
  await new Promise<void>((resolve) =>
    process.stdin.once("data", () => {
      process.stdin.destroy()
      resolve()
    })
  )

  switch (config.mode) {
    case "crash": {
      let head = await checkpointer.head(config.session)
      say(`start ${head}`)
      let batch = 0
      while (head < config.target) {
        const size = Math.min(config.target - head, Math.random() < 0.2 ? 2 + Math.floor(Math.random() * 4) : 1)
        const id = `c${config.cycle}b${batch}`
        const events = Array.from({ length: size }, (_, part) => new UserMessage({ content: `${id}:${part}/${size}` }))
        const next = await checkpointer.append(config.session, events, head)
        if (next !== head + size) throw new Error(`append of ${size} at head ${head} returned ${next}`)
        head = next
        batch++
        say(`ack ${head}`)
      }
      say("done")
      break
    }
    case "once": {
      try {
        say(`ok ${await checkpointer.append(config.session, [new UserMessage({ content: config.content })])}`)
      } catch (error) {
        const tag = typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "unknown"
        say(`error ${tag} ${JSON.stringify(error)}`)
      }
      break
    }
  }
  await checkpointer.close()
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`appender failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
    process.exit(1)
  }
)
