/**
 * Start-up of the `lite-agent` command as installed (the built package, `npm run build` first):
 * `--version`, and a whole `-p` turn with the scripted model (its model call answers at once, so
 * the run is start-up, the turn's log writes and exit), each against a bare `node -e ""` measured
 * in the same run, alternating. Medians of `ROUNDS` runs.
 */
import { execFileSync, spawnSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { median, ratio } from "./shared.js"

const ROUNDS = 15
const root = resolve(import.meta.dirname, "..")
const bin = join(root, "packages", "sdk", "dist", "cli", "main.js")

/** Wall time of one run of `node <args>`, in ms; it must succeed. */
const timed = (args: ReadonlyArray<string>): number => {
  const start = process.hrtime.bigint()
  const run = spawnSync(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NO_COLOR: "1" } })
  const elapsed = Number(process.hrtime.bigint() - start) / 1e6
  if (run.status !== 0) throw new Error(`node ${args.join(" ")} failed: ${run.stderr.toString()}`)
  return elapsed
}

export const runCliBench = () => {
  execFileSync(process.execPath, [join(root, "scripts", "build.mjs")], { cwd: root, stdio: "ignore" })
  const dir = mkdtempSync(join(tmpdir(), "lite-agent-bench-cli-"))
  try {
    const turns = join(dir, "turns.json")
    writeFileSync(turns, JSON.stringify(Array.from({ length: ROUNDS + 1 }, () => ({ text: "done" }))))
    const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
      ["lite-agent --version", [bin, "--version"]],
      [
        "lite-agent -p (a whole scripted turn)",
        [bin, "-p", "hi", "--model", `scripted:${turns}`, "--checkpointer", `file:${join(dir, "sessions")}`, "--workdir", dir, "--capture", "tools", "--permission-mode", "plan"]
      ]
    ]
    const rows: Array<Array<string>> = []
    for (const [name, args] of cases) {
      timed(args) // warm the file cache
      const bare: Array<number> = []
      const command: Array<number> = []
      for (let round = 0; round < ROUNDS; round++) {
        bare.push(timed(["-e", ""]))
        command.push(timed(args))
      }
      rows.push([name, `${median(command).toFixed(0)} ms`, `${median(bare).toFixed(0)} ms`, ratio(median(command), median(bare))])
    }
    return rows
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
