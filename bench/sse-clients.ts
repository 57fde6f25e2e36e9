/**
 * The clients of the server benchmark, in a process of their own:
 *
 *   node --import tsx bench/sse-clients.ts '{"url":"…","sessions":["s0"],"perSession":300,"expected":2000,"lastEventId":"1"}'
 *
 * Opens `perSession` SSE connections to each session (plain `node:http`, one socket each),
 * prints `ready` once all are open, and reads until each connection has had `expected` events
 * (or a line "stop" arrives on stdin). Each event's content is `t<wall ms>` of its append:
 * the time from then to its arrival here is its append→receipt latency. A line
 * `commits {"<session>": {"<seq>": <wall ms>}}` on stdin says when each append returned (was
 * committed): the time from then is its commit→receipt latency, the server's own part (an
 * event with no commit time, as the bare baseline's, counts from its making). Prints one JSON
 * line: deliveries, how many arrived out of order or twice, and both latencies' percentiles.
 */
import { request } from "node:http"
import { createInterface } from "node:readline"
import { BENCH_TOKEN, wallNow } from "./server-process.js"

interface Config {
  readonly url: string
  readonly sessions: ReadonlyArray<string>
  readonly perSession: number
  readonly expected: number
  readonly lastEventId: string
}

const config = JSON.parse(process.argv[2] ?? "{}") as Config
const latencies: Array<number> = []
/** Each delivery as (session index, seq, wall ms of arrival, wall ms of making), for commit→receipt once the commit times are known. */
const deliveries: Array<number> = []
let delivered = 0
let disordered = 0
let complete = 0
const total = config.sessions.length * config.perSession
let finish: () => void = () => {}
const finished = new Promise<void>((resolve) => finish = resolve)

const CONTENT = /"content":"t([0-9.]+)"/

const open = (session: string, sessionIndex: number) =>
  new Promise<void>((resolve, reject) => {
    const req = request(`${config.url}/sessions/${session}/events`, {
      agent: false,
      headers: { authorization: `Bearer ${BENCH_TOKEN}`, accept: "text/event-stream", "last-event-id": config.lastEventId }
    }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`${session}: status ${res.statusCode}`))
      resolve()
      let buffer = ""
      let last = Number(config.lastEventId)
      let count = 0
      res.setEncoding("utf8")
      res.on("data", (chunk: string) => {
        buffer += chunk
        let end: number
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          if (!block.startsWith("id: ")) continue
          const id = Number(block.slice(4, block.indexOf("\n")))
          if (id !== last + 1) disordered++
          last = id
          const sent = CONTENT.exec(block)
          if (sent !== null) {
            const now = wallNow()
            latencies.push(now - Number(sent[1]))
            deliveries.push(sessionIndex, id, now, Number(sent[1]))
          }
          delivered++
          if (++count === config.expected) {
            res.destroy()
            if (++complete === total) finish()
          }
        }
      })
    })
    req.on("error", reject)
    req.end()
  })

const opening: Array<Promise<void>> = []
config.sessions.forEach((session, index) => {
  for (let i = 0; i < config.perSession; i++) opening.push(open(session, index))
})
await Promise.all(opening)
console.log("ready")
let commits: Record<string, Record<string, number>> = {}
let commitsKnown: () => void = () => {}
const committed = new Promise<void>((resolve) => commitsKnown = resolve)
const lines = createInterface({ input: process.stdin })
void (async () => {
  for await (const line of lines) {
    if (line === "stop") finish()
    if (line.startsWith("commits ")) {
      commits = JSON.parse(line.slice("commits ".length)) as typeof commits
      commitsKnown()
    }
  }
})()
await finished
await committed
const fromCommit: Array<number> = []
for (let i = 0; i < deliveries.length; i += 4) {
  const at = commits[config.sessions[deliveries[i]!]!]?.[String(deliveries[i + 1])]
  fromCommit.push(deliveries[i + 2]! - (at ?? deliveries[i + 3]!))
}
const percentiles = (values: Array<number>) => {
  values.sort((a, b) => a - b)
  const at = (p: number) => values[Math.min(values.length - 1, Math.floor((p / 100) * values.length))] ?? NaN
  return { p50: at(50), p99: at(99) }
}
const fromAppend = percentiles(latencies)
const fromCommitted = percentiles(fromCommit)
console.log(JSON.stringify({
  delivered,
  expected: config.expected * total,
  disordered,
  p50: fromAppend.p50,
  p99: fromAppend.p99,
  commitP50: fromCommitted.p50,
  commitP99: fromCommitted.p99
}))
process.exit(0)
