/**
 * Where the command's startup snapshot for this node lives, and building it. A snapshot holds
 * V8's heap, so it is good only for the node binary that built it: its name carries the build of
 * the command (an id of the bundle) and the node binary's mtime and size — what bin/lite-agent,
 * a shell script, can read with `stat` without starting node. The first start without one builds
 * it in the background (into a temporary name, then renamed), so later starts use it.
 * `LITE_AGENT_NO_SNAPSHOT=1` turns both off. Imports only built-in modules: main.ts stays light.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs"
import { homedir } from "node:os"
import { dirname, join } from "node:path"
import { VERSION } from "./help.js"

/** The snapshot this command (from `distCli`, its dist/cli directory) would start from on this node; undefined when it has none to build. */
export const snapshotBlob = (distCli: string): string | undefined => {
  if (process.env["LITE_AGENT_NO_SNAPSHOT"] !== undefined && process.env["LITE_AGENT_NO_SNAPSHOT"] !== "") return undefined
  try {
    const { id } = JSON.parse(readFileSync(join(distCli, "snapshot.json"), "utf8")) as { readonly id: string }
    const node = statSync(process.execPath)
    const home = process.env["LITE_AGENT_HOME"] ?? join(homedir(), ".lite-agent")
    return join(home, "cache", `cli-${id}-${Math.floor(node.mtimeMs / 1000)}-${node.size}.blob`)
  } catch {
    // Not the built package (tsx in this repository), or nothing to read: no snapshot.
    return undefined
  }
}

/** Build `blob` from the bundle in `distCli` in a detached process, unless it exists; never fails the command. */
export const buildSnapshotInBackground = (distCli: string, blob: string): void => {
  if (existsSync(blob)) return
  try {
    mkdirSync(dirname(blob), { recursive: true })
    const temporary = `${blob}.${process.pid}.tmp`
    const snapshot = join(distCli, "snapshot.cjs")
    // Built, then tried (it must start and answer --version) before it takes the name the bin looks for.
    const script = [
      `const { execFileSync } = require("node:child_process")`,
      `const { renameSync, rmSync } = require("node:fs")`,
      `const [temporary, blob, snapshot, main] = ${JSON.stringify([temporary, blob, snapshot, join(distCli, "main.js")])}`,
      `try {`,
      `  execFileSync(process.execPath, ["--snapshot-blob", temporary, "--build-snapshot", snapshot], { stdio: "ignore" })`,
      `  const version = execFileSync(process.execPath, ["--snapshot-blob", temporary, main, "--version"], { encoding: "utf8" })`,
      `  if (version.trim() !== ${JSON.stringify(VERSION)}) throw new Error("the snapshot does not start")`,
      `  renameSync(temporary, blob)`,
      `} catch { rmSync(temporary, { force: true }) }`
    ].join("\n")
    spawn(process.execPath, ["-e", script], { detached: true, stdio: "ignore" }).unref()
  } catch {
    // A start without a snapshot is only slower.
  }
}
