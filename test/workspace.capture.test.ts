/**
 * Checkpoints over the whole workspace: what shell commands did is captured and undone by a
 * restore — with the real agent, the scripted model, real `bash` commands and a real workdir.
 */
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { execFileSync, spawn } from "node:child_process"
import { createHash } from "node:crypto"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { postgresCheckpointer } from "../src/checkpoint-postgres.js"
import { createLiteAgent, type LiteAgentOptions, type PromiseCheckpointer, RestoreRefusedError } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { BACKENDS } from "./support/agentSim.js"
import { closeAfterEach, eventually, promiseCheckpointer, tempDir } from "./support/agent.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"
import { makeScanner } from "../src/tools/workspaceScan.js"

// One PostgreSQL server for the file; each test's sessions have ids of their own.
let postgres: PostgresServer
beforeAll(async () => {
  postgres = await startPostgres()
})
afterAll(() => postgres?.destroy())

const checkpointerFor = (backend: (typeof BACKENDS)[number] | "postgres"): PromiseCheckpointer =>
  backend === "postgres" ? postgresCheckpointer({ url: postgres.url }) : promiseCheckpointer(backend)

const track = closeAfterEach()

const shell = (command: string) => ({ name: "shell", input: { command } })
const write = (path: string, content: string) => ({ name: "write_file", input: { path, content } })

/** Every path under `dir` (`.git` left out) with what it holds: a file's text and mode, a link's target, a directory's mode. */
const tree = (dir: string, base = ""): Record<string, string> => {
  const result: Record<string, string> = {}
  for (const name of readdirSync(join(dir, base)).sort()) {
    if (name === ".git") continue
    const relative = base === "" ? name : `${base}/${name}`
    const absolute = join(dir, relative)
    const stat = lstatSync(absolute)
    if (stat.isSymbolicLink()) result[relative] = `link -> ${readlinkSync(absolute)}`
    else if (stat.isDirectory()) {
      result[relative] = `dir ${(stat.mode & 0o777).toString(8)}`
      Object.assign(result, tree(dir, relative))
    } else result[relative] = `${(stat.mode & 0o777).toString(8)} ${readFileSync(absolute, "utf8")}`
  }
  return result
}

/** A small project: sources, a build directory, a file to move and a script to chmod. */
const project = () => {
  const workdir = tempDir("capture")
  mkdirSync(join(workdir, "src"))
  writeFileSync(join(workdir, "src", "a.ts"), "export const greet = () => 'hi'\n")
  writeFileSync(join(workdir, "src", "b.ts"), "import { greet } from './a'\ngreet()\n")
  mkdirSync(join(workdir, "build", "js"), { recursive: true })
  writeFileSync(join(workdir, "build", "js", "out.js"), "compiled\n")
  writeFileSync(join(workdir, "old.ts"), "old\n")
  writeFileSync(join(workdir, "run.sh"), "echo run\n")
  chmodSync(join(workdir, "run.sh"), 0o644)
  symlinkSync("src/a.ts", join(workdir, "current"))
  return workdir
}

