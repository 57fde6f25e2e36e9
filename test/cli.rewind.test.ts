/**
 * Time travel in a terminal without reading seq numbers, in a real pseudo-terminal: the rewind
 * picker (Esc Esc at an empty prompt, `/rewind`) with its three restores (conversation and
 * files, conversation only, files only); `/tree`'s menus on a checkpoint of another branch and
 * its folds; `--include-user-edits` offered where a plan refuses an edit made by hand; a refused
 * switch shown as a plan; one-key answers. Asserts on the screen, the files and the log.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { Session } from "../src/core.js"
import type { StoredEvent } from "../src/index.js"
import { readFileLog, tempDir } from "./support/agent.js"
import { terminal } from "./support/terminal.js"

const UNATTENDED = ["--permission-mode", "bypassPermissions"]
const write = (path: string, content: string) => ({ toolCalls: [{ name: "write_file", input: { path, content } }] })

const readLog = readFileLog

/** The prompts of the session's current branch, in order. */
const branchPrompts = (log: ReadonlyArray<StoredEvent>) =>
  Session.fold(log).messages.toArray().flatMap((entry) => (entry.event._tag === "UserMessage" ? [String(entry.event.content)] : []))

const seqOf = (log: ReadonlyArray<StoredEvent>, prompt: string) =>
  log.find((stored) => stored.event._tag === "UserMessage" && stored.event.content === prompt)!.seq

