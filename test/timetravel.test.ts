/**
 * Time travel that refuses to do harm: outside edits, unsafe paths, interrupted tools,
 * missing snapshots, failures and aborts part-way — on real directories.
 */
import { createHash } from "node:crypto"
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Chunk, Effect, Fiber, Layer, Stream } from "effect"
import { describe, expect, it } from "vitest"
import {
  AssistantMessage,
  Checkpointer,
  FileChange,
  FileSnapshot,
  FileTools,
  RestoreFailedError,
  RestoreRefusedError,
  type RestoreProgress,
  RestoreStarted,
  Session,
  type StoredEvent,
  TimeTravel,
  ToolInputError,
  ToolResult,
  UnsafePathError,
  UserMessage,
  Workspace,
  WorkspaceIOError
} from "../src/core.js"
import { type Backend, BACKENDS, diskState, freshWorkdir, timeTravelLayer, turn, twoPrompts } from "./support/agentSim.js"
import { expectMovedBack as movedBack, expectUndoneIntent as undoneIntent } from "./support/restoredLog.js"

const run = <A, E>(
  backend: Backend,
  workdir: string,
  program: Effect.Effect<A, E, Checkpointer | TimeTravel.TimeTravel | FileTools.FileTools | Workspace.Workspace>,
  options: Parameters<typeof timeTravelLayer>[2] = {}
) => Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(timeTravelLayer(backend, workdir, options))))

const failureOf = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.either(effect), (either) =>
    either._tag === "Left" ? Effect.succeed(either.left) : Effect.dieMessage("expected a failure"))

const logOf = (sessionId: string) =>
  Effect.flatMap(Checkpointer, (c) => Effect.map(Stream.runCollect(c.read(sessionId)), Chunk.toReadonlyArray))

const expectMovedBack = (sessionId: string, before: ReadonlyArray<StoredEvent>, leaf: number) =>
  Effect.map(logOf(sessionId), (after) => movedBack(before, after, leaf))

const expectUndoneIntent = (sessionId: string, before: ReadonlyArray<StoredEvent>) =>
  Effect.map(logOf(sessionId), (after) => undoneIntent(before, after))