describe.each([...BACKENDS, "postgres" as const])("whole-workspace checkpoints on the %s backend", (backend) => {
  const setup = (turns: Parameters<typeof scripted>[0], options: Partial<LiteAgentOptions> = {}) => {
    const workdir = options.workdir ?? project()
    const checkpointer = track(checkpointerFor(backend))
    const agent = track(createLiteAgent({ model: scripted(turns), workdir, checkpointer, ...options }))
    return { workdir, agent, checkpointer }
  }

  it("a restore undoes what shell commands did: sed -i, rm -rf, mkdir, mv, chmod, ln -sf; an undo brings it all back, a redo undoes it again", async () => {
    const { agent, workdir } = setup([
      { text: "ok" },
      {
        toolCalls: [
          shell("sed -i 's/greet/hello/' src/*.ts"),
          shell("rm -rf build"),
          shell("mkdir -p gen/deep && echo x > gen/deep/a.ts"),
          shell("mv old.ts new.ts && chmod +x run.sh && ln -sfn src/b.ts current")
        ]
      },
      { text: "done" }
    ])
    await agent.send("look around")
    const before = tree(workdir)
    await agent.send("rename greet and clean up")
    expect(readFileSync(join(workdir, "src", "a.ts"), "utf8")).toContain("hello")
    expect(existsSync(join(workdir, "build"))).toBe(false)

    const checkpoints = await agent.listCheckpoints(agent.sessionId)
    expect(checkpoints).toHaveLength(2)
    expect(checkpoints[1]!.files).toEqual(expect.arrayContaining(["src/a.ts", "src/b.ts", "build/js/out.js", "gen/deep/a.ts", "old.ts", "new.ts", "run.sh", "current"]))
    expect(checkpoints[1]!.notCovered).toEqual([])

    const plan = await agent.restore(agent.sessionId, checkpoints[1]!.seq, { dryRun: true })
    expect(plan.refusals).toEqual([])
    expect(plan.commandsNotUndone).toEqual([])
    expect(plan.plan.find((file) => file.path === "gen/deep/a.ts")?.action).toBe("delete")
    expect(plan.plan.find((file) => file.path === "build/js")?.action).toBe("directory")
    expect(plan.plan.find((file) => file.path === "current")?.action).toBe("link")

    const after = tree(workdir)
    const result = await agent.restore(agent.sessionId, checkpoints[1]!.seq)
    expect(result.notCovered).toEqual([])
    expect(tree(workdir)).toEqual(before)

    // The restore undone: the commands' effects are back, links, modes and directories included.
    const undone = await agent.undo(agent.sessionId)
    expect(undone.refusals).toEqual([])
    expect(tree(workdir)).toEqual(after)
    expect((await agent.listCheckpoints(agent.sessionId)).map((checkpoint) => checkpoint.prompt)).toEqual(["look around", "rename greet and clean up"])
    await agent.redo(agent.sessionId)
    expect(tree(workdir)).toEqual(before)
    expect(await agent.listCheckpoints(agent.sessionId)).toHaveLength(1)
  })

  it("a git checkout of another branch and a command's many new files are undone exactly (.git aside)", async () => {
    const workdir = project()
    const git = (...args: Array<string>) =>
      execFileSync("git", args, {
        cwd: workdir,
        env: { ...process.env, GIT_AUTHOR_NAME: "t", GIT_AUTHOR_EMAIL: "t@t", GIT_COMMITTER_NAME: "t", GIT_COMMITTER_EMAIL: "t@t" }
      })
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "main")
    git("checkout", "-q", "-b", "feature")
    writeFileSync(join(workdir, "src", "a.ts"), "export const greet = () => 'feature'\n")
    writeFileSync(join(workdir, "feature.ts"), "new on the branch\n")
    git("rm", "-q", "old.ts")
    git("commit", "-q", "-am", "feature")
    git("add", "feature.ts")
    git("commit", "-q", "-m", "feature file")
    git("checkout", "-q", "main")
    const { agent } = setup([
      { toolCalls: [shell("git checkout -q feature && mkdir -p dist && for i in $(seq 1 300); do echo \"module $i\" > dist/m$i.js; done")] },
      { text: "done" }
    ], { workdir })
    const before = tree(workdir)
    await agent.send("switch and build")
    expect(readFileSync(join(workdir, "feature.ts"), "utf8")).toBe("new on the branch\n")
    expect(existsSync(join(workdir, "old.ts"))).toBe(false)
    const [checkpoint] = await agent.listCheckpoints(agent.sessionId)
    expect(checkpoint!.files).toHaveLength(304) // src/a.ts, feature.ts, old.ts, dist and its 300 files
    await agent.restore(agent.sessionId, checkpoint!.seq)
    expect(tree(workdir)).toEqual(before)
  })

  it("what a background task changed is its own: captured when it is logged, undone by a restore", async () => {
    const { agent, checkpointer, workdir } = setup([
      { toolCalls: [{ name: "shell", input: { command: "sleep 0.3; echo built > bg.txt; rm -rf build", background: true } }] },
      { text: "started" }
    ])
    const before = tree(workdir)
    await agent.send("build in the background")
    // The turn ended first; the task logs its completion (after a capture of its changes) once it is done.
    await eventually(async () => (await checkpointer.read(agent.sessionId)).at(-1)?.event._tag === "BackgroundCompleted")
    const log = await checkpointer.read(agent.sessionId)
    const captured = log.at(-2)!.event
    expect(captured).toMatchObject({ _tag: "WorkspaceCaptured", cause: { _tag: "task" } })
    const [checkpoint] = await agent.listCheckpoints(agent.sessionId)
    expect(checkpoint!.files).toEqual(expect.arrayContaining(["bg.txt", "build", "build/js", "build/js/out.js"]))
    const result = await agent.restore(agent.sessionId, checkpoint!.seq)
    expect(result.refusals).toEqual([])
    expect(tree(workdir)).toEqual(before)
  })

  it("refuses an outside edit made after the last capture, changing nothing", async () => {
    const { agent, workdir } = setup([{ toolCalls: [shell("echo changed > src/a.ts")] }, { text: "done" }])
    await agent.send("change a")
    writeFileSync(join(workdir, "src", "a.ts"), "edited by hand after the turn\n")
    const [checkpoint] = await agent.listCheckpoints(agent.sessionId)
    const error = await agent.restore(agent.sessionId, checkpoint!.seq).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RestoreRefusedError)
    expect((error as RestoreRefusedError).refusals).toEqual([expect.objectContaining({ path: "src/a.ts", reason: "modified_externally" })])
    expect(readFileSync(join(workdir, "src", "a.ts"), "utf8")).toBe("edited by hand after the turn\n")
  })

  it("keeps the user's edit between two turns unless the caller includes it", async () => {
    const { agent, workdir } = setup([
      { toolCalls: [shell("echo one > notes.txt")] },
      { text: "first" },
      { toolCalls: [shell("echo two >> notes.txt")] },
      { text: "second" }
    ])
    await agent.send("first")
    writeFileSync(join(workdir, "src", "b.ts"), "the user's own edit\n")
    await agent.send("second")
    const [first, second] = await agent.listCheckpoints(agent.sessionId)

    // Back to the second prompt: the user's edit came before it, so it stays.
    const toSecond = await agent.restore(agent.sessionId, second!.seq, { dryRun: true })
    expect(toSecond.refusals).toEqual([])
    expect(toSecond.plan.map((file) => file.path)).toEqual(["notes.txt"])

    // Back to the first: undoing the user's edit is refused unless asked for.
    const error = await agent.restore(agent.sessionId, first!.seq).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RestoreRefusedError)
    expect((error as RestoreRefusedError).refusals).toEqual([expect.objectContaining({ path: "src/b.ts", reason: "modified_externally" })])
    expect(readFileSync(join(workdir, "src", "b.ts"), "utf8")).toBe("the user's own edit\n")
    expect(readFileSync(join(workdir, "notes.txt"), "utf8")).toBe("one\ntwo\n")

    await agent.restore(agent.sessionId, first!.seq, { includeUserEdits: true })
    expect(readFileSync(join(workdir, "src", "b.ts"), "utf8")).toBe("import { greet } from './a'\ngreet()\n")
    expect(existsSync(join(workdir, "notes.txt"))).toBe(false)
  })

  it("leaves ignored and over-cap paths alone and says so; never follows a link out of the workdir", async () => {
    const outside = tempDir("outside")
    writeFileSync(join(outside, "secret.txt"), "secret\n")
    const workdir = project()
    writeFileSync(join(workdir, ".gitignore"), "node_modules/\n*.log\n")
    symlinkSync(join(outside, "secret.txt"), join(workdir, "escape"))
    const { agent } = setup([
      {
        toolCalls: [
          shell("mkdir -p node_modules/pkg && echo dep > node_modules/pkg/index.js && echo log > app.log"),
          shell("head -c 5000 /dev/zero > big.bin && echo through > escape")
        ]
      },
      { text: "done" }
    ], { workdir, workspace: { maxFileBytes: 4096 } })
    await agent.send("install and log")
    // `echo > escape` wrote through the link to the outside file: not the workdir's, not captured.
    expect(readFileSync(join(outside, "secret.txt"), "utf8")).toBe("through\n")
    const [checkpoint] = await agent.listCheckpoints(agent.sessionId)
    expect(checkpoint!.notCovered).toEqual([{ path: "big.bin", reason: expect.stringContaining("larger than the capture's cap of 4096 bytes") }])
    expect(checkpoint!.files).not.toContain("escape")

    const result = await agent.restore(agent.sessionId, checkpoint!.seq)
    expect(result.notCovered).toEqual([{ path: "big.bin", reason: expect.stringContaining("4096") }])
    expect(readFileSync(join(workdir, "node_modules", "pkg", "index.js"), "utf8")).toBe("dep\n")
    expect(readFileSync(join(workdir, "app.log"), "utf8")).toBe("log\n")
    expect(lstatSync(join(workdir, "big.bin")).size).toBe(5000)
    expect(readlinkSync(join(workdir, "escape"))).toBe(join(outside, "secret.txt"))
    expect(readFileSync(join(outside, "secret.txt"), "utf8")).toBe("through\n")
  })

  it("with capture: \"tools\" only the file tools' changes are undone, as the spec says", async () => {
    const { agent, workdir } = setup([
      { toolCalls: [shell("echo shell > s.txt"), write("w.txt", "tool")] },
      { text: "done" }
    ], { workspace: { capture: "tools" } })
    await agent.send("both")
    const [checkpoint] = await agent.listCheckpoints(agent.sessionId)
    const result = await agent.restore(agent.sessionId, checkpoint!.seq)
    expect(result.restoredFiles).toEqual(["w.txt"])
    expect(result.commandsNotUndone).toEqual([expect.objectContaining({ tool: "shell", input: { command: "echo shell > s.txt" } })])
    expect(existsSync(join(workdir, "w.txt"))).toBe(false)
    expect(readFileSync(join(workdir, "s.txt"), "utf8")).toBe("shell\n")
  })
})

