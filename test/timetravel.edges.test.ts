/**
 * Time travel at the edges a fault sweep found: a capture that fails part-way, names that are
 * bytes (backslashes, invalid UTF-8, newlines, 255-byte names), a change made through a hard
 * link, a directory the agent replaced by a link. Real agent, real `bash`, real files; each case
 * failed on the code before its fix.
 */
import { spawn } from "node:child_process"
import { existsSync, linkSync, lstatSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import fc from "fast-check"
import { bytesOfPath, createLiteAgent, displayPath, type LiteAgentOptions, pathOfBytes, RestoreRefusedError, WorkspaceCaptured } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { closeAfterEach, promiseCheckpointer, tempDir } from "./support/agent.js"

const track = closeAfterEach()

describe("paths are bytes", () => {
  it("any bytes round-trip through a path, and valid UTF-8 is its own text", () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 40 }), (bytes) => {
      const path = pathOfBytes(bytes)
      expect(Buffer.from(bytesOfPath(path)).equals(Buffer.from(bytes))).toBe(true)
    }), { numRuns: 2_000 })
    fc.assert(fc.property(fc.string({ unit: "binary" }), (text) => {
      expect(pathOfBytes(Buffer.from(text, "utf8"))).toBe(text)
      expect(displayPath(text)).toBe(text)
    }), { numRuns: 1_000 })
    expect(displayPath(pathOfBytes(Buffer.from([0x61, 0xff, 0xc3])))).toBe("a\\xff\\xc3")
  })
})
const shell = (command: string) => ({ name: "shell", input: { command } })

/** `name` as the bytes a POSIX file system keeps (latin1 keeps each byte 0–255 as one char). */
const bytesPath = (dir: string, name: string) => Buffer.concat([Buffer.from(`${dir}/`), Buffer.from(name, "latin1")])