describe("file tools", () => {
  it("refuse absolute paths, .. escapes and symlinks, touching nothing", async () => {
    const workdir = freshWorkdir()
    const outside = mkdtempSync(join(tmpdir(), "lite-agent-outside-"))
    writeFileSync(join(outside, "secret.txt"), "secret")
    symlinkSync(join(outside, "secret.txt"), join(workdir, "link.txt"))
    symlinkSync(outside, join(workdir, "linkdir"))
    await run("memory", workdir, Effect.gen(function*() {
      const tools = yield* FileTools.FileTools
      const context = { sessionId: "s", toolUseId: "t1" }
      for (const path of [join(outside, "secret.txt"), "../outside.txt", "a/../../x", "link.txt", "linkdir/secret.txt", "linkdir/new.txt", ""]) {
        const error = yield* failureOf(tools.writeFile(context, { path, content: "pwned" }))
        expect(error, path).toBeInstanceOf(UnsafePathError)
        expect(yield* failureOf(tools.deleteFile(context, { path })), path).toBeInstanceOf(UnsafePathError)
        expect(yield* failureOf(tools.readFile({ path })), path).toBeInstanceOf(UnsafePathError)
      }
      expect((yield* logOf("s")).length).toBe(0)
    }))
    expect(readFileSync(join(outside, "secret.txt"), "utf8")).toBe("secret")
    expect(diskState(outside)).toEqual({ "secret.txt": { data: Buffer.from("secret").toString("base64"), mode: expect.any(Number) } })
  })

  it("edit needs an exact, unique match; a failed edit records nothing", async () => {
    const workdir = freshWorkdir()
    await run("memory", workdir, Effect.gen(function*() {
      const tools = yield* FileTools.FileTools
      const context = { sessionId: "s", toolUseId: "t1" }
      yield* tools.writeFile(context, { path: "f.txt", content: "one two two" })
      const headBefore = (yield* logOf("s")).length
      const missing = yield* failureOf(tools.editFile(context, { path: "f.txt", old_string: "three", new_string: "x" }))
      expect(missing).toBeInstanceOf(ToolInputError)
      expect(String((missing as Error).message)).toContain("not found")
      const ambiguous = yield* failureOf(tools.editFile(context, { path: "f.txt", old_string: "two", new_string: "x" }))
      expect(String((ambiguous as Error).message)).toContain("more than once")
      expect(yield* failureOf(tools.editFile(context, { path: "nope.txt", old_string: "a", new_string: "b" }))).toBeInstanceOf(ToolInputError)
      expect((yield* logOf("s")).length).toBe(headBefore)
      yield* tools.editFile(context, { path: "f.txt", old_string: "one", new_string: "1" })
      expect(yield* tools.readFile({ path: "f.txt" })).toBe("1 two two")
      expect(yield* tools.listFiles({})).toEqual(["f.txt"])
    }))
  })

  it("snapshot once per path per checkpoint, record a hash after every change, and mark oversized files unavailable", async () => {
    const workdir = freshWorkdir()
    writeFileSync(join(workdir, "big.bin"), Buffer.alloc(2048, 7))
    await run("file", workdir, Effect.gen(function*() {
      yield* turn("s", "p1", [
        { name: "write_file", input: { path: "a.txt", content: "1" } },
        { name: "write_file", input: { path: "a.txt", content: "2" } },
        { name: "write_file", input: { path: "big.bin", content: "small now" } }
      ])
      yield* turn("s", "p2", [{ name: "write_file", input: { path: "a.txt", content: "3" } }])
      const events = (yield* logOf("s")).map((s) => s.event)
      const snapshots = events.filter((e): e is FileSnapshot => e._tag === "FileSnapshot")
      expect(snapshots.map((s) => [s.path, s.state._tag])).toEqual([["a.txt", "missing"], ["big.bin", "unavailable"], ["a.txt", "stored"]])
      const changes = events.filter((e): e is FileChange => e._tag === "FileChange")
      expect(changes).toHaveLength(4)
      expect(changes.every((c) => c.after?._tag === "file" && /^[0-9a-f]{64}$/.test(c.after.sha256))).toBe(true)
      const big = snapshots[1]!
      expect(big.state._tag === "unavailable" && big.state.reason).toContain("snapshot cap of 1024 bytes")
      const checkpoints = yield* (yield* TimeTravel.TimeTravel).listCheckpoints("s")
      expect(checkpoints.map((c) => [c.prompt, c.files, c.unavailableFiles])).toEqual([
        ["p1", ["a.txt"], ["big.bin"]],
        ["p2", ["a.txt"], []]
      ])
    }), { snapshotMaxBytes: 1024 })
  })
})

describe("file tools keep restore possible and files intact", () => {
  it("a change that fails on disk is recorded as what is really there, and restore still works", async () => {
    const workdir = freshWorkdir()
    const control = { failNext: false }
    const flaky = Layer.sync(Workspace.Workspace, () => {
      const real = Workspace.make(workdir)
      return {
        ...real,
        write: (path: string, data: Uint8Array, mode: number) =>
          Effect.suspend(() => {
            if (!control.failNext) return real.write(path, data, mode)
            control.failNext = false
            return Effect.fail(new WorkspaceIOError({ operation: "write", path, detail: "ENOSPC: no space left on device" }))
          })
      }
    })
    await run("memory", workdir, Effect.gen(function*() {
      const tools = yield* FileTools.FileTools
      const first = yield* turn("s", "one", [{ name: "write_file", input: { path: "a.txt", content: "v1" } }])
      const second = yield* turn("s", "two", [])
      control.failNext = true
      const failed = yield* failureOf(tools.writeFile({ sessionId: "s", toolUseId: "t-fail" }, { path: "a.txt", content: "v2" }))
      expect(failed).toBeInstanceOf(WorkspaceIOError)
      const changes = (yield* logOf("s")).map((s) => s.event).filter((e): e is FileChange => e._tag === "FileChange")
      expect(changes.at(-1)).toMatchObject({ toolUseId: "t-fail", after: { _tag: "file" } })
      expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe("v1")
      const timeTravel = yield* TimeTravel.TimeTravel
      expect((yield* timeTravel.restore("s", second)).restoredFiles).toEqual(["a.txt"])
      expect((yield* timeTravel.restore("s", first)).restoredFiles).toEqual(["a.txt"])
      expect(diskState(workdir)).toEqual({})
    }), { workspace: flaky })
  })

  it("overwriting an oversized file keeps its mode; edits change only the matched bytes", async () => {
    const workdir = freshWorkdir()
    writeFileSync(join(workdir, "big.bin"), Buffer.alloc(4096, 1), { mode: 0o751 })
    const bom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("key=old\n"), Buffer.from([0xff, 0xfe])])
    writeFileSync(join(workdir, "conf.txt"), bom)
    await run("memory", workdir, Effect.gen(function*() {
      const tools = yield* FileTools.FileTools
      yield* tools.writeFile({ sessionId: "s", toolUseId: "t1" }, { path: "big.bin", content: "small" })
      yield* tools.editFile({ sessionId: "s", toolUseId: "t2" }, { path: "conf.txt", old_string: "old", new_string: "new" })
    }), { snapshotMaxBytes: 1024 })
    expect(diskState(workdir)["big.bin"]!.mode).toBe(0o751)
    expect(readFileSync(join(workdir, "conf.txt"))).toEqual(
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from("key=new\n"), Buffer.from([0xff, 0xfe])])
    )
  })
})

