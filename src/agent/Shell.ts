/**
 * The process runner under the agent's `shell` tool: one shell command in its own process
 * group, output captured (capped), a timeout, and interruption — both of which kill the
 * whole group, grandchildren included, and wait until it is gone. It never fails: whatever
 * happened (including "could not start") is described by the outcome.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs"
import { Effect } from "effect"
import { errnoOf as errorCode, messageOf as errorMessage } from "../backends/internal/causes.js"

export interface CommandOptions {
  readonly cwd: string
  /** Kill the command (its whole process group) after this long. `Infinity` disables the timeout. */
  readonly timeoutMs: number
  /** Output kept (stdout and stderr interleaved as they arrive); beyond it, keep the first half and the last half of the budget and mark it truncated. Default 30_000 bytes. */
  readonly maxOutputBytes?: number
  /** Merged over `process.env`; an `undefined` value removes that variable. */
  readonly env?: Readonly<Record<string, string | undefined>>
}

export interface CommandOutcome {
  /** null when the process was killed by a signal or could not start. */
  readonly exitCode: number | null
  /** The signal that ended the shell process, e.g. "SIGKILL"; absent when it exited by itself. */
  readonly signal?: string
  /**
   * What the command wrote, stdout and stderr interleaved. When truncated, the first and last
   * part are kept with a one-line `[… N bytes omitted …]` marker between them, so a reader
   * (the model) can see where the gap is.
   */
  readonly output: string
  readonly outputTruncated: boolean
  /** How many bytes of output were dropped from the middle; present only when truncated. */
  readonly outputDroppedBytes?: number
  readonly timedOut: boolean
  /** The timeout that was hit; present only when `timedOut`. */
  readonly timeoutMs?: number
  /** Set when the process could not be started at all (e.g. cwd missing); exitCode is then null. */
  readonly spawnError?: string
  readonly durationMs: number
}

export const DEFAULT_MAX_OUTPUT_BYTES = 30_000
/** Between SIGTERM and SIGKILL: long enough for a well-behaved command to clean up. */
export const KILL_GRACE_MS = 2_000
/**
 * After the shell exits, how long to wait for its pipes to close. A background grandchild
 * (`server &`) inherits stdout and may hold it open indefinitely; we don't wait for it.
 */
export const PIPE_DRAIN_MS = 200
/** After SIGKILL, how long to wait for the group to disappear before giving up on it. */
const POST_KILL_WAIT_MS = 1_000
const POLL_MS = 25
/** setTimeout's ceiling; larger delays would fire immediately. */
const MAX_TIMER_MS = 2_147_483_647

let shellPath: string | undefined
/** `/bin/bash` when present (the tool promises bash), else the POSIX shell. */
const shell = (): string => (shellPath ??= existsSync("/bin/bash") ? "/bin/bash" : "/bin/sh")

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))


/** Signal every process in the group; a group that is already gone is not an error. */
const signalGroup = (pgid: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(-pgid, signal)
  } catch {
    // ESRCH: nothing left to signal.
  }
}

/**
 * Whether any process of the group is still running. `kill(-pgid, 0)` also counts zombies —
 * dead grandchildren waiting for an init that reaps lazily (or never, when that init is a
 * Node process) — so on Linux a positive answer is checked against /proc, ignoring zombies.
 */
const groupRunning = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
  } catch (error) {
    return errorCode(error) === "EPERM"
  }
  let entries: Array<string>
  try {
    entries = readdirSync("/proc")
  } catch {
    return true
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue
    let stat: string
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8")
    } catch {
      continue // exited while we looked
    }
    // "pid (comm) state ppid pgrp …"; comm may itself contain spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    if (Number(fields[2]) === pgid && fields[0] !== "Z" && fields[0] !== "X") return true
  }
  return false
}

/** Polls until the group has no running process or `ms` have passed; true when it is gone. */
const waitGroupGone = async (pgid: number, ms: number): Promise<boolean> => {
  // A monotonic clock: setting the wall clock back must not stretch the wait.
  const deadline = performance.now() + ms
  for (;;) {
    if (!groupRunning(pgid)) return true
    if (performance.now() >= deadline) return false
    await delay(POLL_MS)
  }
}

/** Length of `buf` without a trailing incomplete UTF-8 sequence. */
const completeUtf8Prefix = (buf: Buffer): number => {
  let i = buf.length - 1
  while (i >= 0 && buf.length - 1 - i < 3 && ((buf[i] ?? 0) & 0xc0) === 0x80) i--
  if (i < 0) return buf.length
  const lead = buf[i] ?? 0
  const needed = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 1
  return buf.length - i < needed ? i : buf.length
}

