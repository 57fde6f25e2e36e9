/**
 * `lite-agent store du`, `gc` and `prune` in real processes, over a file store holding a
 * session with a captured file and the objects of a deleted session: what each prints as text and
 * as JSON, that gc deletes only what no session references once past the grace period, and the
 * command lines that cannot run (exit 2).
 */
import { execFile } from "node:child_process"
import { readdirSync, utimesSync } from "node:fs"
import { join, resolve } from "node:path"
import { promisify } from "node:util"
import { beforeAll, describe, expect, it } from "vitest"
import { createLiteAgent, fileCheckpointer, type GcReport, type PruneBranchesReport, type StoreUsage } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { tempDir } from "./support/agent.js"
import { nodeArgs } from "./support/processes.js"

const root = resolve(import.meta.dirname, "..")
const main = join(root, "src", "cli", "main.ts")

const cli = async (args: ReadonlyArray<string>) => {
  const running = promisify(execFile)(process.execPath, [...nodeArgs(main), ...args], {
    cwd: root,
    env: { ...process.env, LITE_AGENT_HOME: tempDir("cli-home") },
    timeout: 120_000
  })
  running.child.stdin?.end()
  return running.then(
    ({ stderr, stdout }) => ({ code: 0, stdout, stderr }),
    (error: { code?: number; stdout?: string; stderr?: string }) => ({ code: error.code ?? -1, stdout: error.stdout ?? "", stderr: error.stderr ?? "" })
  )
}

const HOUR_MS = 60 * 60_000

let sessions: string
let store: ReadonlyArray<string>

/** A session that wrote `path` in a workdir of its own. */
const sessionWriting = async (id: string, path: string, content: string) => {
  const agent = createLiteAgent({
    model: scripted([{ toolCalls: [{ name: "write_file", input: { path, content } }] }, { text: `wrote ${path}` }]),
    workdir: tempDir("cli-store-work"),
    checkpointer: fileCheckpointer({ dir: sessions }),
    sessionId: id
  })
  try {
    await agent.send(`write ${path}`)
  } finally {
    await agent.close()
  }
}

/** Every object as if stored two hours ago: past the default grace period. */
const ageObjects = () => {
  const objects = join(sessions, ".objects")
  const then = new Date(Date.now() - 2 * HOUR_MS)
  for (const fanOut of readdirSync(objects).filter((name) => /^[0-9a-f]{2}$/.test(name))) {
    for (const name of readdirSync(join(objects, fanOut))) utimesSync(join(objects, fanOut, name), then, then)
  }
}

beforeAll(async () => {
  sessions = tempDir("cli-store")
  store = ["--checkpointer", `file:${sessions}`]
  await sessionWriting("kept", "hello.txt", "hello from the session that stays\n")
  await sessionWriting("gone", "other.txt", "bytes only the deleted session held\n")
  const checkpointer = fileCheckpointer({ dir: sessions })
  try {
    await checkpointer.delete("gone")
  } finally {
    await checkpointer.close()
  }
  ageObjects()
}, 120_000)

describe("lite-agent store du", () => {
  it("--json: the store's usage as the library gives it; text: the totals, then a row per session", async () => {
    const json = await cli(["store", "du", "--json", ...store])
    expect(json).toMatchObject({ code: 0, stderr: "" })
    const usage = JSON.parse(json.stdout) as StoreUsage
    expect(usage.sessions.map((session) => session.id)).toEqual(["kept"])
    const [kept] = usage.sessions
    expect(kept!.referenced.objects).toBeGreaterThan(0)
    expect(kept!.own).toEqual(kept!.referenced)
    expect(kept!.shared).toEqual({ objects: 0, bytes: 0 })
    // The deleted session's file: stored, and no log references it.
    expect(usage.unreferenced.objects).toBeGreaterThan(0)
    expect(usage.objects.objects).toBe(usage.referenced.objects + usage.unreferenced.objects)

    const text = await cli(["store", "du", ...store])
    expect(text).toMatchObject({ code: 0, stderr: "" })
    const lines = text.stdout.trimEnd().split("\n")
    expect(lines[0]).toMatch(/^objects +\d+(\.\d)? (B|KiB) in \d+ objects?$/)
    expect(lines).toContain(`  unreferenced  ${usage.unreferenced.bytes} B in ${usage.unreferenced.objects} object${usage.unreferenced.objects === 1 ? "" : "s"} (what gc deletes once past the grace period)`)
    expect(lines).toContain("sessions        1")
    expect(lines.at(-2)).toMatch(/^session +referenced +shared +own +log$/)
    expect(lines.at(-1)).toMatch(new RegExp(`^kept +${kept!.referenced.bytes} B +0 B +${kept!.own.bytes} B +\\d+(\\.\\d)? (B|KiB)$`))
  })
})