describe("restore refuses, with a reason per file, and changes nothing", () => {
  for (const backend of BACKENDS) {
    it(`${backend}: an edit made outside the tools is detected; dry run shows the reason`, async () => {
      const workdir = freshWorkdir()
      await run(backend, workdir, Effect.gen(function*() {
        const { first } = yield* twoPrompts
        writeFileSync(join(workdir, "a.txt"), "ALPHA plus my own edit\n")
        const disk = diskState(workdir)
        const log = yield* logOf("s")
        const timeTravel = yield* TimeTravel.TimeTravel
        const dry = yield* timeTravel.restore("s", first, { dryRun: true })
        expect(dry.dryRun).toBe(true)
        expect(dry.refusals).toEqual([expect.objectContaining({ path: "a.txt", reason: "modified_externally" })])
        expect(dry.plan.map((p) => [p.path, p.action, p.refusal?.reason])).toEqual([
          ["a.txt", "delete", "modified_externally"],
          ["c.txt", "delete", undefined],
          ["src/b.txt", "delete", undefined]
        ])
        const error = yield* failureOf(timeTravel.restore("s", first))
        expect(error).toBeInstanceOf(RestoreRefusedError)
        expect((error as RestoreRefusedError).refusals.map((r) => [r.path, r.reason])).toEqual([["a.txt", "modified_externally"]])
        expect(diskState(workdir)).toEqual(disk)
        expect(yield* logOf("s")).toEqual(log)
        // The way out when the user wants the conversation back anyway:
        const conversationOnly = yield* timeTravel.restore("s", first, { files: false })
        expect(conversationOnly).toMatchObject({ restoredFiles: [], conversationRestored: true })
        expect(diskState(workdir)).toEqual(disk)
        yield* expectMovedBack("s", log, first - 1)
      }))
    })
  }

  it("a symlink planted where the agent wrote, or a parent directory swapped for one, is refused; nothing outside is touched", async () => {
    for (const plant of ["file", "parent"] as const) {
      const workdir = freshWorkdir()
      const outside = mkdtempSync(join(tmpdir(), "lite-agent-outside-"))
      writeFileSync(join(outside, "b.txt"), "outside")
      await run("file", workdir, Effect.gen(function*() {
        const { first } = yield* twoPrompts
        if (plant === "file") {
          rmSync(join(workdir, "c.txt"))
          symlinkSync(join(outside, "b.txt"), join(workdir, "c.txt"))
        } else {
          rmSync(join(workdir, "src"), { recursive: true })
          symlinkSync(outside, join(workdir, "src"))
        }
        const error = yield* failureOf((yield* TimeTravel.TimeTravel).restore("s", first))
        expect(error).toBeInstanceOf(RestoreRefusedError)
        const refusal = (error as RestoreRefusedError).refusals.find((r) => r.reason === "unsafe_path")
        expect(refusal?.path).toBe(plant === "file" ? "c.txt" : "src/b.txt")
      }))
      expect(readFileSync(join(outside, "b.txt"), "utf8")).toBe("outside")
    }
  })

  it("not a checkpoint; a tool call cut in half; a tool interrupted between snapshot and change; a missing or unavailable snapshot", async () => {
    const workdir = freshWorkdir()
    await run("memory", workdir, Effect.gen(function*() {
      const checkpointer = yield* Checkpointer
      const timeTravel = yield* TimeTravel.TimeTravel
      const { first, second } = yield* twoPrompts
      const reasons = (error: unknown) => (error as RestoreRefusedError).refusals.map((r) => [r.path, r.reason])
      expect(reasons(yield* failureOf(timeTravel.restore("s", first + 1)))).toEqual([[undefined, "not_a_checkpoint"]])
      expect(reasons(yield* failureOf(timeTravel.restore("other", 1)))).toEqual([[undefined, "not_a_checkpoint"]])
      // A prompt marked as user input while a tool call was still waiting for its result.
      yield* checkpointer.append("s", [
        new AssistantMessage({ content: [{ type: "tool_use", id: "slow", name: "bash", input: { command: "sleep 1" } }] }),
        new UserMessage({ content: "typed while the tool ran", origin: "user" }),
        new ToolResult({ toolUseId: "slow", toolName: "bash", content: "done", isError: false })
      ])
      const cutAt = (yield* timeTravel.listCheckpoints("s")).at(-1)!.seq
      expect(reasons(yield* failureOf(timeTravel.restore("s", cutAt)))).toEqual([[undefined, "tool_call_cut"]])
      // Files only: nothing is cut, so that is allowed (and there is nothing to put back).
      expect((yield* timeTravel.restore("s", cutAt, { conversation: false })).restoredFiles).toEqual([])
      // A snapshot with no change record after it: the tool was interrupted.
      const p3 = yield* turn("s", "third", [])
      yield* checkpointer.append("s", [
        new FileSnapshot({ toolUseId: "crashed", path: "c.txt", state: { _tag: "missing" } }),
        new FileChange({ toolUseId: "legacy", path: "src/b.txt", operation: "edit" })
      ])
      const refused = yield* failureOf(timeTravel.restore("s", p3))
      expect(reasons(refused)).toEqual([["c.txt", "tool_interrupted"], ["src/b.txt", "snapshot_missing"]])
      void second
    }))
  })

  it("files the agent never touched, ignored files and .git are left alone", async () => {
    const workdir = freshWorkdir()
    mkdirSync(join(workdir, ".git"))
    writeFileSync(join(workdir, ".git", "HEAD"), "ref: refs/heads/main\n")
    writeFileSync(join(workdir, ".gitignore"), "build/\n")
    mkdirSync(join(workdir, "build"))
    writeFileSync(join(workdir, "build", "out.js"), "compiled")
    writeFileSync(join(workdir, "user.txt"), "mine")
    await run("file", workdir, Effect.gen(function*() {
      const { first } = yield* twoPrompts
      // Files appear after the checkpoint without the agent: never deleted by restore.
      writeFileSync(join(workdir, "build", "later.js"), "built after")
      writeFileSync(join(workdir, ".git", "index"), "git wrote this")
      const result = yield* (yield* TimeTravel.TimeTravel).restore("s", first)
      expect([...result.restoredFiles].sort()).toEqual(["a.txt", "c.txt", "src/b.txt"])
    }))
    const disk = diskState(workdir)
    expect(Object.keys(disk).sort()).toEqual([".git/HEAD", ".git/index", ".gitignore", "build/later.js", "build/out.js", "user.txt"])
    expect(Buffer.from(disk["user.txt"]!.data, "base64").toString()).toBe("mine")
  })

  it("reports shell commands it cannot undo and records it could not verify", async () => {
    const workdir = freshWorkdir()
    await run("memory", workdir, Effect.gen(function*() {
      const checkpointer = yield* Checkpointer
      const p1 = yield* turn("s", "run things", [
        { name: "bash", input: { command: "npm install left-pad" } },
        { name: "write_file", input: { path: "x.txt", content: "x" } }
      ])
      // A change record from before hashes were recorded, after a proper snapshot.
      yield* checkpointer.append("s", [
        new FileSnapshot({ toolUseId: "old", path: "legacy.txt", state: { _tag: "missing" } }),
        new FileChange({ toolUseId: "old", path: "legacy.txt", operation: "write" })
      ])
      writeFileSync(join(workdir, "legacy.txt"), "legacy")
      const result = yield* (yield* TimeTravel.TimeTravel).restore("s", p1)
      expect(result.commandsNotUndone).toEqual([{ seq: p1 + 1, tool: "bash", input: { command: "npm install left-pad" } }])
      expect(result.unverifiedFiles).toEqual(["legacy.txt"])
      expect(diskState(workdir)).toEqual({})
    }))
  })
})

