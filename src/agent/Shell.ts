/**
 * The process runner under the agent's `shell` tool: one shell command in its own process
 * group and session, output captured (capped), a timeout, and interruption. A call ends with
 * its command: whatever it started that is still running when its shell exits (`server &`,
 * `(sleep 5; rm x) &`) is stopped then, and a timeout or an interruption stops everything —
 * so nothing the call started changes the workdir after the call (and its capture) is over.
 * Long-running commands are background tasks (BackgroundTasks.ts). It never fails: whatever
 * happened (including "could not start") is described by the outcome.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { existsSync, statSync } from "node:fs"
import { Effect } from "effect"
import { messageOf as errorMessage } from "../backends/internal/causes.js"
import { CALL_MARK_PREFIX, makeCallProcesses, type Stopped, stopCallProcesses } from "./callProcesses.js"

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
  /**
   * How many processes the command left running when its shell exited by itself, all stopped
   * (SIGTERM, then SIGKILL after the grace) before this outcome. Absent when there were none.
   * Where processes cannot be listed (no /proc) the process group counts as one.
   */
  readonly stoppedBackgroundProcesses?: number
  /** Of those, how many were still running when the wait after SIGKILL gave up (e.g. stuck in the kernel); absent when none. */
  readonly backgroundProcessesNotStopped?: number
  readonly durationMs: number
}

export const DEFAULT_MAX_OUTPUT_BYTES = 30_000
/**
 * After the shell and what it left running are gone, how long to wait for the pipes to close.
 * A process out of reach (see `makeCallProcesses`) may hold them open indefinitely; we don't wait for it.
 */
export const PIPE_DRAIN_MS = 200
/** setTimeout's ceiling; larger delays would fire immediately. */
const MAX_TIMER_MS = 2_147_483_647

let shellPath: string | undefined
/** `/bin/bash` when present (the tool promises bash), else the POSIX shell. */
const shell = (): string => (shellPath ??= existsSync("/bin/bash") ? "/bin/bash" : "/bin/sh")

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

  // Inherited by everything the command starts, unless a process clears its environment.
  const markName = `${CALL_MARK_PREFIX}${randomBytes(8).toString("hex")}`
  let child: ChildProcess
  try {
    child = spawn(shell(), ["-c", command], {
      cwd: options.cwd,
      env: { ...mergedEnv(options.env), [markName]: "1" },
      // Own process group and session (setsid), so the call can find and stop everything it started.
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

  const shellPid = child.pid
  // Read now, while the shell is certainly there: its start time bounds its descendants'.
  const callProcesses = shellPid === undefined ? undefined : makeCallProcesses(shellPid, markName)
  let timedOut = false
  /** Set once the call's processes are being stopped: by a timeout, an interruption, or the shell's exit. */
  let stopping: Promise<Stopped> | undefined
  const stopAll = (): Promise<Stopped> =>
    shellPid === undefined || callProcesses === undefined
      ? Promise.resolve({ stopped: 0, notStopped: 0 })
      : (stopping ??= stopCallProcesses(shellPid, callProcesses))
  const terminate = (): Promise<void> => stopAll().then(() => undefined)

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
    const pipesClosed = new Promise<void>((resolveClosed) => {
      child.once("close", () => {
        closed = true
        resolveClosed()
      })
    })

    child.on("error", (error) => {
      // Before the process exists this is a spawn failure ('close' may follow; settle once).
      // Afterwards Node only reports failed kill()/send() — we signal via process.kill, so
      // there is nothing to do but keep waiting for 'exit', which the timeout guarantees.
      if (child.pid === undefined) settle(spawnFailure(error))
    })

    child.once("exit", (code, signal) => {
      if (timer !== undefined) clearTimeout(timer)
      const exitedByItself = stopping === undefined
      void (async () => {
        // Whatever is left is stopped now, before the outcome: report only once none of it runs.
        const { notStopped, stopped } = await stopAll()
        // What the stopped processes wrote last is still in the pipes; a process out of reach may hold them open.
        let drained: NodeJS.Timeout | undefined
        await Promise.race([pipesClosed, new Promise<void>((resolveDrained) => drained = setTimeout(resolveDrained, PIPE_DRAIN_MS))])
        clearTimeout(drained)
        if (!closed) {
          child.stdout?.destroy()
          child.stderr?.destroy()
        }
        const { output, droppedBytes } = collector.finish()
        settle({
          exitCode: code,
          ...(signal !== null ? { signal } : {}),
          output,
          outputTruncated: droppedBytes > 0,
          ...(droppedBytes > 0 ? { outputDroppedBytes: droppedBytes } : {}),
          timedOut,
          ...(timedOut ? { timeoutMs: options.timeoutMs } : {}),
          ...(exitedByItself && stopped > 0 ? { stoppedBackgroundProcesses: stopped } : {}),
          ...(exitedByItself && notStopped > 0 ? { backgroundProcessesNotStopped: notStopped } : {}),
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
 * Runs `command` with `bash -c` in `options.cwd`. Never fails. Interrupting the effect stops
 * every process of the call and completes only once they are gone. When the shell exits by
 * itself, background processes it left running (`server &`) are stopped before the outcome,
 * which counts them (`stoppedBackgroundProcesses`).
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
 * "[output truncated: …]", then "[exit code 0]" / "[killed by SIGTERM after timeout 2000 ms]",
 * then what was stopped when the command exited, pointing the model at background tasks;
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
  const stopped = describeStopped(outcome)
  if (stopped !== undefined) lines.push(`[${stopped}; run long-running commands with background: true]`)
  return lines.join("\n")
}

/**
 * What was stopped when the command exited, e.g. "stopped 1 background process still running
 * when the command exited"; undefined when nothing was.
 */
export const describeStopped = (outcome: CommandOutcome): string | undefined => {
  const stopped = outcome.stoppedBackgroundProcesses ?? 0
  if (stopped === 0) return undefined
  const notStopped = outcome.backgroundProcessesNotStopped ?? 0
  return `stopped ${stopped} background ${stopped === 1 ? "process" : "processes"} still running when the command exited` +
    (notStopped > 0 ? ` (${notStopped} still running after SIGKILL)` : "")
}