describe("lite-agent store du --branches", () => {
  it("adds a row per live branch of each session, the current one marked; --json has them as du({ branches: true }) gives them", async () => {
    const json = await cli(["store", "du", "--branches", "--json", ...store])
    expect(json).toMatchObject({ code: 0, stderr: "" })
    const [kept] = (JSON.parse(json.stdout) as StoreUsage).sessions
    expect(kept!.branches).toHaveLength(1)
    const [branch] = kept!.branches!
    expect(branch).toMatchObject({ current: true, referenced: kept!.referenced, own: kept!.own })
    const text = await cli(["store", "du", "--branches", ...store])
    const lines = text.stdout.trimEnd().split("\n")
    expect(lines.at(-2)).toMatch(/^session +branch tip +referenced +own$/)
    expect(lines.at(-1)).toMatch(new RegExp(`^kept +${branch!.tip} \\(current\\) +${branch!.referenced.bytes} B +${branch!.own.bytes} B$`))
    expect((await cli(["store", "du", ...store])).stdout).not.toContain("branch tip")
  })
})

describe("lite-agent store du --max-store-bytes", () => {
  it("says how much of the quota the store holds, and that it is reached once it holds the quota or more", async () => {
    const usage = JSON.parse((await cli(["store", "du", "--json", ...store])).stdout) as StoreUsage
    const holding = usage.objects.bytes + usage.logBytes
    const roomy = await cli(["store", "du", "--max-store-bytes", String(holding * 10), ...store])
    expect(roomy).toMatchObject({ code: 0, stderr: "" })
    expect(roomy.stdout).toMatch(/\nquota +\d+(\.\d)? (B|KiB) of \d+(\.\d)? (B|KiB)\n/)
    expect(roomy.stdout).not.toContain("reached")
    const full = await cli(["store", "du", "--json", "--max-store-bytes", String(holding), ...store])
    expect(JSON.parse(full.stdout)).toMatchObject({ quota: { maxStoreBytes: holding, storeBytes: holding, reached: true } })
    const text = await cli(["store", "du", "--max-store-bytes", "1", ...store])
    expect(text.stdout).toMatch(/\nquota +\d+(\.\d)? (B|KiB) of 1 B reached: captures store no new content/)
    // Without the option, no quota is reported.
    expect(usage).not.toHaveProperty("quota")
  })
})

describe("lite-agent store gc", () => {
  it("keeps what is within --grace-ms; then deletes the unreferenced objects past the grace period and keeps the referenced ones", async () => {
    const before = JSON.parse((await cli(["store", "du", "--json", ...store])).stdout) as StoreUsage
    const withinGrace = await cli(["store", "gc", "--json", "--grace-ms", String(3 * HOUR_MS), ...store])
    expect(withinGrace).toMatchObject({ code: 0, stderr: "" })
    expect(JSON.parse(withinGrace.stdout) as GcReport).toEqual({
      sessions: 1,
      objects: before.objects.objects,
      referenced: before.referenced.objects,
      recent: before.unreferenced.objects,
      deleted: 0,
      freedBytes: 0
    })

    const collected = await cli(["store", "gc", ...store])
    expect(collected).toMatchObject({ code: 0, stderr: "" })
    expect(collected.stdout.split("\n")).toEqual([
      "sessions read   1",
      `objects         ${before.objects.objects}`,
      `  referenced    ${before.referenced.objects} (kept)`,
      "  recent        0 (unreferenced, kept: stored or touched within the grace period, one hour)",
      `  deleted       ${before.unreferenced.objects} (${before.unreferenced.bytes} B freed)`,
      ""
    ])
    const after = JSON.parse((await cli(["store", "du", "--json", ...store])).stdout) as StoreUsage
    expect(after.unreferenced).toEqual({ objects: 0, bytes: 0 })
    expect(after.referenced).toEqual(before.referenced)
    // The session that stays still reads every file it captured.
    const checkpointer = fileCheckpointer({ dir: sessions })
    try {
      const snapshots = await checkpointer.listSnapshots("kept")
      expect(snapshots).toHaveLength(before.referenced.objects)
      for (const { sha256 } of snapshots) await checkpointer.readSnapshot("kept", sha256)
    } finally {
      await checkpointer.close()
    }
  })
})

