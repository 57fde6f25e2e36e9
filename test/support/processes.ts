/**
 * Child Node processes for the multi-process tests: started from test/workers as transpiled
 * once for the run (compiledForProcesses.ts), their stdout read line by line and their IPC
 * messages queued, and every one still running tracked so a test can kill what it left behind.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative, resolve } from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { expect, inject } from "vitest"

const root = resolve(import.meta.dirname, "..", "..")

/** The transpiled JavaScript of a TypeScript file of the repository (a path or a file URL). */
export const compiled = (file: string): string => {
  const path = file.startsWith("file:") ? fileURLToPath(file) : file
  const javascript = join(inject("compiledRoot"), relative(root, path)).replace(/\.ts$/, ".js")
  return file.startsWith("file:") ? pathToFileURL(javascript).href : javascript
}

/** The arguments that start Node on a TypeScript file of the repository, as transpiled for the run. */
export const nodeArgs = (file: string): Array<string> => ["--enable-source-maps", compiled(file)]

const tempDirs: Array<string> = []

/** A temporary directory removed by `removeTempDirs`. */
export const makeTempDir = (label: string) => {
  const dir = mkdtempSync(join(tmpdir(), `lite-agent-processes-${label}-`))
  tempDirs.push(dir)
  return dir
}

export const removeTempDirs = () => {
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true })
}

export interface Worker {
  readonly child: ChildProcess
  /** Complete stdout lines so far. */
  readonly lines: Array<string>
  stderr(): string
  /** The first stdout line (already seen or still to come) matching `predicate`; rejects if the process ends first. */
  waitForLine(predicate: (line: string) => boolean): Promise<string>
  /** The next IPC message (in order); rejects if the process ends first. */
  nextMessage(): Promise<unknown>
  /** Resolves once the process has ended and its output is drained. */
  readonly closed: Promise<{ readonly code: number | null; readonly signal: NodeJS.Signals | null }>
}

/** Every started process that has not ended yet. */
export const live = new Set<ChildProcess>()

export const isRunning = (child: ChildProcess) => child.exitCode === null && child.signalCode === null

/** The pid a command wrote to `file` (`echo $$ > file`), once it is there. */
export const pidWrittenTo = async (file: string): Promise<number> => {
  while (!existsSync(file) || readFileSync(file, "utf8").trim() === "") await new Promise((resolve) => setTimeout(resolve, 20))
  return Number(readFileSync(file, "utf8").trim())
}

const processExists = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Whether process `pid` is gone within `timeoutMs` (it is looked for every 20 ms). */
export const goneWithin = async (pid: number, timeoutMs: number): Promise<boolean> => {
  const deadline = Date.now() + timeoutMs
  while (processExists(pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
  return !processExists(pid)
}

export interface WorkerOptions {
  readonly ipc?: boolean
  /**
   * A command that runs Node for the worker, e.g. `["unshare", "--net"]` to start it in a
   * network namespace of its own (the worker's process is then that command's).
   */
  readonly launcher?: ReadonlyArray<string>
  /** Added to the environment. */
  readonly env?: Readonly<Record<string, string>>
  /** Modules Node loads before the worker (`--import`), e.g. test/support/skewedClock.ts. */
  readonly imports?: ReadonlyArray<string>
}

export const startWorker = (script: string, args: ReadonlyArray<string>, options: WorkerOptions = {}): Worker => {
  const imports = (options.imports ?? []).flatMap((module) => ["--import", compiled(module)])
  const node = [process.execPath, ...imports, ...nodeArgs(resolve(import.meta.dirname, "..", "workers", script)), ...args]
  const [command, ...commandArgs] = [...(options.launcher ?? []), ...node]
  const child = spawn(command!, commandArgs, {
    cwd: root,
    stdio: options.ipc === true ? ["ignore", "pipe", "pipe", "ipc"] : ["pipe", "pipe", "pipe"],
    ...(options.env === undefined ? {} : { env: { ...process.env, ...options.env } })
  })
  live.add(child)
  const lines: Array<string> = []
  let partial = ""
  let stderr = ""
  const lineWaiters: Array<{ predicate: (line: string) => boolean; resolve: (line: string) => void }> = []
  const messages: Array<unknown> = []
  const messageWaiters: Array<(message: unknown) => void> = []
  child.stdout!.setEncoding("utf8")
  child.stdout!.on("data", (data: string) => {
    const parts = (partial + data).split("\n")
    partial = parts.pop() ?? ""
    for (const line of parts) {
      lines.push(line)
      for (let i = lineWaiters.length - 1; i >= 0; i--) {
        const waiter = lineWaiters[i]!
        if (waiter.predicate(line)) {
          lineWaiters.splice(i, 1)
          waiter.resolve(line)
        }
      }
    }
  })
  child.stderr!.setEncoding("utf8")
  child.stderr!.on("data", (data: string) => {
    stderr += data
  })
  child.on("message", (message: unknown) => {
    const waiter = messageWaiters.shift()
    if (waiter === undefined) messages.push(message)
    else waiter(message)
  })
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolveClosed) => {
    child.on("close", (code, signal) => {
      live.delete(child)
      resolveClosed({ code, signal })
    })
  })
  const endedEarly = (what: string) =>
    closed.then(({ code, signal }) => {
      throw new Error(`${script} ended (code ${code}, signal ${signal}) before ${what}; stderr:\n${stderr}`)
    })
  return {
    child,
    lines,
    stderr: () => stderr,
    waitForLine: (predicate) => {
      const seen = lines.find(predicate)
      if (seen !== undefined) return Promise.resolve(seen)
      return Promise.race([
        new Promise<string>((resolveLine) => lineWaiters.push({ predicate, resolve: resolveLine })),
        endedEarly("the expected line")
      ])
    },
    nextMessage: () => {
      if (messages.length > 0) return Promise.resolve(messages.shift())
      return Promise.race([new Promise<unknown>((resolveMessage) => messageWaiters.push(resolveMessage)), endedEarly("a reply")])
    },
    closed
  }
}

export const expectCleanExit = async (worker: Worker) => {
  const { code, signal } = await worker.closed
  expect({ code, signal, stderr: worker.stderr() }).toEqual({ code: 0, signal: null, stderr: "" })
}

export { contentOf } from "./contents.js"

/** `lite-agent serve <args>`, run from the sources, once it listens: its process and its URL. */
export const startServe = async (args: ReadonlyArray<string>): Promise<{ readonly worker: Worker; readonly url: string }> => {
  const worker = startWorker("../../src/cli/main.ts", ["serve", ...args])
  const line = await worker.waitForLine((text) => text.startsWith("lite-agent serve: listening on "))
  return { worker, url: /listening on (\S+)/.exec(line)![1]! }
}