/** Offset of the first byte of `buf` that does not continue a UTF-8 sequence begun before it. */
const utf8Start = (buf: Buffer): number => {
  let i = 0
  while (i < buf.length && i < 3 && ((buf[i] ?? 0) & 0xc0) === 0x80) i++
  return i
}

/**
 * Keeps the first half of the budget and a sliding window over the last half, as raw bytes
 * (decoding per chunk would split multi-byte characters at chunk boundaries). Memory stays
 * within the budget plus one chunk however much the command writes.
 */
const makeOutputCollector = (maxBytes: number) => {
  const headBudget = Math.floor(maxBytes / 2)
  const tailBudget = maxBytes - headBudget
  const head: Array<Buffer> = []
  let headBytes = 0
  const tail: Array<Buffer> = []
  let tailBytes = 0
  let totalBytes = 0
  return {
    push(chunk: Buffer): void {
      totalBytes += chunk.length
      let rest = chunk
      if (headBytes < headBudget) {
        const take = Math.min(rest.length, headBudget - headBytes)
        head.push(rest.subarray(0, take))
        headBytes += take
        rest = rest.subarray(take)
      }
      if (rest.length === 0) return
      tail.push(rest)
      tailBytes += rest.length
      while (tail.length > 1 && tailBytes - (tail[0]?.length ?? 0) >= tailBudget) tailBytes -= tail.shift()?.length ?? 0
    },
    finish(): { readonly output: string; readonly droppedBytes: number } {
      const headBuf = Buffer.concat(head)
      const tailBuf = Buffer.concat(tail)
      if (totalBytes <= maxBytes) return { output: Buffer.concat([headBuf, tailBuf]).toString("utf8"), droppedBytes: 0 }
      // Cut on character boundaries so neither side ends in a replacement character.
      const keptHead = headBuf.subarray(0, completeUtf8Prefix(headBuf))
      const window = tailBuf.subarray(Math.max(0, tailBuf.length - tailBudget))
      const keptTail = window.subarray(utf8Start(window))
      const droppedBytes = totalBytes - keptHead.length - keptTail.length
      return {
        output: `${keptHead.toString("utf8")}\n[… ${droppedBytes} bytes omitted …]\n${keptTail.toString("utf8")}`,
        droppedBytes
      }
    }
  }
}

const mergedEnv = (overrides: Readonly<Record<string, string | undefined>> | undefined): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const [key, value] of Object.entries(overrides ?? {})) {
    if (value === undefined) delete env[key]
    else env[key] = value
  }
  return env
}

/** Node reports a missing cwd as `spawn /bin/bash ENOENT`, which blames the shell; name the cwd instead. */
const describeSpawnError = (error: unknown, cwd: string): string => {
  try {
    if (!statSync(cwd).isDirectory()) return `working directory is not a directory: ${cwd}`
  } catch {
    return `working directory does not exist: ${cwd}`
  }
  return errorMessage(error)
}

interface Run {
  readonly done: Promise<CommandOutcome>
  /** Kill the group (SIGTERM, then SIGKILL after the grace) and resolve once it is gone. */
  readonly terminate: () => Promise<void>
}