describe("lite-agent store prune", () => {
  it("prunes a branch a restore left behind: one event, the tree says so, and the next gc frees what only it held", async () => {
    const workdir = tempDir("cli-store-prune")
    const agent = createLiteAgent({
      model: scripted([
        { toolCalls: [{ name: "write_file", input: { path: "plan.md", content: "v1\n" } }] },
        { text: "v1" },
        { toolCalls: [{ name: "write_file", input: { path: "plan.md", content: "a version only the pruned branch holds\n" } }] },
        { text: "v2" }
      ]),
      workdir,
      checkpointer: fileCheckpointer({ dir: sessions }),
      sessionId: "branchy"
    })
    try {
      await agent.send("write v1")
      await agent.send("write v2")
      const [, second] = await agent.listCheckpoints("branchy")
      await agent.restore("branchy", second!.seq)
    } finally {
      await agent.close()
    }
    const text = await cli(["store", "prune", "--older-than-ms", "0", "--session", "branchy", ...store])
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/^branches pruned 1 \(last active before .*\)\n  branchy: pruned \d+\n.*lite-agent store gc\)\n$/)
    const again = JSON.parse((await cli(["store", "prune", "--json", "--older-than-ms", "0", "--session", "branchy", ...store])).stdout) as PruneBranchesReport
    expect(again.sessions.flatMap((session) => session.pruned)).toEqual([])
    const checkpointer = fileCheckpointer({ dir: sessions })
    try {
      const tree = await checkpointer.read("branchy")
      expect(tree.filter((stored) => stored.event._tag === "BranchesPruned")).toHaveLength(1)
    } finally {
      await checkpointer.close()
    }
    ageObjects()
    const collected = JSON.parse((await cli(["store", "gc", "--json", ...store])).stdout) as GcReport
    expect(collected.deleted).toBeGreaterThanOrEqual(1)
  })
})

describe("lite-agent store: command lines that cannot run (exit 2)", () => {
  it.each([
    [["store"], "lite-agent: lite-agent store needs a command: du, gc, prune (lite-agent store --help)\n"],
    [["store", "compact"], 'lite-agent: lite-agent store has no command "compact": du, gc, prune (lite-agent store --help)\n'],
    [["store", "prune"], "lite-agent: lite-agent store prune needs --older-than-ms <ms> (0: every branch left behind)\n"],
    [["store", "du", "--grace-ms", "300000"], "lite-agent: lite-agent store du has no option --grace-ms (lite-agent store du --help lists them)\n"],
    [["store", "gc", "extra"], 'lite-agent: lite-agent store gc takes no argument "extra": options only\n'],
    [["store", "du", "--max-store-bytes", "-1"], "lite-agent: --max-store-bytes must be a number of bytes, 0 or more; got -1\n"],
    [
      ["store", "gc", "--grace-ms", "0"],
      "lite-agent: --grace-ms must be at least 300000 (5 minutes): a writer in another process may be about to reference an object it just stored; got 0\n"
    ]
  ])("%j", async (args, stderr) => {
    expect(await cli(args)).toEqual({ code: 2, stdout: "", stderr })
  })

  it("store --help lists its commands; store gc --help its options", async () => {
    const help = await cli(["store", "--help"])
    expect(help.code).toBe(0)
    expect(help.stdout).toMatch(/^Usage: lite-agent store <command> \[options\]\n\nCommands:\n  du +What the store holds/)
    expect((await cli(["store", "gc", "--help"])).stdout).toContain("--grace-ms <ms>")
  })
})
