/**
 * Start-up of the `lite-agent` command as installed (the built package, `npm run build` first;
 * its bin, bin/lite-agent): `--version`, and a whole `-p` turn with the scripted model (its model
 * call answers at once, so the run is start-up, the turn's log writes and exit) — started from the
 * command's snapshot (built by a first run, waited for) and without one (`LITE_AGENT_NO_SNAPSHOT`)
 * — each against a bare `node -e ""` measured in the same run, alternating. Medians of `ROUNDS` runs.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { median, ratio } from "./shared.js"

const ROUNDS = 15
const root = resolve(import.meta.dirname, "..")
const bin = join(root, "packages", "sdk", "bin", "lite-agent")

/** Wall time of one run of `command <args>`, in ms; it must succeed. */
const timed = (command: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = {}): number => {
  const start = process.hrtime.bigint()
  const run = spawnSync(command, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NO_COLOR: "1", ...env } })
  const elapsed = Number(process.hrtime.bigint() - start) / 1e6
  if (run.status !== 0) throw new Error(`${command} ${args.join(" ")} failed: ${run.stderr.toString()}`)
  return elapsed
}

/**
 * Ms from the start of `command <args>` (a `-p … --output-format stream-json` turn) until it
 * reports the user's message — the last thing before the model call — then the process is killed.
 */
const untilModelCall = (command: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv): Promise<number> =>
  new Promise((resolve, reject) => {
    const start = process.hrtime.bigint()
    const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, NO_COLOR: "1", ...env } })
    let output = ""
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (chunk: string) => {
      output += chunk
      if (output.includes('"_tag":"UserMessage"')) {
        const elapsed = Number(process.hrtime.bigint() - start) / 1e6
        child.kill("SIGKILL")
        resolve(elapsed)
      }
    })
    child.on("close", () => reject(new Error(`${command} ${args.join(" ")} ended before the model call: ${output}`)))
  })

export const runCliBench = async () => {
  execFileSync(process.execPath, [join(root, "scripts", "build.mjs")], { cwd: root, stdio: "ignore" })
  const dir = mkdtempSync(join(tmpdir(), "lite-agent-bench-cli-"))
  try {
    const turns = join(dir, "turns.json")
    writeFileSync(turns, JSON.stringify(Array.from({ length: 4 * ROUNDS }, () => ({ text: "done" }))))
    const home = join(dir, "home")
    const turn = ["-p", "hi", "--model", `scripted:${turns}`, "--checkpointer", `file:${join(dir, "sessions")}`, "--workdir", dir, "--capture", "tools", "--permission-mode", "plan"]
    // A first run builds the snapshot in the background: wait for it.
    timed(bin, turn, { LITE_AGENT_HOME: home })
    const cache = join(home, "cache")
    const deadline = Date.now() + 60_000
    while (!(existsSync(cache) && readdirSync(cache).some((name) => name.endsWith(".blob")))) {
      if (Date.now() > deadline) throw new Error("the command's snapshot was not built within a minute")
      spawnSync("sleep", ["0.1"])
    }
    const cases: ReadonlyArray<readonly [string, ReadonlyArray<string>, NodeJS.ProcessEnv]> = [
      ["lite-agent --version", ["--version"], { LITE_AGENT_HOME: home }],
      ["lite-agent -p (a whole scripted turn), from the snapshot", turn, { LITE_AGENT_HOME: home }],
      ["lite-agent -p (a whole scripted turn), without a snapshot", turn, { LITE_AGENT_HOME: home, LITE_AGENT_NO_SNAPSHOT: "1" }]
    ]
    const rows: Array<Array<string>> = []
    for (const [name, args, env] of cases) {
      timed(bin, args, env) // warm the file cache
      const bare: Array<number> = []
      const command: Array<number> = []
      for (let round = 0; round < ROUNDS; round++) {
        bare.push(timed(process.execPath, ["-e", ""]))
        command.push(timed(bin, args, env))
      }
      rows.push([name, `${median(command).toFixed(0)} ms`, `${median(bare).toFixed(0)} ms`, ratio(median(command), median(bare))])
    }
    // Start-up as the issue counts it: until the model is called (the turn's model call waits a minute).
    const slow = join(dir, "slow.json")
    writeFileSync(slow, JSON.stringify(Array.from({ length: 2 * ROUNDS + 2 }, () => ({ text: "late", delayMs: 60_000 }))))
    const toModel = ["-p", "hi", "--model", `scripted:${slow}`, "--checkpointer", `file:${join(dir, "slow-sessions")}`, "--workdir", dir, "--capture", "tools", "--permission-mode", "plan", "--output-format", "stream-json"]
    for (const [name, env] of [
      ["lite-agent -p until the model call, from the snapshot", { LITE_AGENT_HOME: home }],
      ["lite-agent -p until the model call, without a snapshot", { LITE_AGENT_HOME: home, LITE_AGENT_NO_SNAPSHOT: "1" }]
    ] as const) {
      await untilModelCall(bin, toModel, env)
      const bare: Array<number> = []
      const command: Array<number> = []
      for (let round = 0; round < ROUNDS; round++) {
        bare.push(timed(process.execPath, ["-e", ""]))
        command.push(await untilModelCall(bin, toModel, env))
      }
      rows.push([name, `${median(command).toFixed(0)} ms`, `${median(bare).toFixed(0)} ms`, ratio(median(command), median(bare))])
    }
    return rows
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
