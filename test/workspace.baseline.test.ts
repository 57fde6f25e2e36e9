/**
 * A new session's first capture of a tree the store has captured before, each in a process of its
 * own over one file store: a stat walk that reads only the files whose stat data differ, a log
 * that keeps a manifest's chunk hashes instead of every path, and restores that work from it.
 */
import { execFile } from "node:child_process"
import { mkdirSync, readFileSync, utimesSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { promisify } from "node:util"
import { describe, expect, it } from "vitest"
import { createLiteAgent, fileCheckpointer } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { closeAfterEach, tempDir } from "./support/agent.js"
import { nodeArgs } from "./support/processes.js"

const worker = new URL("./workers/first-capture.ts", import.meta.url).pathname

interface FirstCapture {
  readonly hashedFiles: number
  readonly events: number
  readonly changes: number
  readonly contentFiles: number
  readonly chunks: number
  readonly storedChunks: number
  readonly logBytes: number
}

const captureInProcess = async (dir: string, workdir: string, sessionId: string): Promise<FirstCapture> => {
  const { stdout } = await promisify(execFile)(process.execPath, [...nodeArgs(worker), dir, workdir, sessionId], { timeout: 120_000 })
  return JSON.parse(stdout) as FirstCapture
}

const FILES = 1_200
/** A tree of `FILES` files whose mtimes are well in the past (so none is racily clean). */
const project = () => {
  const workdir = tempDir("baseline")
  const past = new Date(Date.now() - 60_000)
  for (let i = 0; i < FILES; i++) {
    const dir = join(workdir, `pkg${i % 12}`, `mod${i % 5}`)
    mkdirSync(dir, { recursive: true })
    const file = join(dir, `file${i}.ts`)
    writeFileSync(file, `export const value${i} = ${i}\n`.repeat(1 + (i % 9)))
    utimesSync(file, past, past)
  }
  return workdir
}

const track = closeAfterEach()

describe("a new session's first capture of a known tree", () => {
  it("in a new process reads and stores only what changed, and logs chunk hashes, not paths", async () => {
    const workdir = project()
    const dir = tempDir("baseline-store")
    const first = await captureInProcess(dir, workdir, "first")
    expect(first.hashedFiles).toBe(FILES)
    expect(first.events).toBe(1)
    expect(first.contentFiles).toBe(FILES)
    expect(first.storedChunks).toBe(0)
    // One file edited and one added, by someone else, before the next session starts.
    const past = new Date(Date.now() - 30_000)
    writeFileSync(join(workdir, "pkg3", "mod3", "file3.ts"), "export const edited = true\n")
    utimesSync(join(workdir, "pkg3", "mod3", "file3.ts"), past, past)
    writeFileSync(join(workdir, "pkg0", "added.ts"), "export const added = 1\n")
    utimesSync(join(workdir, "pkg0", "added.ts"), past, past)
    const second = await captureInProcess(dir, workdir, "second")
    expect(second.hashedFiles).toBe(2)
    expect(second.contentFiles).toBe(2)
    expect(second.changes).toBe(first.changes + 1)
    // The chunks that hold neither path are the first session's.
    expect(second.storedChunks).toBeGreaterThanOrEqual(second.chunks - 3)
    expect(second.logBytes).toBeLessThan(first.logBytes + 1_000)
    // Per path, the log kept nothing: a few hundred bytes per chunk at most.
    expect(second.logBytes).toBeLessThan(600 + second.chunks * 200)
  })

  it("restores and lists checkpoints of a session that started from another's manifest", async () => {
    const workdir = project()
    const dir = tempDir("baseline-agent")
    const firstAgent = track(createLiteAgent({
      model: scripted([{ toolCalls: [{ name: "write_file", input: { path: "pkg1/mod1/file1.ts", content: "first session\n" } }] }, { text: "done" }]),
      workdir,
      checkpointer: fileCheckpointer({ dir })
    }))
    await firstAgent.send("first")
    const secondAgent = track(createLiteAgent({
      model: scripted([{ toolCalls: [{ name: "shell", input: { command: "rm pkg2/mod2/file2.ts && echo changed > pkg4/mod4/file4.ts" } }] }, { text: "done" }]),
      workdir,
      checkpointer: fileCheckpointer({ dir })
    }))
    const before = readFileSync(join(workdir, "pkg4", "mod4", "file4.ts"), "utf8")
    await secondAgent.send("second")
    const second = secondAgent.sessionId
    const checkpoints = await secondAgent.listCheckpoints(second)
    expect(checkpoints).toHaveLength(1)
    const restored = await secondAgent.restore(second, checkpoints[0]!.seq)
    expect([...restored.restoredFiles].sort()).toEqual(["pkg2/mod2/file2.ts", "pkg4/mod4/file4.ts"])
    expect(readFileSync(join(workdir, "pkg4", "mod4", "file4.ts"), "utf8")).toBe(before)
    expect(readFileSync(join(workdir, "pkg2", "mod2", "file2.ts"), "utf8")).toBe("export const value2 = 2\n".repeat(3))
    // The first session's edit is the tree the second started from: left as it is.
    expect(readFileSync(join(workdir, "pkg1", "mod1", "file1.ts"), "utf8")).toBe("first session\n")
  })
})
