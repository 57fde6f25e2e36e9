/**
 * The process runner under the `bash` tool, against real processes: exit codes, output
 * capture and its cap, cwd and env, and — the point of running each command in its own
 * process group — that a timeout or an interruption leaves no process of it behind.
 *
 * `it.live` throughout: these need the real clock (`it.effect` runs on a TestClock).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { realpathSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, Fiber } from "effect"
import { afterAll, afterEach } from "vitest"
import { type CommandOutcome, describeOutcome, runCommand } from "../src/agent/Shell.js"
import { processRunning } from "./support/liveProcesses.js"

const tempDirs: Array<string> = []
const tempDir = (): string => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), "lite-agent-shell-")))
  tempDirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true })
})

/** Processes a test deliberately leaves running (or that a failing test would leak). */
const leftovers: Array<number> = []
afterEach(() => {
  for (const pid of leftovers.splice(0)) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // already gone
    }
  }
})

const readPid = (file: string): number => {
  const pid = Number(readFileSync(file, "utf8").trim())
  expect(Number.isInteger(pid) && pid > 0).toBe(true)
  return pid
}

/** Polls until `file` holds a complete line (the command wrote it with echo). */
const waitForPidFile = (file: string) =>
  Effect.gen(function*() {
    for (;;) {
      let text = ""
      try {
        text = readFileSync(file, "utf8")
      } catch {
        // not written yet
      }
      if (text.endsWith("\n")) return readPid(file)
      yield* Effect.sleep("20 millis")
    }
  })

const run = (command: string, options: Partial<Parameters<typeof runCommand>[1]> = {}) =>
  runCommand(command, { cwd: tempDir(), timeoutMs: 30_000, ...options })

