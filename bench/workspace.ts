/**
 * Whole-workspace checkpoints against what peers do, on two generated trees (2,000 files / 20 MB
 * and 20,000 files / 200 MB, 10 KB each, 50 per directory), each run in this process:
 *
 * - a capture after 5 files changed, against `git status --porcelain` with an up-to-date index
 *   (the stat walk's floor) and a shadow-repository commit (`git add -A && git commit` with a
 *   separate `GIT_DIR`: what Gemini CLI, Cline and opencode do at every step);
 * - the bytes it stores, against the unique bytes that changed (the shadow repository's growth beside it);
 * - a capture after a command made 2,000 new files (a build's output), against the shadow commit;
 * - a restore of 5 files, on the large tree against the small one;
 * - a restore of 400 files three directories deep (every step by directory handle, every file
 *   looked at again before the commit), against writing the same bytes to the same paths with
 *   `writeFileSync` (no temp file, no rename, no check: the floor);
 * - an agent turn whose command changes 5 files, with `capture: "all"` against `capture: "tools"`.
 *
 * Medians of `ROUNDS` rounds; every figure is a ratio against a baseline of the same run.
 */
import { execFileSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { randomBytes } from "node:crypto"
import { createLiteAgent, fileCheckpointer } from "../src/index.js"
import { scripted, type ScriptedTurn } from "../src/provider.js"
import { median, ms } from "./shared.js"

const ROUNDS = 5
export const FILE_BYTES = 10 * 1024
export const PER_DIRECTORY = 50

export const makeTree = (files: number): string => {
  const root = mkdtempSync(join(tmpdir(), `lite-agent-bench-tree-${files}-`))
  for (let i = 0; i < files; i++) {
    const dir = join(root, "src", `d${Math.floor(i / PER_DIRECTORY)}`)
    if (i % PER_DIRECTORY === 0) mkdirSync(dir, { recursive: true })
    // Text-like but incompressible enough that neither side gains from compression.
    writeFileSync(join(dir, `f${i}.ts`), randomBytes(FILE_BYTES / 2).toString("hex"))
  }
  return root
}

export const git = (args: ReadonlyArray<string>, cwd: string, env: Record<string, string> = {}) =>
  execFileSync("git", [...args], { cwd, env: { ...process.env, ...env, GIT_AUTHOR_NAME: "b", GIT_AUTHOR_EMAIL: "b@b", GIT_COMMITTER_NAME: "b", GIT_COMMITTER_EMAIL: "b@b" }, stdio: ["ignore", "pipe", "ignore"] })

export const timed = (run: () => unknown): number => {
  const start = process.hrtime.bigint()
  run()
  return ms(start)
}

export const duBytes = (dir: string): number => {
  let total = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    total += entry.isDirectory() ? duBytes(path) : statSync(path).size
  }
  return total
}

/** Five files of the tree rewritten (new content of the same size), different ones each round. */
const changeFive = (root: string, files: number, round: number): number => {
  let bytes = 0
  for (let k = 0; k < 5; k++) {
    const i = (round * 7919 + k * 104729) % files
    const content = randomBytes(FILE_BYTES / 2).toString("hex")
    writeFileSync(join(root, "src", `d${Math.floor(i / PER_DIRECTORY)}`, `f${i}.ts`), content)
    bytes += content.length
  }
  return bytes
}

const shellTurn = (command: string): Array<ScriptedTurn> => [
  { toolCalls: [{ name: "shell", input: { command } }] },
  { text: "done" }
]

interface TreeFigures {
  readonly files: number
  readonly captureMs: number
  readonly gitStatusMs: number
  readonly shadowCommitMs: number
  readonly storedBytes: number
  readonly changedBytes: number
  readonly shadowBytes: number
  readonly buildCaptureMs: number
  readonly buildShadowMs: number
  readonly restoreMs: number
  readonly turnAllMs: number
  readonly turnToolsMs: number
}