describe.each(["file", "sqlite"] as const)("time travel at the edges on the %s backend", (backend) => {
  const setup = (turns: Parameters<typeof scripted>[0], options: Partial<LiteAgentOptions> = {}) => {
    const workdir = options.workdir ?? tempDir("edges")
    const checkpointer = track(promiseCheckpointer(backend))
    const agent = track(createLiteAgent({ model: scripted(turns), workdir, checkpointer, ...options }))
    return { workdir, agent, checkpointer }
  }

  it("a capture that cannot read a path does not forget what changed: the deletion before it is undone", async () => {
    // A tree deeper than PATH_MAX (its absolute paths cannot be stat'ed by name).
    const deep = "n=$(printf 'x%.0s' $(seq 200)); mkdir deep && cd deep && for i in $(seq 25); do mkdir $n && cd $n; done"
    const { agent, workdir } = setup([
      { toolCalls: [shell("echo v1 > important.txt")] },
      { text: "made" },
      { toolCalls: [shell(`rm important.txt && (${deep})`)] },
      { toolCalls: [shell("rm -rf deep; echo x > other.txt")] },
      { text: "done" }
    ])
    await agent.send("make it")
    const second = await agent.send("break it")
    expect(existsSync(join(workdir, "important.txt"))).toBe(false)
    // What the capture could not read is said, in the turn's result.
    expect(second.captureProblems?.length ?? 0).toBeGreaterThan(0)
    const checkpoints = await agent.listCheckpoints(agent.sessionId)
    const result = await agent.restore(agent.sessionId, checkpoints[1]!.seq)
    expect(result.refusals).toEqual([])
    expect(readFileSync(join(workdir, "important.txt"), "utf8")).toBe("v1\n")
    expect(existsSync(join(workdir, "other.txt"))).toBe(false)
  })

  it("a capture that failed as a whole is in the log: restores refuse (capture_failed) until the next capture has looked", async () => {
    const { agent, checkpointer, workdir } = setup([
      { toolCalls: [shell("echo v1 > a.txt")] },
      { text: "made" },
      { toolCalls: [shell("echo v2 > a.txt")] },
      { text: "changed" },
      { text: "looked" }
    ])
    await agent.send("make")
    await agent.send("change")
    // What a capture that failed leaves (the engine writes it when its walk throws).
    const lastCapture = (await checkpointer.read(agent.sessionId)).map((stored) => stored.event).filter((event) => event instanceof WorkspaceCaptured).at(-1)!
    const coverage = lastCapture.coverage
    await checkpointer.append(agent.sessionId, [new WorkspaceCaptured({ cause: { _tag: "tool", toolUseId: "toolu_x" }, changes: [], coverage, failure: "EIO: i/o error" })])
    const checkpoints = await agent.listCheckpoints(agent.sessionId)
    const refused = await agent.restore(agent.sessionId, checkpoints[1]!.seq).then(() => undefined, (error: unknown) => error)
    expect(refused).toBeInstanceOf(RestoreRefusedError)
    expect((refused as RestoreRefusedError).refusals).toEqual([{ reason: "capture_failed", detail: expect.stringContaining("EIO: i/o error") }])
    expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe("v2\n")
    // The conversation alone can still go back; and the next prompt's capture (a whole walk) closes the gap.
    expect((await agent.restore(agent.sessionId, checkpoints[1]!.seq, { files: false, dryRun: true })).refusals).toEqual([])
    await agent.send("look")
    await agent.restore(agent.sessionId, checkpoints[1]!.seq)
    expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe("v1\n")
  })

  it("a backslash is part of a name: a copy to a\\b.txt is undone without touching a/b.txt", async () => {
    const workdir = tempDir("edges")
    mkdirSync(join(workdir, "a"))
    writeFileSync(join(workdir, "a", "b.txt"), "the user's\n")
    writeFileSync(join(workdir, "a\\gone.txt"), "one name\n")
    const { agent } = setup([
      { toolCalls: [shell("cp a/b.txt 'a\\b.txt' && rm 'a\\gone.txt'")] },
      { text: "copied" }
    ], { workdir })
    await agent.send("copy")
    const [checkpoint] = await agent.listCheckpoints(agent.sessionId)
    expect(checkpoint!.files).toEqual(expect.arrayContaining(["a\\b.txt", "a\\gone.txt"]))
    await agent.restore(agent.sessionId, checkpoint!.seq)
    expect(readFileSync(join(workdir, "a", "b.txt"), "utf8")).toBe("the user's\n")
    expect(existsSync(join(workdir, "a\\b.txt"))).toBe(false)
    expect(readFileSync(join(workdir, "a\\gone.txt"), "utf8")).toBe("one name\n")
    expect(existsSync(join(workdir, "a", "gone.txt"))).toBe(false)
  })

  it("names are bytes: invalid UTF-8, a newline and a 255-byte name round-trip through a restore", async () => {
    const workdir = tempDir("edges")
    const names = ["bad\xff.txt", "line\nbreak.txt", "y".repeat(255), "dir\xfe/in\xc3.txt"]
    mkdirSync(bytesPath(workdir, "dir\xfe"))
    for (const name of names) writeFileSync(bytesPath(workdir, name), `was ${name.length}\n`)
    const { agent } = setup([
      { toolCalls: [shell(`for f in * dir*/*; do [ -f "$f" ] && echo changed > "$f"; done; rm -f bad*`)] },
      { text: "changed" }
    ], { workdir })
    await agent.send("change them")
    expect(existsSync(bytesPath(workdir, "bad\xff.txt"))).toBe(false)
    const [checkpoint] = await agent.listCheckpoints(agent.sessionId)
    expect(checkpoint!.files).toHaveLength(names.length)
    const result = await agent.restore(agent.sessionId, checkpoint!.seq)
    expect(result.refusals).toEqual([])
    for (const name of names) expect(readFileSync(bytesPath(workdir, name), "utf8")).toBe(`was ${name.length}\n`)
    // Kept as their bytes (a lone surrogate per byte that is not UTF-8), shown with the bytes escaped.
    expect(result.restoredFiles.map((path) => Buffer.from(bytesOfPath(path)).toString("latin1")).sort()).toEqual([...names].sort())
    expect(result.restoredFiles.map(displayPath)).toEqual(expect.arrayContaining(["bad\\xff.txt", "dir\\xfe/in\\xc3.txt", "line\nbreak.txt"]))
  })

  it("a change through a hard link from outside the workdir is seen and undone", async () => {
    const workdir = tempDir("edges")
    const outside = tempDir("edges-outside")
    writeFileSync(join(workdir, "h.txt"), "original\n")
    linkSync(join(workdir, "h.txt"), join(outside, "h.txt"))
    const { agent } = setup([
      { text: "looked" },
      { toolCalls: [shell(`echo through the link > ${outside}/h.txt`)] },
      { text: "written" }
    ], { workdir })
    await agent.send("look")
    await agent.send("write")
    expect(readFileSync(join(workdir, "h.txt"), "utf8")).toBe("through the link\n")
    const checkpoints = await agent.listCheckpoints(agent.sessionId)
    expect(checkpoints[1]!.files).toEqual(["h.txt"])
    const result = await agent.restore(agent.sessionId, checkpoints[1]!.seq)
    expect(result.restoredFiles).toEqual(["h.txt"])
    expect(readFileSync(join(workdir, "h.txt"), "utf8")).toBe("original\n")
  })

  it("a directory the agent replaced by a link does not block a move across it: the link goes, the directory comes back", async () => {
    const workdir = tempDir("edges")
    const elsewhere = tempDir("edges-elsewhere")
    writeFileSync(join(elsewhere, "theirs.o"), "not ours\n")
    mkdirSync(join(workdir, "build"))
    writeFileSync(join(workdir, "build", "a.o"), "object\n")
    const { agent } = setup([
      { toolCalls: [shell(`rm -rf build && ln -s ${elsewhere} build`)] },
      { text: "linked" }
    ], { workdir })
    await agent.send("link it")
    const [checkpoint] = await agent.listCheckpoints(agent.sessionId)
    const result = await agent.restore(agent.sessionId, checkpoint!.seq)
    expect(result.refusals).toEqual([])
    expect(lstatSync(join(workdir, "build")).isDirectory()).toBe(true)
    expect(readFileSync(join(workdir, "build", "a.o"), "utf8")).toBe("object\n")
    expect(readFileSync(join(elsewhere, "theirs.o"), "utf8")).toBe("not ours\n")
    // And back again: the undo takes the directory away and puts the link back.
    await agent.undo(agent.sessionId)
    expect(lstatSync(join(workdir, "build")).isSymbolicLink()).toBe(true)
    expect(readFileSync(join(elsewhere, "theirs.o"), "utf8")).toBe("not ours\n")
  })

  it("a restore says it put back only what is there when it commits: a path another process writes meanwhile is reported, left as written", async () => {
    const files = ["f0.txt", "f1.txt", "f2.txt", "f3.txt", "f4.txt"]
    const writes = (version: string) => files.map((path) => ({ name: "write_file", input: { path, content: `${version}\n` } }))
    const { agent, workdir } = setup([{ toolCalls: writes("one") }, { text: "one" }, { toolCalls: writes("two") }, { text: "two" }])
    await agent.send("one")
    await agent.send("two")
    const [, second] = await agent.listCheckpoints(agent.sessionId)
    // Another writer, as the restore goes: right after the restore wrote its first file, that file is written again.
    let victim: string | undefined
    agent.subscribe((event) => {
      if (event.type === "checkpoint_restore" && event.phase === "progress" && victim === undefined) {
        victim = event.path
        writeFileSync(join(workdir, victim), "theirs\n")
      }
    })
    const result = await agent.restore(agent.sessionId, second!.seq)
    expect(victim).toBeDefined()
    expect(readFileSync(join(workdir, victim!), "utf8")).toBe("theirs\n")
    expect(result.restoredFiles).toEqual(files.filter((path) => path !== victim))
    expect(result.notCovered).toEqual([
      { path: victim, reason: "another process changed it while the restore ran (it now holds a file of 7 bytes, mode 644): left as it is" }
    ])
    for (const path of files.filter((path) => path !== victim)) expect(readFileSync(join(workdir, path), "utf8")).toBe("one\n")
  })
})