describe("a restore retried after it was cut short", () => {
  for (const backend of BACKENDS) {
    it(`${backend}: files already back at the target are not outside edits; the restore completes; other edits are still refused`, async () => {
      const workdir = freshWorkdir()
      await run(backend, workdir, Effect.gen(function*() {
        const { second } = yield* twoPrompts
        const timeTravel = yield* TimeTravel.TimeTravel
        const clean = diskState(workdir)
        // What a restore to `second` stopped after its first file leaves: a.txt back, c.txt still there.
        writeFileSync(join(workdir, "a.txt"), "alpha\n")
        const dry = yield* timeTravel.restore("s", second, { dryRun: true })
        expect(dry.refusals).toEqual([])
        expect(dry.plan.map((p) => [p.path, p.action, p.alreadyRestored])).toEqual([["a.txt", "write", true], ["c.txt", "delete", false]])

        // c.txt edited outside meanwhile: that one is refused, a.txt is not.
        writeFileSync(join(workdir, "c.txt"), "gamma, edited by hand")
        const error = yield* failureOf(timeTravel.restore("s", second))
        expect(error).toBeInstanceOf(RestoreRefusedError)
        expect((error as RestoreRefusedError).refusals.map((r) => [r.path, r.reason])).toEqual([["c.txt", "modified_externally"]])

        writeFileSync(join(workdir, "c.txt"), "gamma")
        const log = yield* logOf("s")
        const result = yield* timeTravel.restore("s", second)
        expect(result).toMatchObject({ restoredFiles: ["a.txt", "c.txt"], conversationRestored: true, refusals: [] })
        const { "c.txt": _removed, ...rest } = clean
        expect(diskState(workdir)).toEqual({ ...rest, "a.txt": { ...clean["a.txt"], data: Buffer.from("alpha\n").toString("base64") } })
        yield* expectMovedBack("s", log, second - 1)
      }))
    })
  }
})

