/**
 * What a store holds and what a new session costs, across sessions: SESSIONS sessions, each a
 * new process (as `lite-agent -p` is) editing one file, over the two trees of the workspace bench
 * (2,000 files / 20 MB and 20,000 files / 200 MB). Baselines of the same run:
 *
 * - bytes: the workspace plus what changed; and one shadow git repository of the workspace
 *   (`git add -A && git commit` per session into a separate `GIT_DIR`, then `git gc`), against the
 *   store written with the gzip codec;
 * - time: `git status --porcelain` on the same tree, and the same turn with `capture: "tools"`
 *   (which reads no tree), against the first turn of a new session in a new process on a
 *   workspace the store has captured before (sessions 2 to SESSIONS).
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { randomBytes } from "node:crypto"
import { median } from "./shared.js"
import type { StorageSessionConfig } from "./storage-session.js"
import { duBytes, FILE_BYTES, git, makeTree, PER_DIRECTORY, timed } from "./workspace.js"

const SESSIONS = 20
const TOOLS_SESSIONS = 5
const root = resolve(import.meta.dirname, "..")

/** One session in a process of its own; the turn's own time. */
const session = (config: StorageSessionConfig): number => {
  const output = execFileSync(process.execPath, ["--import", "tsx", join(root, "bench", "storage-session.ts"), JSON.stringify(config)], {
    cwd: root,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"]
  })
  return (JSON.parse(output.trim().split("\n").at(-1)!) as { turnMs: number }).turnMs
}

/** The file session `index` edits (a different one each), and its new content. */
const edit = (files: number, index: number) => {
  const i = (index * 7919 + 17) % files
  return { path: `src/d${Math.floor(i / PER_DIRECTORY)}/f${i}.ts`, content: randomBytes(FILE_BYTES / 2).toString("hex") }
}

/** Bytes a session's log takes: its log file (the file backend's one per session). */
const logBytesOf = (store: string): Array<number> =>
  readdirSync(store, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && !entry.name.startsWith("."))
    .flatMap((entry) => readdirSync(join(store, entry.name)).filter((name) => name === "log").map((name) => statSync(join(store, entry.name, name)).size))

interface StorageFigures {
  readonly files: number
  readonly workspaceBytes: number
  readonly changedBytes: number
  readonly storeBytes: number
  readonly gzipStoreBytes: number
  readonly shadowBytes: number
  readonly firstTurnMs: number
  readonly laterTurnMs: number
  readonly toolsTurnMs: number
  readonly gitStatusMs: number
  readonly logBytes: number
}

const measure = async (files: number): Promise<StorageFigures> => {
  const workdir = makeTree(files)
  const workspaceBytes = duBytes(join(workdir, "src"))
  const scratch = mkdtempSync(join(tmpdir(), "lite-agent-bench-storage-"))
  const store = join(scratch, "store")
  const gzipStore = join(scratch, "store-gzip")
  const toolsStore = join(scratch, "store-tools")

  // The shadow repository: the workspace committed once, then once per session's edit, then packed.
  const shadow = join(scratch, "shadow.git")
  const shadowEnv = { GIT_DIR: shadow, GIT_WORK_TREE: workdir }
  git(["init", "-q"], workdir, shadowEnv)
  git(["config", "gc.auto", "0"], workdir, shadowEnv)
  git(["add", "-A"], workdir, shadowEnv)
  git(["commit", "-q", "-m", "base"], workdir, shadowEnv)
  const gitStatusMs = median(Array.from({ length: 5 }, () => timed(() => git(["status", "--porcelain"], workdir, shadowEnv))))

  let changedBytes = 0
  const turnTimes: Array<number> = []
  for (let index = 0; index < SESSIONS; index++) {
    const { content, path } = edit(files, index)
    changedBytes += content.length
    turnTimes.push(session({ store, workdir, codec: "none", capture: "all", path, content }))
    git(["add", "-A"], workdir, shadowEnv)
    git(["commit", "-q", "-m", `session ${index}`], workdir, shadowEnv)
  }
  execFileSync("git", ["gc", "-q"], { cwd: workdir, env: { ...process.env, ...shadowEnv }, stdio: "ignore" })
  const shadowBytes = duBytes(shadow)
  const storeBytes = duBytes(store)
  const logBytes = median(logBytesOf(store))

  // The same sessions on a gzip store (the same edits again: the bytes, not the time, are compared).
  for (let index = 0; index < SESSIONS; index++) {
    const { content, path } = edit(files, index)
    session({ store: gzipStore, workdir, codec: "gzip", capture: "all", path, content })
  }
  const gzipStoreBytes = duBytes(gzipStore)

  // The same turn reading no tree: the floor of a turn in a new process.
  const toolsTimes: Array<number> = []
  for (let index = 0; index < TOOLS_SESSIONS; index++) {
    const { content, path } = edit(files, index)
    toolsTimes.push(session({ store: toolsStore, workdir, codec: "none", capture: "tools", path, content }))
  }

  rmSync(workdir, { recursive: true, force: true })
  rmSync(scratch, { recursive: true, force: true })
  return {
    files,
    workspaceBytes,
    changedBytes,
    storeBytes,
    gzipStoreBytes,
    shadowBytes,
    firstTurnMs: turnTimes[0]!,
    laterTurnMs: median(turnTimes.slice(1)),
    toolsTurnMs: median(toolsTimes),
    gitStatusMs,
    logBytes
  }
}

export const runStorageBench = async (): Promise<Array<Array<string>>> => {
  const x = (value: number) => `${value.toFixed(2)}×`
  const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`
  const rows: Array<Array<string>> = []
  for (const files of [2_000, 20_000]) {
    const figures = await measure(files)
    const label = `${files.toLocaleString()} files, ${SESSIONS} sessions`
    rows.push(
      [label, "store bytes (no codec)", mb(figures.storeBytes), `workspace + changed ${mb(figures.workspaceBytes + figures.changedBytes)}`, x(figures.storeBytes / (figures.workspaceBytes + figures.changedBytes))],
      [label, "store bytes (gzip codec)", mb(figures.gzipStoreBytes), `shadow git repository ${mb(figures.shadowBytes)}`, x(figures.gzipStoreBytes / figures.shadowBytes)],
      [label, "first turn of a new session, known workspace", `${figures.laterTurnMs.toFixed(0)} ms`, `git status ${figures.gitStatusMs.toFixed(0)} ms`, x(figures.laterTurnMs / figures.gitStatusMs)],
      [label, "the same turn", `${figures.laterTurnMs.toFixed(0)} ms`, `capture: "tools" ${figures.toolsTurnMs.toFixed(0)} ms`, x(figures.laterTurnMs / figures.toolsTurnMs)],
      [label, "a new session's log", `${(figures.logBytes / 1024).toFixed(0)} KB`, "1 path changed", "—"]
    )
  }
  return rows
}