/**
 * A process that, once `trigger` exists, swaps two names of a directory back and forth
 * (`renameat2(RENAME_EXCHANGE)`) until it is killed.
 */
const startSwapper = async (dir: string, a: string, b: string, trigger: string) => {
  const script = [
    "import ctypes, os, sys",
    "libc = ctypes.CDLL(None, use_errno=True)",
    "AT_FDCWD, RENAME_EXCHANGE = -100, 2",
    `os.chdir(${JSON.stringify(dir)})`,
    "print('ready', flush=True)",
    `while not os.path.exists(${JSON.stringify(trigger)}): pass`,
    "while True:",
    `    libc.renameat2(AT_FDCWD, b${JSON.stringify(a)}, AT_FDCWD, b${JSON.stringify(b)}, RENAME_EXCHANGE)`
  ].join("\n")
  const child = spawn("python3", ["-c", script], { stdio: ["ignore", "pipe", "inherit"] })
  await new Promise<void>((resolve, reject) => {
    child.once("error", reject)
    child.once("exit", (code) => reject(new Error(`the swapper exited with ${code}`)))
    child.stdout.once("data", () => resolve())
  })
  return {
    stop: async () => {
      child.removeAllListeners("exit")
      const exited = new Promise((resolve) => child.once("exit", resolve))
      child.kill("SIGKILL")
      await exited
    }
  }
}

