/**
 * What a `shell` call leaves running: processes it started in the background (`cmd &`, `setsid`,
 * a double fork) are stopped when its shell exits, before the call returns — so nothing it
 * started can change the workdir after the call's capture (attributed to nobody, or racing a
 * restore). Real bash, real processes, real files.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { BackgroundCompleted, createLiteAgent, WorkspaceCaptured } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { type CommandOptions, describeOutcome, runCommand } from "../src/agent/Shell.js"
import { closeAfterEach, eventually, promiseCheckpointer, tempDir } from "./support/agent.js"
import { killAll, pidIn, processRunning, runningInGroup } from "./support/liveProcesses.js"

const leftovers: Array<number> = []
afterEach(() => killAll(leftovers))

const run = (command: string, cwd: string, options: Partial<CommandOptions> = {}) =>
  Effect.runPromise(runCommand(command, { cwd, timeoutMs: 60_000, ...options }))

/** The pids a command wrote to `names` in `dir`, tracked so a failing test leaks none. */
const pidsIn = (dir: string, ...names: Array<string>) => {
  const pids = names.map((name) => pidIn(join(dir, name)))
  leftovers.push(...pids)
  return pids
}

describe("a shell call's background processes are stopped when its shell exits", () => {
  it("a writer still running when the shell exits is stopped before the call returns: its file never appears", async () => {
    const dir = tempDir("shellbg")
    const outcome = await run("echo $$ > shell.pid; (sleep 0.3; echo late > late.txt) & echo $! > writer.pid; echo started", dir)
    const [shell, writer] = pidsIn(dir, "shell.pid", "writer.pid")
    expect(outcome.exitCode).toBe(0)
    expect(outcome.output).toBe("started\n")
    // The subshell, and its `sleep` once forked.
    expect(outcome.stoppedBackgroundProcesses).toBeGreaterThanOrEqual(1)
    // Nothing of the call is left that could write late.txt later.
    expect(processRunning(writer!)).toBe(false)
    expect(runningInGroup(shell!)).toEqual([])
    expect(existsSync(join(dir, "late.txt"))).toBe(false)
  })

  it("the model is told how many were stopped and where long-running commands go", async () => {
    const dir = tempDir("shellbg")
    const outcome = await run("sleep 100 & echo $! > server.pid; echo started", dir)
    const [server] = pidsIn(dir, "server.pid")
    expect(processRunning(server!)).toBe(false)
    expect(outcome.stoppedBackgroundProcesses).toBe(1)
    expect(describeOutcome(outcome)).toBe(
      "started\n[exit code 0]\n" +
        "[stopped 1 background process still running when the command exited; run long-running commands with background: true]"
    )
    const two = await run("sleep 100 & echo $! > a.pid; sleep 100 & echo $! > b.pid", dir)
    for (const pid of pidsIn(dir, "a.pid", "b.pid")) expect(processRunning(pid)).toBe(false)
    expect(describeOutcome(two)).toContain("[stopped 2 background processes still running when the command exited;")
  })

  it("a background process that ignores SIGTERM is killed after the grace", async () => {
    const dir = tempDir("shellbg")
    // The SIGTERM disposition is inherited across exec by `sleep`.
    const outcome = await run("(trap '' TERM; exec sleep 100) & echo $! > stubborn.pid", dir)
    const [stubborn] = pidsIn(dir, "stubborn.pid")
    expect(processRunning(stubborn!)).toBe(false)
    expect(outcome.exitCode).toBe(0)
    expect(outcome.stoppedBackgroundProcesses).toBe(1)
  })

  it("processes that left the call's process group are found too: a new session, a double fork, a cleared environment under a live parent", async () => {
    const dir = tempDir("shellbg")
    const outcome = await run([
      // A new session of its own.
      "setsid sleep 100 & echo $! > session.pid",
      // A double fork into a new session: its parent is gone before the shell exits.
      "setsid -f bash -c 'echo $$ > forked.pid; exec sleep 100'",
      // A new session with an empty environment, under a subshell of the call that waits for it.
      "(env -i /usr/bin/setsid /bin/sh -c 'echo $$ > bare.pid; exec /bin/sleep 100' & wait) &",
      // A pid file is complete once it is not empty (echo writes the line at once).
      "until [ -s forked.pid ] && [ -s bare.pid ]; do sleep 0.01; done"
    ].join("\n"), dir)
    const pids = pidsIn(dir, "session.pid", "forked.pid", "bare.pid")
    for (const pid of pids) expect(processRunning(pid)).toBe(false)
    // The three, and the subshell waiting for the last one.
    expect(outcome.stoppedBackgroundProcesses).toBe(4)
  })

  it("the limit: a process that leaves the session and clears its environment after its parent is gone is out of reach", async () => {
    const dir = tempDir("shellbg")
    const outcome = await run(
      "env -i /usr/bin/setsid -f /bin/sh -c 'echo $$ > escaped.pid; exec /bin/sleep 100'\n" +
        "until [ -s escaped.pid ]; do sleep 0.01; done",
      dir
    )
    const [escaped] = pidsIn(dir, "escaped.pid")
    expect(processRunning(escaped!)).toBe(true)
    expect("stoppedBackgroundProcesses" in outcome).toBe(false)
  })

  it("a timeout stops the processes that left the group as well as the group", async () => {
    const dir = tempDir("shellbg")
    const outcome = await run("setsid sleep 100 & echo $! > session.pid; echo $$ > shell.pid; wait", dir, { timeoutMs: 300 })
    const [session, shell] = pidsIn(dir, "session.pid", "shell.pid")
    expect(outcome.timedOut).toBe(true)
    expect(processRunning(session!)).toBe(false)
    expect(runningInGroup(shell!)).toEqual([])
  })

  it("a call whose children all finished says nothing about background processes", async () => {
    const dir = tempDir("shellbg")
    const outcome = await run("sleep 0.05 & wait; echo done", dir)
    expect("stoppedBackgroundProcesses" in outcome).toBe(false)
    expect(describeOutcome(outcome)).toBe("done\n[exit code 0]")
    const plain = await run("echo hi", dir)
    expect("stoppedBackgroundProcesses" in plain).toBe(false)
    expect(describeOutcome(plain)).toBe("hi\n[exit code 0]")
  })
})