const start = (command: string, options: CommandOptions): Run => {
  const startedAt = performance.now()
  const elapsed = () => Math.round(performance.now() - startedAt)
  const maxBytes = Math.max(0, Math.floor(options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES))
  const spawnFailure = (error: unknown): CommandOutcome => ({
    exitCode: null,
    output: "",
    outputTruncated: false,
    timedOut: false,
    spawnError: describeSpawnError(error, options.cwd),
    durationMs: elapsed()
  })

  let child: ChildProcess
  try {
    child = spawn(shell(), ["-c", command], {
      cwd: options.cwd,
      env: mergedEnv(options.env),
      // Own process group, so a timeout or interruption can kill everything it started.
      detached: true,
      stdio: ["ignore", "pipe", "pipe"]
    })
  } catch (error) {
    // Synchronous failures, e.g. a NUL byte in the command.
    return { done: Promise.resolve(spawnFailure(error)), terminate: () => Promise.resolve() }
  }

  const collector = makeOutputCollector(maxBytes)
  const onData = (chunk: Buffer) => collector.push(chunk)
  const ignore = () => {}
  for (const stream of [child.stdout, child.stderr]) {
    stream?.on("data", onData)
    // Destroying a stream held open by a grandchild must not surface as an uncaught error.
    stream?.on("error", ignore)
  }

  let timedOut = false
  let terminating: Promise<void> | undefined
  const terminate = (): Promise<void> => {
    const pgid = child.pid
    if (pgid === undefined) return Promise.resolve()
    return (terminating ??= (async () => {
      signalGroup(pgid, "SIGTERM")
      if (await waitGroupGone(pgid, KILL_GRACE_MS)) return
      signalGroup(pgid, "SIGKILL")
      await waitGroupGone(pgid, POST_KILL_WAIT_MS)
    })())
  }

  const done = new Promise<CommandOutcome>((resolve) => {
    let settled = false
    let timer: NodeJS.Timeout | undefined
    const settle = (outcome: CommandOutcome) => {
      if (settled) return
      settled = true
      if (timer !== undefined) clearTimeout(timer)
      resolve(outcome)
    }

    let closed = false
    const closedOrDrained = new Promise<void>((resolveClosed) => {
      child.once("close", () => {
        closed = true
        resolveClosed()
      })
      child.once("exit", () => setTimeout(resolveClosed, PIPE_DRAIN_MS))
    })

    child.on("error", (error) => {
      // Before the process exists this is a spawn failure ('close' may follow; settle once).
      // Afterwards Node only reports failed kill()/send() — we signal via process.kill, so
      // there is nothing to do but keep waiting for 'exit', which the timeout guarantees.
      if (child.pid === undefined) settle(spawnFailure(error))
    })

    child.once("exit", (code, signal) => {
      if (timer !== undefined) clearTimeout(timer)
      void (async () => {
        await closedOrDrained
        if (!closed) {
          child.stdout?.destroy()
          child.stderr?.destroy()
        }
        // Killed (timeout or interruption): report only once no process of the group is left.
        if (terminating !== undefined) await terminating
        const { output, droppedBytes } = collector.finish()
        settle({
          exitCode: code,
          ...(signal !== null ? { signal } : {}),
          output,
          outputTruncated: droppedBytes > 0,
          ...(droppedBytes > 0 ? { outputDroppedBytes: droppedBytes } : {}),
          timedOut,
          ...(timedOut ? { timeoutMs: options.timeoutMs } : {}),
          durationMs: elapsed()
        })
      })()
    })

    if (Number.isFinite(options.timeoutMs)) {
      timer = setTimeout(() => {
        timedOut = true
        void terminate()
      }, Math.min(MAX_TIMER_MS, Math.max(0, options.timeoutMs)))
    }
  })

  return { done, terminate }
}

/**
 * Runs `command` with `bash -c` in `options.cwd`. Never fails. Interrupting the effect kills
 * the command's process group and completes only once the shell has exited. When the shell
 * exits by itself, background processes it left (`server &`) are not killed.
 */
export const runCommand = (command: string, options: CommandOptions): Effect.Effect<CommandOutcome> =>
  Effect.async<CommandOutcome>((resume) => {
    const run = start(command, options)
    void run.done.then((outcome) => resume(Effect.succeed(outcome)))
    return Effect.promise(async () => {
      await run.terminate()
      await run.done
    })
  })

/**
 * The text for a tool result: the output (or "(no output)") followed by one-line notes —
 * "[output truncated: …]" and then "[exit code 0]" / "[killed by SIGTERM after timeout 2000 ms]";
 * just "[could not start: …]" when the process never ran.
 */
export const describeOutcome = (outcome: CommandOutcome): string => {
  if (outcome.spawnError !== undefined) return `[could not start: ${outcome.spawnError}]`
  const lines: Array<string> = []
  if (outcome.output.length > 0) lines.push(outcome.output.endsWith("\n") ? outcome.output.slice(0, -1) : outcome.output)
  else lines.push("(no output)")
  if (outcome.outputTruncated) {
    lines.push(
      outcome.outputDroppedBytes !== undefined
        ? `[output truncated: ${outcome.outputDroppedBytes} bytes dropped from the middle]`
        : "[output truncated]"
    )
  }
  const timeout = outcome.timeoutMs !== undefined ? ` ${outcome.timeoutMs} ms` : ""
  if (outcome.timedOut) {
    lines.push(
      outcome.signal !== undefined
        ? `[killed by ${outcome.signal} after timeout${timeout}]`
        : // The command caught SIGTERM and exited on its own terms.
          `[timed out (timeout${timeout}); exit code ${outcome.exitCode ?? "unknown"}]`
    )
  } else if (outcome.signal !== undefined) lines.push(`[killed by ${outcome.signal}]`)
  else lines.push(`[exit code ${outcome.exitCode ?? "unknown"}]`)
  return lines.join("\n")
}
