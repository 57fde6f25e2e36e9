/**
 * A session belongs to its workdir: a turn, restore, move or fork in place by an agent working
 * in another directory (a second server over the same store, a session resumed elsewhere) is
 * refused with an error naming both, and changes nothing — unless the caller re-homes the
 * session, which the log records. Real agents, real files, the file and SQLite backends.
 */
import { readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { createLiteAgent, type PromiseCheckpointer, SessionWorkdirError } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { closeAfterEach, promiseCheckpointer, tempDir } from "./support/agent.js"

const track = closeAfterEach()
const write = (path: string, content: string) => ({ name: "write_file", input: { path, content } })

/** How the refusal of `operation` must read: both directories named, nothing changed. */
const refusedIn = (operation: string, sessionWorkdir: string, workdir: string) =>
  expect.objectContaining({ _tag: "SessionWorkdirError", operation, sessionWorkdir, workdir })

describe.each(["file", "sqlite"] as const)("a session belongs to its workdir: %s", (backend) => {
  /** A session of two turns in `home` (a.txt then b.txt), restored to before the second, on a store another agent shares. */
  const sessionAtHome = async () => {
    const checkpointer: PromiseCheckpointer = track(promiseCheckpointer(backend))
    const home = tempDir("home")
    const agent = track(createLiteAgent({
      model: scripted([{ toolCalls: [write("a.txt", "one\n")] }, { text: "a" }, { toolCalls: [write("b.txt", "two\n")] }, { text: "b" }]),
      workdir: home,
      checkpointer,
      sessionId: "s"
    }))
    await agent.send("write a")
    await agent.send("write b")
    const [, second] = await agent.listCheckpoints("s")
    await agent.restore("s", second!.seq)
    return { checkpointer, home, agent, second: second!.seq }
  }

  it("elsewhere, every turn, restore and move is refused naming both directories, and nothing is written", async () => {
    const { agent: atHome, checkpointer, home, second } = await sessionAtHome()
    const elsewhere = tempDir("elsewhere")
    const other = track(createLiteAgent({ model: scripted([{ text: "never" }]), workdir: elsewhere, checkpointer, sessionId: "s" }))
    const headBefore = await checkpointer.head("s")

    await expect(other.send("go on")).rejects.toEqual(refusedIn("turn", home, elsewhere))
    await expect(other.undo("s")).rejects.toEqual(refusedIn("undo", home, elsewhere))
    await expect(other.restore("s", second)).rejects.toEqual(refusedIn("restore", home, elsewhere))
    await expect(other.fork("s")).rejects.toEqual(refusedIn("fork", home, elsewhere))
    const error = await other.undo("s").catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(SessionWorkdirError)
    expect(String(error)).toContain(home)
    expect(String(error)).toContain(elsewhere)
    // The harm: an undo through the other agent wrote the session's files into its empty workdir.
    expect(readdirSync(elsewhere)).toEqual([])
    expect(await checkpointer.head("s")).toBe(headBefore)
    // A dry run is refused the same way; the conversation alone is restored anywhere.
    await expect(other.undo("s", { dryRun: true })).rejects.toEqual(refusedIn("undo", home, elsewhere))
    expect((await other.restore("s", second, { files: false, dryRun: true })).dryRun).toBe(true)

    // At home the session goes on as before.
    const undone = await atHome.undo("s")
    expect(undone.restoredFiles).toEqual(["b.txt"])
    expect(readFileSync(join(home, "b.txt"), "utf8")).toBe("two\n")
  })

  it("re-homed on purpose: the log records the new workdir, the turn runs there, and the old one is refused from then on", async () => {
    const { checkpointer, home } = await sessionAtHome()
    const elsewhere = tempDir("elsewhere")
    writeFileSync(join(elsewhere, "a.txt"), "one\n")
    const other = track(createLiteAgent({
      model: scripted([{ toolCalls: [write("c.txt", "three\n")] }, { text: "c" }]),
      workdir: elsewhere,
      checkpointer,
      sessionId: "s"
    }))
    const result = await other.send("write c", { rehome: true })
    expect(result.text).toBe("c")
    expect(readFileSync(join(elsewhere, "c.txt"), "utf8")).toBe("three\n")
    const metadata = (await checkpointer.read("s")).flatMap((stored) =>
      stored.event._tag === "SessionMetadata" && stored.event.workdir !== undefined ? [stored.event.workdir] : []
    )
    expect(metadata).toEqual([home, elsewhere])
    // Its own turn is undone where it now lives.
    const undone = await other.undo("s").catch((caught: unknown) => caught)
    expect(undone).not.toBeInstanceOf(SessionWorkdirError)

    const backHome = track(createLiteAgent({ model: scripted([{ text: "never" }]), workdir: home, checkpointer, sessionId: "s" }))
    await expect(backHome.send("go on")).rejects.toEqual(refusedIn("turn", elsewhere, home))
    await expect(backHome.redo("s")).rejects.toEqual(refusedIn("redo", elsewhere, home))
  })

  it("a fork written into another directory lives there: resumed in the source's workdir it is refused", async () => {
    const { agent: atHome, checkpointer, home } = await sessionAtHome()
    const forkDir = join(tempDir("forks"), "f")
    const forked = await atHome.fork("s", undefined, { id: "f", workdir: forkDir })
    expect(forked.workdir).toBe(forkDir)
    const resumedAtHome = track(createLiteAgent({ model: scripted([{ text: "never" }]), workdir: home, checkpointer, sessionId: "f" }))
    await expect(resumedAtHome.send("go on")).rejects.toEqual(refusedIn("turn", forkDir, home))
    const there = track(createLiteAgent({ model: scripted([{ text: "in the fork" }]), workdir: forkDir, checkpointer, sessionId: "f" }))
    expect((await there.send("go on")).text).toBe("in the fork")
  })

  it("a fork written into a directory named through a link belongs to that directory: an agent opened there by either name runs it", async () => {
    const { agent: atHome, checkpointer } = await sessionAtHome()
    const real = tempDir("forks-real")
    const linked = join(tempDir("forks-link"), "link")
    symlinkSync(real, linked)
    await atHome.fork("s", undefined, { id: "f3", workdir: join(linked, "f") })
    for (const [name, workdir] of [["by the link", join(linked, "f")], ["by its real path", join(real, "f")]] as const) {
      const there = track(createLiteAgent({ model: scripted([{ text: `ran ${name}` }]), workdir, checkpointer, sessionId: "f3" }))
      expect((await there.send("go on")).text).toBe(`ran ${name}`)
    }
  })

  it("a fork in place of a session from another workdir needs rehome; made, it names this workdir", async () => {
    const { checkpointer, home } = await sessionAtHome()
    const elsewhere = tempDir("elsewhere")
    const other = track(createLiteAgent({ model: scripted([{ text: "forked here" }]), workdir: elsewhere, checkpointer, sessionId: "s" }))
    await expect(other.fork("s", undefined, { id: "f2" })).rejects.toEqual(refusedIn("fork", home, elsewhere))
    expect(await checkpointer.head("f2")).toBe(0)
    const made = await other.fork("s", undefined, { id: "f2", rehome: true })
    expect(made.workdir).toBe(elsewhere)
    expect((await other.send("go on")).text).toBe("forked here")
    expect(await checkpointer.head("s")).toBeGreaterThan(0)
  })
})