describe("time travel in a terminal, by picture", () => {
  it("the rewind picker, /tree's menus and folds, --include-user-edits, a refused switch as a plan", async () => {
    const workdir = tempDir("tty-rewind-work")
    const sessions = tempDir("tty-rewind-sessions")
    const turns = join(tempDir("tty-rewind-turns"), "turns.json")
    writeFileSync(turns, JSON.stringify([
      write("a.txt", "one\n"),
      { text: "Wrote a.txt." },
      write("a.txt", "two\n"),
      { text: "Changed a.txt." },
      write("b.txt", "b\n"),
      { text: "Wrote b.txt." },
      { text: "Nothing to do." }
    ]))
    const tty = terminal(["--model", `scripted:${turns}`, "--checkpointer", `file:${sessions}`, "--workdir", workdir, ...UNATTENDED])
    const file = (name: string) => (existsSync(join(workdir, name)) ? readFileSync(join(workdir, name), "utf8") : undefined)
    await tty.waitFor("> ")
    tty.type("make a\r")
    await tty.waitFor("out tokens]")
    tty.type("change a\r")
    await tty.waitFor("out tokens]")

    // Esc Esc at the empty prompt: the branch's prompts, newest first, the newest selected.
    tty.type("\u001b\u001b")
    const picker = await tty.waitFor("q or Esc leaves")
    expect(picker).toContain("rewind to before which prompt?")
    expect(picker).toMatch(/▸ +\d+ +\d\d:\d\d +"change a" +1 file changed since\n +\d+ +\d\d:\d\d +"make a" +1 file changed since/)
    // Enter, then f: the files only.
    tty.type("\r")
    await tty.waitFor("f files only · Esc nothing")
    tty.type("f")
    const filesPlan = await tty.waitFor("restore? y/n")
    expect(filesPlan).toContain(`restore the files only to just before checkpoint ${seqOf(await readLog(sessions), "change a")}:`)
    expect(filesPlan).toContain("a.txt: put back")
    tty.type("y")
    await tty.waitFor("restored: a.txt; conversation kept")
    expect(file("a.txt")).toBe("one\n")
    expect(branchPrompts(await readLog(sessions))).toEqual(["make a", "change a"])

    // /rewind, the newest again, c: the conversation only; the files stay as the first restore left them.
    tty.type("/rewind\r")
    await tty.waitFor("q or Esc leaves")
    tty.type("\u001b[B")
    const down = await tty.waitFor("q or Esc leaves")
    expect(down).toMatch(/▸ +\d+ +\d\d:\d\d +"make a"/)
    tty.type("\u001b[A")
    await tty.waitFor("q or Esc leaves")
    tty.type("\r")
    await tty.waitFor("Esc nothing")
    tty.type("c")
    await tty.waitFor("restore? y/n")
    tty.type("y")
    await tty.waitFor("restored: no files; conversation cut back")
    expect(file("a.txt")).toBe("one\n")
    expect(branchPrompts(await readLog(sessions))).toEqual(["make a"])

    // A turn from there is a branch; the one left parts after "make a".
    tty.type("other\r")
    await tty.waitFor("Wrote b.txt.")
    await tty.waitFor("out tokens]")
    const log = await readLog(sessions)
    const [changeA, other] = [seqOf(log, "change a"), seqOf(log, "other")]

    // /tree: up three rows to "change a", on the branch left behind; Enter offers restore there.
    tty.type("/tree\r")
    const tree = await tty.waitFor("q leaves")
    expect(tree).toMatch(new RegExp(`╰─ +${changeA} +\\d\\d:\\d\\d +"change a"`))
    for (let up = 0; up < 3; up++) {
      tty.type("\u001b[A")
      await tty.waitFor("q leaves")
    }
    tty.type("\r")
    await tty.waitFor(`checkpoint ${changeA} is on another branch: r restore to just before it`)
    tty.type("r")
    const otherPlan = await tty.waitFor("restore? y/n")
    expect(otherPlan).toContain("b.txt: deleted")
    tty.type("y")
    await tty.waitFor("restored: b.txt; conversation cut back")
    expect(file("b.txt")).toBeUndefined()
    expect(file("a.txt")).toBe("one\n")
    expect(branchPrompts(await readLog(sessions))).toEqual(["make a"])
    tty.type("/undo --yes\r")
    await tty.waitFor("the conversation is the branch's")
    expect(file("b.txt")).toBe("b\n")
    expect(branchPrompts(await readLog(sessions))).toEqual(["make a", "other"])

    // ← folds the branch the selected row is on into its tip; → shows it again.
    tty.type("/tree\r")
    await tty.waitFor("q leaves")
    for (let up = 0; up < 3; up++) {
      tty.type("\u001b[A")
      await tty.waitFor("q leaves")
    }
    tty.type("\u001b[D")
    const folded = await tty.waitFor("q leaves")
    expect(folded).toMatch(/▸ +╰─ ○ tip \d+ · 1 row folded \(→ shows them\)/)
    expect(folded.slice(folded.lastIndexOf("row folded"))).not.toContain('"change a"')
    tty.type("\u001b[C")
    const unfolded = await tty.waitFor("q leaves")
    expect(unfolded).toMatch(/▸ +╰─ +\d+ +\d\d:\d\d +"change a"/)
    tty.type("q")

    // An edit by hand between turns: a restore over it is refused, and the way to include it said.
    writeFileSync(join(workdir, "b.txt"), "edited by hand\n")
    tty.type("third\r")
    await tty.waitFor("Nothing to do.")
    await tty.waitFor("out tokens]")
    tty.type(`/restore ${other}\r`)
    const refused = await tty.waitFor("nothing was changed")
    expect(refused).toContain("b.txt: REFUSED (modified_externally")
    expect(refused).toContain(`(/restore ${other} --include-user-edits undoes those edits too)`)
    expect(file("b.txt")).toBe("edited by hand\n")
    tty.type(`/restore ${other} --include-user-edits --yes\r`)
    await tty.waitFor("restored: b.txt; conversation cut back")
    expect(file("b.txt")).toBeUndefined()

    // A switch refused as a whole is shown as its plan, not as an error.
    tty.type("/switch 99999\r")
    const switchRefused = await tty.waitFor("nothing was changed")
    expect(switchRefused).toContain("switch to the branch ending at seq 99999:")
    expect(switchRefused).toContain("REFUSED (not_a_branch")
    expect(switchRefused).not.toContain("error:")
    // /label's usage is what /help says.
    tty.type("/label\r")
    await tty.waitFor("usage: /label <seq> [name]")
    tty.type("/help\r")
    await tty.waitFor("/label <seq> [name]")
    tty.type("\u0004")
    expect(await tty.closed).toBe(0)
  })
})