const measureTree = async (files: number): Promise<TreeFigures> => {
  const root = makeTree(files)
  const shadow = mkdtempSync(join(tmpdir(), "lite-agent-bench-shadow-"))
  const shadowEnv = { GIT_DIR: shadow, GIT_WORK_TREE: root }
  git(["init", "-q"], root, shadowEnv)
  // No background garbage collection in the middle of a measurement.
  git(["config", "gc.auto", "0"], root, shadowEnv)
  git(["add", "-A"], root, shadowEnv)
  git(["commit", "-q", "-m", "base"], root, shadowEnv)
  git(["status", "--porcelain"], root, shadowEnv)

  const store = mkdtempSync(join(tmpdir(), "lite-agent-bench-store-"))
  const checkpointer = fileCheckpointer({ dir: store })
  // Each round: a turn whose command rewrites 5 files (their content chosen by the round).
  const script = (round: number) => `node -e 'const fs=require("fs"),c=require("crypto");for(const p of process.argv.slice(1))fs.writeFileSync(p,c.randomBytes(${FILE_BYTES / 2}).toString("hex"))' ${fivePaths(round).join(" ")}`
  const fivePaths = (round: number) =>
    Array.from({ length: 5 }, (_, k) => {
      const i = (round * 7919 + k * 104729 + 13) % files
      return `src/d${Math.floor(i / PER_DIRECTORY)}/f${i}.ts`
    })
  const turnsFor = (rounds: number) => Array.from({ length: rounds }, (_, round) => shellTurn(script(round))).flat()
  // ROUNDS turns measured as turns, then ROUNDS more, each undone by the restore that is measured.
  const agent = createLiteAgent({ model: scripted([{ text: "baseline" }, ...turnsFor(2 * ROUNDS)]), workdir: root, checkpointer, sessionId: "all" })
  // The session's first capture reads and stores the whole tree, once.
  await agent.send("start")

  const captureTimes: Array<number> = []
  const gitTimes: Array<number> = []
  const shadowTimes: Array<number> = []
  const turnAllTimes: Array<number> = []
  let storedBytes = 0
  let changedBytes = 0
  let shadowBytes = 0
  for (let round = 0; round < ROUNDS; round++) {
    // A capture of 5 changes: what the agent's checkpoint capture costs (timed through a turn that does nothing else is below).
    const before = await checkpointer.stats("all")
    const shadowBefore = duBytes(shadow)
    // Five files changed between turns, five by the turn's command.
    changedBytes += changeFive(root, files, round) + 5 * FILE_BYTES
    gitTimes.push(timed(() => git(["status", "--porcelain"], root, shadowEnv)))
    // The checkpoint capture of this turn sees the 5 changes (the user's, between turns); the command's 5 after it.
    const start = process.hrtime.bigint()
    await agent.send(`round ${round}`)
    turnAllTimes.push(ms(start))
    const after = await checkpointer.stats("all")
    storedBytes += after.snapshotBytes - before.snapshotBytes + after.logBytes - before.logBytes
    shadowTimes.push(timed(() => {
      git(["add", "-A"], root, shadowEnv)
      git(["commit", "-q", "-m", `round ${round}`], root, shadowEnv)
    }))
    shadowBytes += duBytes(shadow) - shadowBefore
  }
  // The capture alone, through the engine: 5 changes each time.
  const { make } = await import("../src/tools/WorkspaceCapture.js")
  const { Effect, Exit, Scope } = await import("effect")
  const { Session } = await import("../src/core.js")
  // Kept open for the measurements (its watcher with it), closed at the end.
  const scope = Effect.runSync(Scope.make())
  const engine = await Effect.runPromise(Scope.extend(make(root), scope))
  let state = Session.fold(await checkpointer.read("all"))
  // The engine's events are folded in as its callers append them: right after the head.
  const captureOnce = async () => {
    const captured = (await Effect.runPromise(engine.capture("engine", state, { _tag: "checkpoint" }))).events
    state = Session.fold(captured.map((event, index) => ({ seq: state.head + index + 1, ts: 0, event })), state)
  }
  // Its first capture walks the tree (and starts watching it).
  await captureOnce()
  for (let round = 0; round < ROUNDS; round++) {
    changeFive(root, files, round + 100)
    const start = process.hrtime.bigint()
    await captureOnce()
    captureTimes.push(ms(start))
  }

  // A build's output: 2,000 new files from one command.
  const buildDir = join(root, "build")
  mkdirSync(buildDir)
  for (let i = 0; i < 2000; i++) writeFileSync(join(buildDir, `out${i}.js`), randomBytes(512).toString("hex"))
  const buildStart = process.hrtime.bigint()
  await captureOnce()
  const buildCaptureMs = ms(buildStart)
  await Effect.runPromise(Scope.close(scope, Exit.void))
  const buildShadowMs = timed(() => {
    git(["add", "-A"], root, shadowEnv)
    git(["commit", "-q", "-m", "build"], root, shadowEnv)
  })
  rmSync(buildDir, { recursive: true })

  // A restore of 5 files: a turn whose command changes 5 files, then back to before it.
  const restoreTimes: Array<number> = []
  for (let round = 0; round < ROUNDS; round++) {
    await agent.send(`to undo ${round}`)
    const checkpoints = await agent.listCheckpoints("all")
    const restoreStart = process.hrtime.bigint()
    await agent.restore("all", checkpoints.at(-1)!.seq)
    restoreTimes.push(ms(restoreStart))
  }
  const restoreMs = median(restoreTimes)
  await agent.close()

  // The same turns with capture: "tools", on the same tree.
  const toolsAgent = createLiteAgent({
    model: scripted([{ text: "baseline" }, ...turnsFor(ROUNDS)]),
    workdir: root,
    checkpointer,
    sessionId: "tools",
    workspace: { capture: "tools" }
  })
  await toolsAgent.send("start")
  const turnToolsTimes: Array<number> = []
  for (let round = 0; round < ROUNDS; round++) {
    const start = process.hrtime.bigint()
    await toolsAgent.send(`round ${round}`)
    turnToolsTimes.push(ms(start))
  }
  await toolsAgent.close()
  await checkpointer.close()
  for (const dir of [root, shadow, store]) rmSync(dir, { recursive: true, force: true })
  return {
    files,
    captureMs: median(captureTimes),
    gitStatusMs: median(gitTimes),
    shadowCommitMs: median(shadowTimes),
    storedBytes,
    changedBytes,
    shadowBytes,
    buildCaptureMs,
    buildShadowMs,
    restoreMs,
    turnAllMs: median(turnAllTimes),
    turnToolsMs: median(turnToolsTimes)
  }
}