describe("a restore's intent", () => {
  const sha = (text: string) => createHash("sha256").update(text).digest("hex")
  /** Counts the restore's file operations; the second waits for `pause`. */
  interface Gate {
    operations: number
    pause: () => Promise<void>
  }
  const gatedWorkspace = (workdir: string, gate: Gate) =>
    Layer.sync(Workspace.Workspace, () => {
      const real = Workspace.make(workdir)
      const gated = <A, E>(operation: Effect.Effect<A, E>) =>
        Effect.suspend(() => (++gate.operations === 2 ? Effect.zipRight(Effect.promise(gate.pause), operation) : operation))
      return {
        ...real,
        write: (path: string, data: Uint8Array, mode: number) => gated(real.write(path, data, mode)),
        remove: (path: string) => gated(real.remove(path))
      }
    })

  for (const backend of BACKENDS) {
    it(`${backend}: in the log while files change, with each file's bytes before; closed after, its blobs kept`, async () => {
      const workdir = freshWorkdir()
      const gate: Gate = { operations: 0, pause: () => Promise.resolve() }
      await run(backend, workdir, Effect.gen(function*() {
        const { first, second } = yield* twoPrompts
        const checkpointer = yield* Checkpointer
        const timeTravel = yield* TimeTravel.TimeTravel
        const log = yield* logOf("s")
        // At its second file operation, the restore waits while the test looks at the log.
        const lastEvents: Array<unknown> = []
        const beforeBytes: Array<string> = []
        const look = Effect.gen(function*() {
          const last = (yield* logOf("s")).at(-1)!.event
          lastEvents.push(last)
          const before = last._tag === "RestoreStarted" ? last.files[0]!.before : undefined
          if (before?._tag === "stored") beforeBytes.push(Buffer.from(yield* checkpointer.readSnapshot("s", before.sha256)).toString())
        })
        gate.pause = () => Effect.runPromise(look.pipe(Effect.provideService(Checkpointer, checkpointer)))
        gate.operations = 0

        // Files only: the intent is closed as finished; the conversation is as it was.
        yield* timeTravel.restore("s", second, { conversation: false })
        const intent = lastEvents[0]
        expect(intent).toBeInstanceOf(RestoreStarted)
        const started = intent as RestoreStarted
        expect(started).toMatchObject({ checkpoint: second, conversation: false })
        expect(started.files.map((file) => [file.path, file.before._tag, file.target._tag])).toEqual([
          ["a.txt", "stored", "file"],
          ["c.txt", "stored", "absent"]
        ])
        expect(beforeBytes[0]).toBe("ALPHA\n")
        const afterFilesOnly = yield* logOf("s")
        expect(afterFilesOnly.slice(0, log.length)).toEqual(log)
        expect(afterFilesOnly.slice(log.length).map((stored) => stored.event)).toEqual([
          started,
          expect.objectContaining({ _tag: "RestoreEnded", startedSeq: log.length + 1, outcome: "finished" })
        ])
        expect(Session.conversation(Session.fold(afterFilesOnly))).toEqual(Session.conversation(Session.fold(log)))
        expect(yield* timeTravel.interruptedRestore("s")).toBeUndefined()
        // The bytes the intent kept stay: the files' state before the restore is never lost.
        const kept = (yield* checkpointer.listSnapshots("s")).map((snapshot) => snapshot.sha256)
        expect(kept).toContain(sha("ALPHA\n"))

        // With the conversation: the move of the leaf names the intent it completes.
        writeFileSync(join(workdir, "a.txt"), "ALPHA\n")
        writeFileSync(join(workdir, "c.txt"), "gamma")
        gate.operations = 0
        yield* timeTravel.restore("s", first)
        expect(lastEvents[1]).toBeInstanceOf(RestoreStarted)
        yield* expectMovedBack("s", afterFilesOnly, first - 1)
        expect((yield* logOf("s")).at(-1)!.event).toMatchObject({ restoreStarted: afterFilesOnly.length + 1 })
      }), { workspace: gatedWorkspace(workdir, gate) })
    })
  }

  it("undoInterruptedRestore without one is refused (no_interrupted_restore), changing nothing", async () => {
    const workdir = freshWorkdir()
    await run("memory", workdir, Effect.gen(function*() {
      yield* twoPrompts
      const disk = diskState(workdir)
      const log = yield* logOf("s")
      const error = yield* failureOf((yield* TimeTravel.TimeTravel).undoInterruptedRestore("s"))
      expect(error).toBeInstanceOf(RestoreRefusedError)
      expect((error as RestoreRefusedError).refusals.map((refusal) => refusal.reason)).toEqual(["no_interrupted_restore"])
      expect(diskState(workdir)).toEqual(disk)
      expect(yield* logOf("s")).toEqual(log)
    }))
  })
})

