/**
 * Worker for test/clocks.processes.test.ts, usually started with test/support/skewedClock.ts
 * preloaded (its wall clock set wrong by the test).
 *
 *   node --import tsx [--import test/support/skewedClock.ts] test/workers/clock-worker.ts '<json config>'
 *
 * Opens a checkpointer on the store (a file backend's directory or a SQLite database), prints
 * "ready", and on a line on stdin:
 *
 * - mode "append": appends one event to `session` and prints its outcome as one JSON line,
 *   `ClockWorkerResult`, with how far its wall clock was off when the append ended; then exits.
 * - mode "keep-taking" (file backend): appends to `session` again and again, each append right
 *   after the last, printing "taking" after the first, until the process is killed.
 */
import { fileCheckpointer, type PromiseCheckpointerWithIntegrity, UserMessage } from "../../src/index.js"

export interface ClockWorkerConfig {
  readonly mode: "append" | "keep-taking"
  readonly backend: "file" | "sqlite"
  /** The sessions directory, or the database file. */
  readonly location: string
  readonly session: string
  readonly busyTimeoutMs: number
  readonly lockLeaseMs?: number
}

export type ClockWorkerResult =
  | { readonly ok: true; readonly head: number; readonly clockOffsetMs: number }
  | { readonly ok: false; readonly tag: string; readonly message: string; readonly clockOffsetMs: number }

const config = JSON.parse(process.argv[2] ?? "{}") as ClockWorkerConfig

const open = async (): Promise<PromiseCheckpointerWithIntegrity> => {
  if (config.backend === "sqlite") {
    const { sqliteCheckpointer } = await import("../../src/checkpoint-sqlite.js")
    return sqliteCheckpointer({ file: config.location, busyTimeoutMs: config.busyTimeoutMs })
  }
  return fileCheckpointer({
    dir: config.location,
    busyTimeoutMs: config.busyTimeoutMs,
    ...(config.lockLeaseMs === undefined ? {} : { lockLeaseMs: config.lockLeaseMs })
  })
}

/** How far this process's wall clock is off the real time (a monotonic clock keeps the real time). */
const clockOffsetMs = () => Math.round(Date.now() - (performance.timeOrigin + performance.now()))

const say = (line: string) => process.stdout.write(line + "\n")

const checkpointer = await open()
await checkpointer.list()
say("ready")
await new Promise<void>((resolve) =>
  process.stdin.once("data", () => {
    process.stdin.destroy()
    resolve()
  })
)

if (config.mode === "append") {
  let result: ClockWorkerResult
  try {
    const head = await checkpointer.append(config.session, [new UserMessage({ content: `pid ${process.pid}` })])
    result = { ok: true, head, clockOffsetMs: clockOffsetMs() }
  } catch (error) {
    const tag = typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "unknown"
    result = { ok: false, tag, message: String(error), clockOffsetMs: clockOffsetMs() }
  }
  say(JSON.stringify(result))
  await checkpointer.close()
} else {
  for (let appends = 0; ; appends++) {
    await checkpointer.append(config.session, [new UserMessage({ content: `keeps taking ${appends}` })])
    if (appends === 0) say("taking")
  }
}