const WIDE_FILES = 400

/** A restore that rewrites WIDE_FILES files of d/a*\/b*\/, and writeFileSync of the same bytes to the same paths. */
const measureWideRestore = async (): Promise<{ readonly restoreMs: number; readonly writeMs: number }> => {
  const root = mkdtempSync(join(tmpdir(), "lite-agent-bench-wide-"))
  const paths = Array.from({ length: WIDE_FILES }, (_, i) => join("d", `a${i % 4}`, `b${i % 10}`, `f${i}.txt`))
  const contents = paths.map(() => randomBytes(512).toString("hex"))
  for (const [i, path] of paths.entries()) {
    mkdirSync(join(root, path, ".."), { recursive: true })
    writeFileSync(join(root, path), contents[i]!)
  }
  const store = mkdtempSync(join(tmpdir(), "lite-agent-bench-wide-store-"))
  const checkpointer = fileCheckpointer({ dir: store })
  // Each round a command rewrites every file (bash builtins only: one process), and the restore puts them back.
  const rewriteAll = (round: number) => shellTurn(`for f in d/*/*/*.txt; do echo "round ${round}" > "$f"; done`)
  const agent = createLiteAgent({
    model: scripted([{ text: "baseline" }, ...Array.from({ length: ROUNDS }, (_, round) => rewriteAll(round)).flat()]),
    workdir: root,
    checkpointer,
    sessionId: "wide"
  })
  await agent.send("start")
  const restoreTimes: Array<number> = []
  const writeTimes: Array<number> = []
  for (let round = 0; round < ROUNDS; round++) {
    await agent.send(`rewrite ${round}`)
    const checkpoints = await agent.listCheckpoints("wide")
    const start = process.hrtime.bigint()
    const result = await agent.restore("wide", checkpoints.at(-1)!.seq)
    restoreTimes.push(ms(start))
    if (result.restoredFiles.length !== WIDE_FILES) throw new Error(`the restore put back ${result.restoredFiles.length} files, not ${WIDE_FILES}`)
    // The floor: the same bytes to the same paths, straight.
    writeTimes.push(timed(() => {
      for (const [i, path] of paths.entries()) writeFileSync(join(root, path), contents[i]!)
    }))
  }
  await agent.close()
  await checkpointer.close()
  for (const dir of [root, store]) rmSync(dir, { recursive: true, force: true })
  return { restoreMs: median(restoreTimes), writeMs: median(writeTimes) }
}

export const runWorkspaceBench = async (): Promise<Array<Array<string>>> => {
  const small = await measureTree(2_000)
  const large = await measureTree(20_000)
  const x = (value: number) => `${value.toFixed(2)}×`
  const rows: Array<Array<string>> = []
  for (const figures of [small, large]) {
    const label = `${figures.files.toLocaleString()} files`
    rows.push(
      [label, "capture, 5 files changed", `${figures.captureMs.toFixed(1)} ms`, `git status ${figures.gitStatusMs.toFixed(1)} ms; shadow commit ${figures.shadowCommitMs.toFixed(1)} ms`, `${x(figures.captureMs / figures.gitStatusMs)} git status; ${x(figures.captureMs / figures.shadowCommitMs)} shadow commit`],
      [label, `bytes stored for ${ROUNDS} × 10 changes`, `${(figures.storedBytes / 1024).toFixed(0)} KB`, `unique changed ${(figures.changedBytes / 1024).toFixed(0)} KB; shadow .git +${(figures.shadowBytes / 1024).toFixed(0)} KB`, x(figures.storedBytes / figures.changedBytes)],
      [label, "capture of a 2,000-file build output", `${figures.buildCaptureMs.toFixed(0)} ms`, `shadow commit ${figures.buildShadowMs.toFixed(0)} ms`, x(figures.buildCaptureMs / figures.buildShadowMs)],
      [label, "agent turn (a command changing 5 files)", `${figures.turnAllMs.toFixed(1)} ms`, `capture: "tools" ${figures.turnToolsMs.toFixed(1)} ms`, x(figures.turnAllMs / figures.turnToolsMs)]
    )
  }
  rows.push(["20,000 vs 2,000 files", "restore of 5 files", `${large.restoreMs.toFixed(1)} ms`, `${small.restoreMs.toFixed(1)} ms`, x(large.restoreMs / small.restoreMs)])
  const wide = await measureWideRestore()
  rows.push([
    `${WIDE_FILES} files, 3 directories deep`,
    "restore of every file",
    `${wide.restoreMs.toFixed(1)} ms`,
    `writeFileSync of the same bytes ${wide.writeMs.toFixed(1)} ms`,
    x(wide.restoreMs / wide.writeMs)
  ])
  return rows
}