describe("runCommand", () => {
  it.live("runs a command and reports exit code 0 and its output", () =>
    Effect.gen(function*() {
      const outcome = yield* run("echo hello; printf 'wor'; printf 'ld\\n'")
      expect(outcome.exitCode).toBe(0)
      expect(outcome.output).toBe("hello\nworld\n")
      expect(outcome.outputTruncated).toBe(false)
      expect(outcome.timedOut).toBe(false)
      expect("signal" in outcome).toBe(false)
      expect("spawnError" in outcome).toBe(false)
      expect("outputDroppedBytes" in outcome).toBe(false)
      expect(outcome.durationMs).toBeGreaterThanOrEqual(0)
    }))

  it.live("reports a non-zero exit code", () =>
    Effect.gen(function*() {
      const outcome = yield* run("echo oops; exit 3")
      expect(outcome.exitCode).toBe(3)
      expect(outcome.output).toBe("oops\n")
      expect("signal" in outcome).toBe(false)
      expect(describeOutcome(outcome)).toBe("oops\n[exit code 3]")
    }))

  it.live("interleaves stderr with stdout as they arrive", () =>
    Effect.gen(function*() {
      const outcome = yield* run("echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three")
      expect(outcome.exitCode).toBe(0)
      expect(outcome.output).toBe("one\ntwo\nthree\n")
    }))

  it.live("runs in the given cwd", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      writeFileSync(join(dir, "marker.txt"), "here\n")
      const outcome = yield* runCommand("pwd; cat marker.txt", { cwd: dir, timeoutMs: 30_000 })
      expect(outcome.output).toBe(`${dir}\nhere\n`)
    }))

  it.live("merges env over process.env; undefined removes a variable", () =>
    Effect.gen(function*() {
      const inherited = process.env["VITEST"]
      expect(inherited).toBeDefined()
      const merged = yield* run(`echo "$LITE_SHELL_A|\${VITEST-unset}"`, { env: { LITE_SHELL_A: "a b" } })
      expect(merged.output).toBe(`a b|${inherited}\n`)
      const removed = yield* run(`echo "\${VITEST-unset}"`, { env: { VITEST: undefined } })
      expect(removed.output).toBe("unset\n")
    }))

  it.live("a timeout kills the whole process group, grandchildren included", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const pidFile = join(dir, "grandchild.pid")
      const outcome = yield* runCommand(`sleep 100 & echo $! > '${pidFile}'; echo waiting; wait`, {
        cwd: dir,
        timeoutMs: 500
      })
      const grandchild = readPid(pidFile)
      leftovers.push(grandchild)
      expect(outcome.timedOut).toBe(true)
      expect(outcome.timeoutMs).toBe(500)
      expect(outcome.exitCode).toBeNull()
      expect(outcome.signal).toBe("SIGTERM")
      expect(outcome.output).toBe("waiting\n")
      expect(processRunning(grandchild)).toBe(false)
      expect(describeOutcome(outcome)).toBe("waiting\n[killed by SIGTERM after timeout 500 ms]")
    }), 30_000)

  it.live("escalates to SIGKILL for a grandchild that ignores SIGTERM", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const pidFile = join(dir, "stubborn.pid")
      // A nested subshell whose SIGTERM is ignored (inherited across exec by `sleep`).
      const outcome = yield* runCommand(`(trap '' TERM; exec sleep 100) & echo $! > '${pidFile}'; wait`, {
        cwd: dir,
        timeoutMs: 300
      })
      const stubborn = readPid(pidFile)
      leftovers.push(stubborn)
      expect(outcome.timedOut).toBe(true)
      expect(outcome.signal).toBe("SIGTERM")
      expect(processRunning(stubborn)).toBe(false)
    }), 30_000)

  it.live("a command that handles SIGTERM itself times out with its own exit code", () =>
    Effect.gen(function*() {
      const outcome = yield* run(`trap 'echo bye; exit 7' TERM; echo ready; sleep 100 & wait`, { timeoutMs: 300 })
      expect(outcome.timedOut).toBe(true)
      expect(outcome.exitCode).toBe(7)
      expect("signal" in outcome).toBe(false)
      expect(outcome.output).toBe("ready\nbye\n")
      expect(describeOutcome(outcome)).toBe("ready\nbye\n[timed out (timeout 300 ms); exit code 7]")
    }), 30_000)

  it.live("interruption kills the process group and waits for it", () =>
    Effect.gen(function*() {
      const dir = tempDir()
      const grandchildFile = join(dir, "grandchild.pid")
      const shellFile = join(dir, "shell.pid")
      const fiber = yield* Effect.fork(
        // The shell takes its time over SIGTERM, so an interruption that did not wait would see it alive.
        runCommand(`trap 'sleep 0.5; exit 1' TERM; echo $$ > '${shellFile}'; sleep 100 & echo $! > '${grandchildFile}'; wait`, {
          cwd: dir,
          timeoutMs: 60_000
        })
      )
      const grandchild = yield* waitForPidFile(grandchildFile)
      const shell = yield* waitForPidFile(shellFile)
      leftovers.push(grandchild, shell)
      expect(processRunning(grandchild)).toBe(true)
      const exit = yield* Fiber.interrupt(fiber)
      expect(Exit.isInterrupted(exit)).toBe(true)
      expect(processRunning(shell)).toBe(false)
      expect(processRunning(grandchild)).toBe(false)
    }), 30_000)

  it.live("returns once the shell exits even if a background process holds stdout open: that process is stopped", () =>
    Effect.gen(function*() {
      // `sleep` inherits the stdout pipe; waiting for the pipe to close would take 1000 s.
      const outcome = yield* run("sleep 1000 & echo \"started $!\"")
      const pid = Number(/started (\d+)/.exec(outcome.output)?.[1])
      expect(Number.isInteger(pid) && pid > 0).toBe(true)
      leftovers.push(pid)
      expect(outcome.exitCode).toBe(0)
      expect(outcome.output).toContain("started")
      // A call ends with its command (long-running commands are background tasks): see shell.background.test.ts.
      expect(outcome.stoppedBackgroundProcesses).toBe(1)
      expect(processRunning(pid)).toBe(false)
    }), 20_000)

  it.live("caps output, keeping the head and the tail and counting what was dropped", () =>
    Effect.gen(function*() {
      const command = "printf START; head -c 100000 /dev/zero | tr '\\0' a; printf END"
      const outcome = yield* run(command, { maxOutputBytes: 1000 })
      expect(outcome.exitCode).toBe(0)
      expect(outcome.outputTruncated).toBe(true)
      expect(outcome.outputDroppedBytes).toBe(100_008 - 1000)
      expect(outcome.output).toBe(`START${"a".repeat(495)}\n[… 99008 bytes omitted …]\n${"a".repeat(497)}END`)
      expect(describeOutcome(outcome)).toContain("[output truncated: 99008 bytes dropped from the middle]")
      expect(describeOutcome(outcome).endsWith("[exit code 0]")).toBe(true)

      const byDefault = yield* run(command)
      expect(byDefault.outputDroppedBytes).toBe(100_008 - 30_000)
      expect(byDefault.output.startsWith("STARTaaa")).toBe(true)
      expect(byDefault.output.endsWith("aaaEND")).toBe(true)

      const exactlyAtCap = yield* run("head -c 1000 /dev/zero | tr '\\0' a", { maxOutputBytes: 1000 })
      expect(exactlyAtCap.outputTruncated).toBe(false)
      expect(exactlyAtCap.output).toBe("a".repeat(1000))
    }))

  it.live("multi-byte UTF-8 survives pipe chunk boundaries and the truncation cut", () =>
    Effect.gen(function*() {
      // 9-byte units in ~64 KiB pipe reads: chunk boundaries fall inside characters.
      const whole = yield* run("yes 'é€😀' | head -n 20000 | tr -d '\\n'", { maxOutputBytes: 1_000_000 })
      expect(whole.outputTruncated).toBe(false)
      expect(whole.output).toBe("é€😀".repeat(20000))

      // 3-byte characters cut at 500 bytes from each end: both cuts fall inside a character.
      const cut = yield* run("yes '€' | head -n 10000 | tr -d '\\n'", { maxOutputBytes: 1000 })
      expect(cut.outputTruncated).toBe(true)
      expect(cut.output).not.toContain("\uFFFD")
      expect(cut.output).toBe(`${"€".repeat(166)}\n[… 29004 bytes omitted …]\n${"€".repeat(166)}`)
      expect(cut.outputDroppedBytes).toBe(30_000 - 2 * 498)
    }))

  it.live("a missing cwd is reported as a spawn error, not a failure", () =>
    Effect.gen(function*() {
      const missing = join(tempDir(), "does-not-exist")
      const outcome = yield* runCommand("echo hi", { cwd: missing, timeoutMs: 30_000 })
      expect(outcome.exitCode).toBeNull()
      expect(outcome.timedOut).toBe(false)
      expect(outcome.output).toBe("")
      expect(outcome.spawnError).toBe(`working directory does not exist: ${missing}`)
      expect(describeOutcome(outcome)).toBe(`[could not start: working directory does not exist: ${missing}]`)
    }))

  it.live("a command that cannot be passed to the shell is a spawn error too", () =>
    Effect.gen(function*() {
      const outcome = yield* run("echo a\u0000b")
      expect(outcome.exitCode).toBeNull()
      expect(outcome.spawnError).toBeDefined()
    }))
})