/** Every name under `dir` with its content. */
const contentsOf = (dir: string) => Object.fromEntries(readdirSync(dir).sort().map((name) => [name, readFileSync(join(dir, name), "utf8")]))

describe("a restore while another process swaps a directory for a link to outside the workdir", () => {
  it("never deletes, writes or leaves a temporary file outside the workdir", async () => {
    const files = 800
    let trials = 0
    const until = Date.now() + 20_000
    while (trials < 4 || Date.now() < until) {
      trials++
      const workdir = tempDir("swap")
      const outside = tempDir("swap-outside")
      mkdirSync(join(workdir, "d"))
      for (let index = 0; index < files; index++) {
        writeFileSync(join(workdir, "d", `f${index}`), "ours\n")
        writeFileSync(join(outside, `f${index}`), "outside\n")
      }
      symlinkSync(outside, join(workdir, "dl"))
      const before = contentsOf(outside)
      const trigger = join(tempDir("swap-trigger"), "go")
      const checkpointer = promiseCheckpointer("file")
      const agent = createLiteAgent({
        model: scripted([
          { text: "looked" },
          { toolCalls: [shell(`cd d && rm f{0..${files / 2 - 1}} && for f in f{${files / 2}..${files - 1}}; do echo changed > $f; done`)] },
          { text: "changed" }
        ]),
        workdir,
        checkpointer
      })
      try {
        await agent.send("look")
        await agent.send("change")
        const checkpoints = await agent.listCheckpoints(agent.sessionId)
        const swapper = await startSwapper(workdir, "d", "dl", trigger)
        // The swapping starts once the restore has checked every file and begins to change them.
        const unsubscribe = agent.subscribe((event) => {
          if (event.type === "checkpoint_restore" && event.phase === "start") writeFileSync(trigger, "")
        })
        try {
          // It may succeed or fail part-way (put back): whichever, nothing outside is touched.
          const outcome = await agent.restore(agent.sessionId, checkpoints[1]!.seq).then(() => "restored", (error: Error) => error.name)
          expect(["restored", "RestoreFailedError"]).toContain(outcome)
          expect(existsSync(trigger)).toBe(true)
        } finally {
          unsubscribe()
          await swapper.stop()
        }
        expect(contentsOf(outside)).toEqual(before)
      } finally {
        await agent.close()
        await checkpointer.close()
      }
    }
    expect(trials).toBeGreaterThanOrEqual(4)
  })
})