describe("restore part-way failures put everything back", () => {
  /** A workspace whose n-th write or delete (counting from when `armed` is set) fails, once. */
  const failingWorkspace = (workdir: string, control: { armed: boolean; writesLeft: number; hang?: boolean }) =>
    Layer.sync(Workspace.Workspace, () => {
      const real = Workspace.make(workdir)
      return {
        ...real,
        write: (path: string, data: Uint8Array, mode: number) =>
          Effect.suspend(() =>
            control.armed && control.writesLeft-- === 0
              ? control.hang === true
                ? Effect.never
                : Effect.fail(new WorkspaceIOError({ operation: "write", path, detail: "EROFS: read-only file system" }))
              : real.write(path, data, mode)
          ),
        remove: (path: string) =>
          Effect.suspend(() =>
            control.armed && control.writesLeft-- === 0
              ? control.hang === true
                ? Effect.never
                : Effect.fail(new WorkspaceIOError({ operation: "delete", path, detail: "EACCES: permission denied" }))
              : real.remove(path)
          )
      }
    })

  for (const backend of BACKENDS) {
    it(`${backend}: an I/O failure midway leaves every file and the log as before`, async () => {
      const workdir = freshWorkdir()
      const control = { armed: false, writesLeft: 1 }
      await run(backend, workdir, Effect.gen(function*() {
        const { first } = yield* twoPrompts
        const disk = diskState(workdir)
        const log = yield* logOf("s")
        control.armed = true
        const error = yield* failureOf((yield* TimeTravel.TimeTravel).restore("s", first))
        control.armed = false
        expect(error).toBeInstanceOf(RestoreFailedError)
        expect((error as RestoreFailedError).notRolledBack).toEqual([])
        expect(String((error as Error).message)).toMatch(/EROFS|EACCES/)
        expect(diskState(workdir)).toEqual(disk)
        yield* expectUndoneIntent("s", log)
      }), { workspace: failingWorkspace(workdir, control) })
    })
  }

  it("an abort signal fired after the first file puts it back; progress says start, progress, error", async () => {
    const workdir = freshWorkdir()
    await run("file", workdir, Effect.gen(function*() {
      const { first } = yield* twoPrompts
      const disk = diskState(workdir)
      const timeTravel = yield* TimeTravel.TimeTravel
      const controller = new AbortController()
      const seen: Array<RestoreProgress> = []
      const listener = yield* Effect.fork(Stream.runForEach(timeTravel.progress, (progress) =>
        Effect.sync(() => {
          seen.push(progress)
          if (progress.phase === "progress") controller.abort()
        })))
      yield* Effect.sleep("20 millis")
      const error = yield* failureOf(timeTravel.restore("s", first, { signal: controller.signal }))
      expect(error).toBeInstanceOf(RestoreFailedError)
      expect((error as RestoreFailedError).detail).toBe("aborted")
      yield* Effect.sleep("20 millis")
      yield* Fiber.interrupt(listener)
      expect(seen.map((p) => p.phase)).toEqual(["start", "progress", "error"])
      expect(diskState(workdir)).toEqual(disk)
      expect((yield* logOf("s")).length).toBeGreaterThan(first)
    }))
  })

  it("a fiber interrupted part-way puts back what it changed", async () => {
    const workdir = freshWorkdir()
    // The second file operation hangs (a stuck disk): the restore is interrupted there.
    const control = { armed: false, writesLeft: 1, hang: true }
    await run("memory", workdir, Effect.gen(function*() {
      const { first } = yield* twoPrompts
      const disk = diskState(workdir)
      const log = yield* logOf("s")
      const timeTravel = yield* TimeTravel.TimeTravel
      control.armed = true
      const fiber = yield* Effect.fork(timeTravel.restore("s", first))
      yield* Effect.sleep("100 millis")
      expect(diskState(workdir)).not.toEqual(disk) // the first file was changed before the hang
      const exit = yield* Fiber.interrupt(fiber)
      control.armed = false
      expect(exit._tag).toBe("Failure")
      expect(diskState(workdir)).toEqual(disk)
      yield* expectUndoneIntent("s", log)
    }), { workspace: failingWorkspace(workdir, control) })
  })

  it("a conflict at the move of the leaf puts the files back too, and closes the restore's intent", async () => {
    const workdir = freshWorkdir()
    const control = { armed: false, writesLeft: Number.POSITIVE_INFINITY }
    await run("memory", workdir, Effect.gen(function*() {
      const { first } = yield* twoPrompts
      const disk = diskState(workdir)
      const log = yield* logOf("s")
      const checkpointer = yield* Checkpointer
      const timeTravel = yield* TimeTravel.TimeTravel
      // Another writer appends while the restore is writing files.
      const listener = yield* Effect.fork(Stream.runForEach(timeTravel.progress, (p) =>
        p.phase === "progress" && p.completed === 1
          ? Effect.asVoid(checkpointer.append("s", [new UserMessage({ content: "sneaky", origin: "user" })]))
          : Effect.void))
      yield* Effect.sleep("20 millis")
      const error = yield* failureOf(timeTravel.restore("s", first))
      yield* Fiber.interrupt(listener)
      expect(error).toBeInstanceOf(RestoreFailedError)
      expect(String((error as Error).message)).toContain("expected head")
      expect(diskState(workdir)).toEqual(disk)
      // The log moved past the restore's intent, so a RestoreEnded closes it: nothing is pending.
      const after = yield* logOf("s")
      expect(after.slice(log.length).map((stored) => stored.event._tag)).toEqual(["RestoreStarted", "UserMessage", "RestoreEnded"])
      expect(after.at(-1)!.event).toMatchObject({ startedSeq: log.length + 1, outcome: "undone" })
      expect(yield* timeTravel.interruptedRestore("s")).toBeUndefined()
    }), { workspace: failingWorkspace(workdir, control) })
  })
})