describe("describeOutcome", () => {
  const base: CommandOutcome = { exitCode: 0, output: "", outputTruncated: false, timedOut: false, durationMs: 5 }

  it("ends with the exit code", () => {
    expect(describeOutcome({ ...base, output: "hi\n" })).toBe("hi\n[exit code 0]")
    expect(describeOutcome({ ...base, output: "no newline", exitCode: 2 })).toBe("no newline\n[exit code 2]")
    expect(describeOutcome({ ...base, exitCode: 1 })).toBe("(no output)\n[exit code 1]")
  })

  it("names the signal, and the timeout when there was one", () => {
    expect(describeOutcome({ ...base, exitCode: null, signal: "SIGTERM", timedOut: true, timeoutMs: 2000 })).toBe(
      "(no output)\n[killed by SIGTERM after timeout 2000 ms]"
    )
    expect(describeOutcome({ ...base, output: "x\n", exitCode: null, signal: "SIGKILL" })).toBe("x\n[killed by SIGKILL]")
  })

  it("says what was truncated and why nothing ran", () => {
    expect(
      describeOutcome({ ...base, output: "head\n[… 123 bytes omitted …]\ntail", outputTruncated: true, outputDroppedBytes: 123 })
    ).toBe("head\n[… 123 bytes omitted …]\ntail\n[output truncated: 123 bytes dropped from the middle]\n[exit code 0]")
    expect(describeOutcome({ ...base, exitCode: null, spawnError: "boom" })).toBe("[could not start: boom]")
  })
})
