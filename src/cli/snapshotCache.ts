/**
 * Where the command's startup snapshot for this node lives, and building it. A snapshot holds
 * V8's heap, so it is good only for the node binary that built it: its name carries the build of
 * the command (an id of the bundle) and the node binary's mtime and size — what bin/lite-agent,
 * a shell script, can read with `stat` without starting node. The first start without one builds
 * it in the background (into a temporary name, tried, then renamed), so later starts use it.
 * `LITE_AGENT_NO_SNAPSHOT=1` turns both off, and so does `NODE_OPTIONS` (V8 flags must match). Imports only built-in modules: main.ts stays light.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs"
import { homedir } from "node:os"
import { dirname, join } from "node:path"
import { VERSION } from "./help.js"

/** The snapshot this command (from `distCli`, its dist/cli directory) would start from on this node; undefined when it has none to build. */
export const snapshotBlob = (distCli: string): string | undefined => {
  const set = (name: string) => (process.env[name] ?? "") !== ""
  // NODE_OPTIONS may hold V8 flags, which a snapshot must be built and started with alike: the bin starts none then.
  if (set("LITE_AGENT_NO_SNAPSHOT") || set("NODE_OPTIONS")) return undefined
  try {
    const { id } = JSON.parse(readFileSync(join(distCli, "snapshot.json"), "utf8")) as { readonly id: string }
    const node = statSync(process.execPath)
    // As the bin reads it: an empty LITE_AGENT_HOME is none.
    const home = set("LITE_AGENT_HOME") ? process.env["LITE_AGENT_HOME"]! : join(homedir(), ".lite-agent")
    return join(home, "cache", `cli-${id}-${Math.floor(node.mtimeMs / 1000)}-${node.size}.blob`)
  } catch {
    // Not the built package (tsx in this repository), or nothing to read: no snapshot.
    return undefined
  }
}

/** How long a build in progress (its marker) keeps other starts from starting one, and a failed one from being tried again. */
const BUILD_MARKER_MS = 10 * 60_000
const FAILED_MARKER_MS = 24 * 60 * 60_000

const markedSince = (marker: string, ms: number) => {
  try {
    return Date.now() - statSync(marker).mtimeMs < ms
  } catch {
    return false
  }
}

/**
 * Build `blob` from the bundle in `distCli` in a detached process, unless it exists, another
 * start is building it, or a build failed in the last day; once it is in place, the cache's other
 * snapshots (other builds, other node binaries) are deleted. Never fails the command.
 */
export const buildSnapshotInBackground = (distCli: string, blob: string): void => {
  if (existsSync(blob)) return
  const building = `${blob}.building`
  const failed = `${blob}.failed`
  if (markedSince(building, BUILD_MARKER_MS) || markedSince(failed, FAILED_MARKER_MS)) return
  try {
    mkdirSync(dirname(blob), { recursive: true })
    writeFileSync(building, `${process.pid}\n`)
    const temporary = `${blob}.${process.pid}.tmp`
    const snapshot = join(distCli, "snapshot.cjs")
    // Built, then tried (it must start and answer --version) before it takes the name the bin looks for.
    const script = [
      `const { execFileSync } = require("node:child_process")`,
      `const { readdirSync, renameSync, rmSync, writeFileSync } = require("node:fs")`,
      `const { basename, dirname, join } = require("node:path")`,
      `const [temporary, blob, snapshot, main, building, failed] = ${
        JSON.stringify([temporary, blob, snapshot, join(distCli, "main.js"), building, failed])
      }`,
      `try {`,
      `  execFileSync(process.execPath, ["--snapshot-blob", temporary, "--build-snapshot", snapshot], { stdio: "ignore" })`,
      `  const version = execFileSync(process.execPath, ["--snapshot-blob", temporary, main, "--version"], { encoding: "utf8" })`,
      `  if (version.trim() !== ${JSON.stringify(VERSION)}) throw new Error("the snapshot does not start")`,
      `  renameSync(temporary, blob)`,
      `  for (const name of readdirSync(dirname(blob))) {`,
      `    if (name.startsWith("cli-") && name.endsWith(".blob") && name !== basename(blob)) rmSync(join(dirname(blob), name), { force: true })`,
      `  }`,
      `} catch { rmSync(temporary, { force: true }); writeFileSync(failed, "") }`,
      `rmSync(building, { force: true })`
    ].join("\n")
    // Without NODE_OPTIONS (checked unset) and with nothing to inherit: the snapshot is for a plain start.
    spawn(process.execPath, ["-e", script], { detached: true, stdio: "ignore" }).unref()
  } catch {
    // A start without a snapshot is only slower.
  }
}
