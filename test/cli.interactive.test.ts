/**
 * Interactive `lite-agent` in a real pseudo-terminal (util-linux `script`), driven by
 * keystrokes: turns with tool calls, /checkpoints, /compact cancelled by Ctrl-C mid-stage (the
 * log unchanged), /restore refused and confirmed, Ctrl-C during a turn, unknown commands,
 * /sessions, /clear and /resume, a restore a crash cut short (reported, a turn refused, finished
 * with /restore), and Ctrl-D to leave. Asserts on the screen and the session log.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { Session } from "../src/core.js"
import { fileCheckpointer } from "../src/index.js"
import { eventually, readFileLog, tempDir } from "./support/agent.js"
import { sessionWithInterruptedRestore } from "./support/interruptedRestore.js"
import { goneWithin, pidWrittenTo } from "./support/processes.js"
import { root, terminal } from "./support/terminal.js"

const readLog = readFileLog

/** The tests that are not about permissions let every tool run without asking. */
const UNATTENDED = ["--permission-mode", "bypassPermissions"]

const write = (path: string, content: string) => ({ toolCalls: [{ name: "write_file", input: { path, content } }] })

describe("lite-agent in a terminal", () => {
  it("turns, /checkpoints, /compact cancelled by Ctrl-C, /restore refused and confirmed, Ctrl-C in a turn, Ctrl-D", async () => {
    const workdir = tempDir("tty-work")
    const sessions = tempDir("tty-sessions")
    const turns = join(tempDir("tty-turns"), "turns.json")
    writeFileSync(turns, JSON.stringify([
      write("a.txt", "one\n"),
      { text: "Wrote a.txt." },
      write("a.txt", "two\n"),
      { text: "Changed a.txt." },
      { text: "SUMMARY", delayMs: 20_000 }, // the compaction's model call: cancelled while it waits
      { text: "too slow", delayMs: 20_000 } // the turn interrupted by Ctrl-C
    ]))
    const tty = terminal(["--model", `scripted:${turns}`, "--checkpointer", `file:${sessions}`, "--workdir", workdir, ...UNATTENDED])
    await tty.waitFor("/help for commands")
    await tty.waitFor("> ")

    tty.type("make a\r")
    const first = await tty.waitFor("[session ")
    expect(first).toContain('→ write_file {"path":"a.txt","content":"one\\n"}')
    expect(first).toContain("← wrote a.txt (4 bytes)")
    expect(first).toContain("Wrote a.txt.")
    await tty.waitFor("out tokens]")
    tty.type("change a\r")
    await tty.waitFor("Changed a.txt.")
    await tty.waitFor("out tokens]")

    tty.type("/checkpoints\r")
    const listed = await tty.waitFor('"change a"')
    expect(listed).toContain('"make a"  changed after: a.txt')
    const log = await readLog(sessions)
    const sessionId = await (async () => {
      const checkpointer = fileCheckpointer({ dir: sessions })
      try {
        return (await checkpointer.list())[0]!.id
      } finally {
        await checkpointer.close()
      }
    })()
    const changeSeq = log.find((stored) => stored.event._tag === "UserMessage" && stored.event.content === "change a")!.seq

    // /compact, cancelled by Ctrl-C while the model summarizes: the log is as it was.
    tty.type("/compact\r")
    await tty.waitFor("[compact] progress summarize 0/1")
    tty.type("\u0003")
    await tty.waitFor("(compaction cancelled: the session is as it was)")
    expect(await readLog(sessions)).toEqual(log)

    // A refused restore changes nothing; a confirmed one puts a.txt back.
    tty.type("/restore 1\r")
    const refused = await tty.waitFor("nothing was changed")
    expect(refused).toContain("REFUSED (not_a_checkpoint")
    tty.type(`/restore ${changeSeq}\r`)
    const plan = await tty.waitFor("restore? y/n")
    expect(plan).toContain("a.txt: put back")
    tty.type("y")
    await tty.waitFor("restored: a.txt; conversation cut back")
    expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe("one\n")

    tty.type("/bogus\r")
    await tty.waitFor("unknown command /bogus: /help lists the commands")
    tty.type("/restore x\r")
    await tty.waitFor("usage: /restore <seq> [--conversation-only | --files-only] [--include-user-edits] [--yes]")

    // Ctrl-C during a turn stops it; the session stays usable.
    tty.type("slow one\r")
    // The spinner says the model is working (the scripted call waits 20 s): stop it there.
    await tty.waitFor("thinking ")
    // The spinner starts with the turn; the prompt is in the log a moment later (on a loaded machine, after a Ctrl-C typed at once).
    await eventually(async () => (await readLog(sessions)).some((stored) => stored.event._tag === "UserMessage" && stored.event.content === "slow one"))
    tty.type("\u0003")
    await tty.waitFor("(interrupted: the turn stopped; the next one goes on from the log)")

    tty.type("/sessions\r")
    const sessionsShown = await tty.waitFor(`"make a"`)
    expect(sessionsShown).toMatch(/\* [0-9a-f-]{36} {2}\d+ ?(?:s|min) ago +\d+ prompts, [0-9.]+ KiB/)
    tty.type("/clear\r")
    await tty.waitFor("new session ")
    // /resume alone: a picker of the sessions; Enter resumes the one selected, with a recap of its last turns.
    tty.type("/resume\r")
    const picker = await tty.waitFor("Enter resumes that session")
    expect(picker).toContain(`▸ ${sessionId.slice(0, 8)}`)
    tty.type("\r")
    await tty.waitFor(`session ${sessionId}`)
    const recap = await tty.waitFor("> slow one")
    expect(recap).toContain("the last turns:")
    expect(recap).toContain("> make a")
    expect(recap).toContain("Wrote a.txt. [1 tool call]")
    await tty.waitFor("(no answer)")
    tty.type("/clear\r")
    await tty.waitFor("new session ")
    tty.type("/resume nosuch\r")
    await tty.waitFor("error: no session nosuch")
    // The start of an id is enough when only one session starts so.
    tty.type(`/resume ${sessionId.slice(0, 8)}\r`)
    await tty.waitFor(`session ${sessionId}`)

    tty.type("\u0004")
    expect(await tty.closed).toBe(0)
    // The first session: moved back to before "change a" (which stays in the log, on the branch the
    // restore left), then the interrupted turn's prompt on the branch it went on with.
    const after = await readLog(sessions, sessionId)
    expect(after.at(-1)!.event).toMatchObject({ _tag: "UserMessage", content: "slow one" })
    expect(after.some((stored) => stored.event._tag === "UserMessage" && stored.event.content === "change a")).toBe(true)
    const branch = Session.fold(after).messages.toArray().map((entry) => entry.event)
    expect(branch.some((event) => event._tag === "UserMessage" && event.content === "change a")).toBe(false)
  })

  it("/undo of a turn and of a restore, /redo, /tree's navigator (arrows, Enter, l) with a branch, /label, /switch: the files follow", async () => {
    const workdir = tempDir("tty-tree-work")
    const sessions = tempDir("tty-tree-sessions")
    const turns = join(tempDir("tty-tree-turns"), "turns.json")
    writeFileSync(turns, JSON.stringify([
      write("a.txt", "one\n"),
      { text: "Wrote a.txt." },
      write("a.txt", "two\n"),
      { text: "Changed a.txt." },
      write("b.txt", "other\n"),
      { text: "Wrote b.txt instead." }
    ]))
    const tty = terminal(["--model", `scripted:${turns}`, "--checkpointer", `file:${sessions}`, "--workdir", workdir, ...UNATTENDED])
    const file = (name: string) => (existsSync(join(workdir, name)) ? readFileSync(join(workdir, name), "utf8") : undefined)
    await tty.waitFor("> ")
    tty.type("make a\r")
    await tty.waitFor("out tokens]")
    tty.type("change a\r")
    await tty.waitFor("out tokens]")
    expect(file("a.txt")).toBe("two\n")

    // Nothing moved yet: /undo undoes the last turn, with its plan first.
    tty.type("/undo\r")
    const plan = await tty.waitFor("restore? y/n ")
    expect(plan).toContain('undo the last turn ("change a")')
    expect(plan).toContain("a.txt: put back")
    tty.type("y")
    await tty.waitFor("conversation cut back")
    expect(file("a.txt")).toBe("one\n")

    // Right after that, /undo undoes the restore itself; /redo does it again.
    tty.type("/undo --yes\r")
    await tty.waitFor("the conversation is the branch's")
    expect(file("a.txt")).toBe("two\n")
    tty.type("/redo --yes\r")
    await tty.waitFor("the conversation is the branch's")
    expect(file("a.txt")).toBe("one\n")

    // A new turn from there is a branch of its own.
    tty.type("something else\r")
    await tty.waitFor("Wrote b.txt instead.")
    await tty.waitFor("out tokens]")
    // /tree: the current branch flat, the branch the restore left parting after "make a", and
    // where the session is, selected; q leaves.
    tty.type("/tree\r")
    const tree = await tty.waitFor("q leaves")
    const lines = tree.slice(tree.lastIndexOf("/tree")).split(/\r?\n/).filter((line) => / \d\d:\d\d |tip \d+/.test(line))
    // The seq (right-aligned in four columns) and the time as one mark: the indents are what is checked.
    expect(lines.map((line) => line.replace(/(?: {3}\d| {2}\d{2}| \d{3}|\d{4}) {2}\d\d:\d\d/, "SEQ TIME").replace(/tip \d+/, "tip N"))).toEqual([
      '  SEQ TIME  "make a"',
      '  ╰─ SEQ TIME  "change a"',
      "     ○ tip N",
      '  SEQ TIME  "something else"',
      "▸ ● you are here (tip N)"
    ])
    const oldTip = Number(/○ tip (\d+)/.exec(tree)![1])
    tty.type("q")
    tty.type(`/label ${oldTip} first try\r`)
    await tty.waitFor(`seq ${oldTip} is "first try"`)
    tty.type(`/switch ${oldTip}\r`)
    const switchPlan = await tty.waitFor("switch? y/n ")
    expect(switchPlan).toContain("a.txt: put back")
    expect(switchPlan).toContain("b.txt: deleted")
    tty.type("n")
    await tty.waitFor("nothing was changed")

    // The same switch in the navigator: up twice to the other tip, Enter, then the plan and y.
    tty.type("/tree\r")
    await tty.waitFor("q leaves")
    tty.type("\u001b[A")
    await tty.waitFor("q leaves")
    tty.type("\u001b[A")
    const moved = await tty.waitFor("q leaves")
    expect(moved).toContain(`▸    ○ tip ${oldTip} [first try]`)
    tty.type("\r")
    await tty.waitFor("switch? y/n ")
    tty.type("y")
    await tty.waitFor("the conversation is the branch's")
    expect(file("a.txt")).toBe("two\n")
    expect(file("b.txt")).toBeUndefined()

    // l names the selected row: up four times to the first checkpoint (past the branch just left,
    // which now parts after it).
    tty.type("/tree\r")
    const after = await tty.waitFor("q leaves")
    expect(after).toContain(`▸ ● you are here (tip ${oldTip}) [first try]`)
    expect(after).toMatch(/╰─ +\d+ +\d\d:\d\d +"something else"/)
    for (let up = 0; up < 4; up++) {
      tty.type("\u001b[A")
      await tty.waitFor("q leaves")
    }
    tty.type("l")
    await tty.waitFor("(empty: none): ")
    tty.type("the start\r")
    await tty.waitFor('is "the start"')
    tty.type("/tree\r")
    expect(await tty.waitFor("q leaves")).toMatch(/\[the start\] "make a"/)
    tty.type("q")

    tty.type("/switch 99999 --yes\r")
    await tty.waitFor("not_a_branch")
    tty.type("/redo\r")
    await tty.waitFor("nothing to redo")

    // /fork --to: the files as they are now, written into a directory of their own; this one stays.
    const side = join(tempDir("tty-fork"), "side")
    tty.type(`/fork --to ${side}\r`)
    const forkPlan = await tty.waitFor("fork? y/n ")
    expect(forkPlan).toContain(`fork this session from its tip into ${side}:`)
    tty.type("y")
    await tty.waitFor(`/resume `)
    expect(readFileSync(join(side, "a.txt"), "utf8")).toBe("two\n")
    expect(file("a.txt")).toBe("two\n")
    // /fork <seq>: here, from before the first prompt — a.txt did not exist yet; /undo comes back.
    const makeA = Number(/(\d+) +\d\d:\d\d +"make a"/.exec(after)![1])
    tty.type(`/fork ${makeA} --yes\r`)
    await tty.waitFor("/undo goes back to where you were")
    expect(file("a.txt")).toBeUndefined()
    tty.type("/undo --yes\r")
    await tty.waitFor("the conversation is the branch's")
    expect(file("a.txt")).toBe("two\n")
    tty.type("/fork 0\r")
    await tty.waitFor("usage: /fork")
    tty.type("\u0004")
    expect(await tty.closed).toBe(0)
  })

  it("Ctrl-C twice at an empty prompt leaves (the first only says how)", async () => {
    const tty = terminal(["--model", `scripted:${join(root, "examples", "cli", "hello.json")}`, "--checkpointer", `file:${tempDir("tty-sessions")}`, "--workdir", tempDir("tty-work"), ...UNATTENDED])
    await tty.waitFor("> ")
    tty.type("\u0003")
    await tty.waitFor("(Ctrl-C again to exit, or Ctrl-D)")
    tty.type("\u0003")
    expect(await tty.closed).toBe(0)
  })

  it("Ctrl-C kills a running shell command; background tasks are shown as they start and end", async () => {
    const workdir = tempDir("tty-work")
    const turns = join(tempDir("tty-turns"), "turns.json")
    writeFileSync(turns, JSON.stringify([
      { toolCalls: [{ name: "shell", input: { command: "echo $$ > shell.pid; exec sleep 60" } }] },
      { toolCalls: [{ name: "shell", input: { command: "sleep 0.5; echo finished", background: true } }] },
      { text: "Started it." }
    ]))
    const tty = terminal(["--model", `scripted:${turns}`, "--checkpointer", `file:${tempDir("tty-sessions")}`, "--workdir", workdir, ...UNATTENDED])
    await tty.waitFor("> ")
    tty.type("run the long command\r")
    await tty.waitFor("→ shell")
    const pid = await pidWrittenTo(join(workdir, "shell.pid"))
    tty.type("\u0003")
    await tty.waitFor("(interrupted: the turn stopped; the next one goes on from the log)")
    expect(await goneWithin(pid, 5_000)).toBe(true)

    tty.type("start it in the background\r")
    await tty.waitFor("started: sleep 0.5; echo finished]")
    await tty.waitFor("Started it.")
    // Between turns, the completion is logged and shown.
    await tty.waitFor("ended: exit 0]")
    tty.type("\u0004")
    expect(await tty.closed).toBe(0)
  })
  it("a shell command's changes: /checkpoints lists them, the /restore plan says what it deletes, puts back and leaves, and y undoes them", async () => {
    const workdir = tempDir("tty-work")
    const sessions = tempDir("tty-sessions")
    writeFileSync(join(workdir, "kept.txt"), "kept\n")
    const command = "mkdir -p gen && echo x > gen/new.txt && echo changed > kept.txt && head -c 11000000 /dev/zero > big.bin"
    const turns = join(tempDir("tty-turns"), "turns.json")
    writeFileSync(turns, JSON.stringify([{ toolCalls: [{ name: "shell", input: { command } }] }, { text: "Done." }]))
    const tty = terminal(["--model", `scripted:${turns}`, "--checkpointer", `file:${sessions}`, "--workdir", workdir, ...UNATTENDED])
    await tty.waitFor("> ")
    tty.type("run it\r")
    await tty.waitFor("Done.")
    await tty.waitFor("out tokens]")
    tty.type("/checkpoints\r")
    const listed = await tty.waitFor("cannot restore: big.bin")
    expect(listed).toContain('"run it"  changed after: gen, gen/new.txt, kept.txt; cannot restore: big.bin')
    const seq = (await readLog(sessions)).find((stored) => stored.event._tag === "UserMessage")!.seq
    tty.type(`/restore ${seq}\r`)
    const plan = await tty.waitFor("restore? y/n")
    expect(plan).toContain("gen: deleted")
    expect(plan).toContain("gen/new.txt: deleted")
    expect(plan).toContain("kept.txt: put back")
    expect(plan).toContain("big.bin: left as it is (not covered: 11000000 bytes is larger than the capture's cap of 10485760 bytes)")
    tty.type("y")
    await tty.waitFor("restored: gen, gen/new.txt, kept.txt; conversation cut back")
    expect(readFileSync(join(workdir, "kept.txt"), "utf8")).toBe("kept\n")
    expect(readdirSync(workdir).sort()).toEqual(["big.bin", "kept.txt"])
    tty.type("\u0004")
    expect(await tty.closed).toBe(0)
  })

  it("a restore a crash cut short: /checkpoints says so, a turn is refused with the way out, /restore finishes it", async () => {
    const workdir = tempDir("tty-work")
    const sessions = tempDir("tty-sessions")
    const files = ["a.txt", "b.txt", "c.txt", "d.txt"]
    // Killed before its third file: a.txt and b.txt are back, c.txt and d.txt are not.
    const seq = await sessionWithInterruptedRestore({ backend: "file", location: sessions, workdir, sessionId: "s" }, files, "operation:3")

    const turns = join(tempDir("tty-turns"), "turns.json")
    writeFileSync(turns, JSON.stringify([{ text: "carried on" }]))
    const tty = terminal(["--model", `scripted:${turns}`, "--checkpointer", `file:${sessions}`, "--workdir", workdir, "--session", "s", ...UNATTENDED])
    await tty.waitFor("> ")
    tty.type("/checkpoints\r")
    await tty.waitFor(`a restore to checkpoint ${seq} was cut short (4 file(s), some may be half restored): /restore ${seq} finishes it, /restore --undo puts its files back`)
    tty.type("go on\r")
    await tty.waitFor("error: RestoreInterruptedError")
    await tty.waitFor(`(here: /restore ${seq} finishes it, /restore --undo puts its files back)`)
    tty.type(`/restore ${seq}\r`)
    const plan = await tty.waitFor("restore? y/n")
    expect(plan).toContain(`finishing the restore to checkpoint ${seq} that was cut short:`)
    expect(plan).toContain("a.txt: already back")
    expect(plan).toContain("c.txt: put back")
    tty.type("y")
    await tty.waitFor("[restore] finishing an interrupted restore: 2 file(s)")
    await tty.waitFor("restored: a.txt, b.txt, c.txt, d.txt; conversation cut back")
    for (const path of files) expect(readFileSync(join(workdir, path), "utf8")).toBe(`one ${path}\n`)
    tty.type("/restore --undo\r")
    await tty.waitFor("no restore of this session was cut short: nothing to undo")
    tty.type("go on\r")
    await tty.waitFor("carried on")
    tty.type("\u0004")
    expect(await tty.closed).toBe(0)
  })
})