describe("the workspace walk", () => {
  it("never records a file torn while another process rewrites it in place", async () => {
    const workdir = tempDir("torn")
    const versions = ["a".repeat(256 * 1024), "b".repeat(256 * 1024)]
    // The states the file really goes through: each version, and empty (truncated, before its bytes are written).
    const hashes = [...versions, ""].map((version) => createHash("sha256").update(version).digest("hex"))
    writeFileSync(join(workdir, "hot.txt"), versions[0]!)
    // Rewrites the file in place (truncate, then write) as fast as it can until killed.
    const writer = spawn(process.execPath, [
      "-e",
      `const fs = require("fs"); const v = ["a".repeat(${256 * 1024}), "b".repeat(${256 * 1024})]; let i = 0; process.stdout.write("go\\n"); for (;;) fs.writeFileSync(${JSON.stringify(join(workdir, "hot.txt"))}, v[i++ % 2])`
    ], { stdio: ["ignore", "pipe", "inherit"] })
    try {
      await new Promise((resolve) => writer.stdout!.once("data", resolve))
      const scanner = makeScanner(workdir)
      const outcomes = new Set<string>()
      for (let round = 0; round < 300; round++) {
        const entry = scanner.scan({ ignore: [], maxFileBytes: 1 << 20, keepBytes: () => true }).entries.get("hot.txt")
        if (entry?.kind === "file") {
          // Whatever it recorded is a state the file was in, never a mix (by its hash, and its bytes when kept).
          expect(hashes.includes(entry.sha256)).toBe(true)
          if (entry.data !== undefined) expect(createHash("sha256").update(entry.data).digest("hex")).toBe(entry.sha256)
          outcomes.add("whole")
        } else {
          expect(entry).toMatchObject({ kind: "unavailable", reason: expect.stringMatching(/kept changing|removed|replaced/) })
          outcomes.add("unavailable")
        }
      }
      expect(outcomes.size).toBeGreaterThan(0)
    } finally {
      writer.kill("SIGKILL")
    }
  })
})