describe("an agent whose shell calls leave processes running", () => {
  const track = closeAfterEach()
  const shell = (command: string) => ({ name: "shell", input: { command } })

  it("leaves no late file after the turn or after a restore to before it, and nothing is attributed to the user", async () => {
    const workdir = tempDir("shellbg-work")
    const outside = tempDir("shellbg-outside")
    const trigger = join(outside, "go")
    const writerPid = join(outside, "writer.pid")
    const checkpointer = track(promiseCheckpointer("file"))
    const agent = track(createLiteAgent({
      model: scripted([
        { text: "looked" },
        // The writer waits for the test's signal, so it writes only if it outlived the call.
        { toolCalls: [shell(`(until [ -e '${trigger}' ]; do sleep 0.02; done; echo late > late.txt) & echo $! > '${writerPid}'; echo made > made.txt`)] },
        { text: "started" },
        { text: "looked again" }
      ]),
      workdir,
      checkpointer
    }))
    await agent.send("look")
    const turn = await agent.send("start a writer")
    const writer = pidIn(writerPid)
    leftovers.push(writer)
    // Once told to, a writer that outlived the call would write late.txt and exit.
    writeFileSync(trigger, "")
    await eventually(() => !processRunning(writer))
    expect(existsSync(join(workdir, "late.txt"))).toBe(false)
    expect(readFileSync(join(workdir, "made.txt"), "utf8")).toBe("made\n")
    // The writer's subshell, and its `sleep` if one was running.
    expect(turn.toolCalls[0]!.output).toMatch(/\n\[stopped [12] background process(es)? still running when the command exited; run long-running commands with background: true\]$/)

    const checkpoints = await agent.listCheckpoints(agent.sessionId)
    expect(checkpoints[1]!.files).toEqual(["made.txt"])
    const restored = await agent.restore(agent.sessionId, checkpoints[1]!.seq)
    expect(restored.refusals).toEqual([])
    expect(restored.restoredFiles).toEqual(["made.txt"])
    expect(existsSync(join(workdir, "made.txt"))).toBe(false)
    expect(existsSync(join(workdir, "late.txt"))).toBe(false)

    // The next prompt's capture sees no change made between turns: nothing is the user's.
    await agent.send("look again")
    const checkpointCaptures = (await checkpointer.read(agent.sessionId))
      .map((stored) => stored.event)
      .filter((event): event is WorkspaceCaptured => event instanceof WorkspaceCaptured && event.cause._tag === "checkpoint")
    expect(checkpointCaptures.flatMap((capture) => capture.changes.map((change) => change.path))).toEqual([])
  })

  it("a background task ends with its command too: what it left running is stopped, and its completion says so", async () => {
    const workdir = tempDir("shellbg-work")
    const serverPid = join(tempDir("shellbg-outside"), "server.pid")
    const checkpointer = track(promiseCheckpointer("file"))
    const agent = track(createLiteAgent({
      model: scripted([
        { toolCalls: [{ name: "shell", input: { command: `sleep 100 & echo $! > '${serverPid}'; echo started`, background: true } }] },
        { text: "started" }
      ]),
      workdir,
      checkpointer
    }))
    await agent.send("start a server")
    await eventually(async () => (await agent.backgroundTasks()).length === 0)
    const server = pidIn(serverPid)
    leftovers.push(server)
    expect(processRunning(server)).toBe(false)
    const completions = (await checkpointer.read(agent.sessionId)).map((stored) => stored.event).filter((event) => event instanceof BackgroundCompleted)
    expect(completions.map((completion) => [completion.exitCode, completion.output])).toEqual([
      [0, "started\n\n[stopped 1 background process still running when the command exited]"]
    ])
  })
})
