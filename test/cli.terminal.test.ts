/**
 * What a person at the keyboard sees and answers, in a real pseudo-terminal: the permission
 * prompt for a `shell` call (`n` denies and the command does not run, `a` stops asking, `Esc`
 * stops the turn), the diff an edit makes, text that streams before the turn ends, and colours
 * (none with NO_COLOR or --no-color).
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { fileCheckpointer, type PermissionDecided } from "../src/index.js"
import { tempDir } from "./support/agent.js"
import { terminal } from "./support/terminal.js"

const turnsFile = (turns: unknown) => {
  const file = join(tempDir("tty-turns"), "turns.json")
  writeFileSync(file, JSON.stringify(turns))
  return file
}
const shell = (command: string) => ({ toolCalls: [{ name: "shell", input: { command } }] })

// eslint-disable-next-line no-control-regex
const COLOUR = /\u001b\[[0-9;]*m/

const decisionsIn = async (sessions: string) => {
  const checkpointer = fileCheckpointer({ dir: sessions })
  try {
    const [session] = await checkpointer.list()
    return (await checkpointer.read(session!.id)).flatMap(({ event }) =>
      event._tag === "PermissionDecided" ? [(event satisfies PermissionDecided)] : []
    ).map((event) => `${event.toolName} ${event.behavior} ${event.decidedBy}${event.remember ? " remember" : ""}${event.interrupt ? " interrupt" : ""}`)
  } finally {
    await checkpointer.close()
  }
}

describe("the permission prompt", () => {
  it("n denies (the command does not run), a allows and stops asking, Esc denies and stops the turn; each decision is logged", async () => {
    const workdir = tempDir("tty-work")
    const sessions = tempDir("tty-sessions")
    const turns = turnsFile([
      shell("echo one > one.txt"),
      { text: "It was denied." },
      shell("echo two > two.txt"),
      { text: "Ran two." },
      shell("echo three > three.txt"),
      { text: "Ran three without asking." },
      { toolCalls: [{ name: "write_file", input: { path: "notes.md", content: "# Notes\nfirst\n" } }] },
      { text: "never reached: the turn stopped" }
    ])
    const tty = terminal(["--model", `scripted:${turns}`, "--checkpointer", `file:${sessions}`, "--workdir", workdir])
    await tty.waitFor("> ")

    tty.type("run one\r")
    const question = await tty.waitFor("Esc no, and stop the turn")
    expect(question).toContain("? shell echo one > one.txt")
    expect(question).toContain("allow? y yes · n no · t no, and tell it why · a always shell this session")
    tty.type("n")
    await tty.waitFor("denied")
    const denied = await tty.waitFor("out tokens]")
    expect(denied).toContain("permission denied: the user denied shell")
    expect(denied).toContain("It was denied.")
    expect(existsSync(join(workdir, "one.txt"))).toBe(false)

    tty.type("run two\r")
    await tty.waitFor("? shell echo two > two.txt")
    // The question's last line is shown once a key can answer it; a key typed before is the editor's.
    await tty.waitFor("Esc no, and stop the turn")
    tty.type("a")
    await tty.waitFor("allowed (and shell from now on, this session)")
    await tty.waitFor("Ran two.")
    await tty.waitFor("out tokens]")
    expect(readFileSync(join(workdir, "two.txt"), "utf8")).toBe("two\n")

    tty.type("run three\r")
    const third = await tty.waitFor("out tokens]")
    expect(third).not.toContain("allow?")
    expect(third).toContain("[allowed shell: remembered]")
    expect(third).toContain("Ran three without asking.")

    // A write asks too, showing the diff it would make; Esc refuses it and ends the turn.
    tty.type("write notes\r")
    const write = await tty.waitFor("Esc no, and stop the turn")
    expect(write).toContain("? write_file notes.md")
    expect(write).toContain("--- /dev/null")
    expect(write).toContain("+++ b/notes.md")
    expect(write).toContain("+# Notes")
    tty.type("\u001b")
    await tty.waitFor("denied; the turn stops")
    const stopped = await tty.waitFor("out tokens]")
    expect(stopped).not.toContain("never reached")
    expect(existsSync(join(workdir, "notes.md"))).toBe(false)
    tty.type("\u0004")
    expect(await tty.closed).toBe(0)

    expect(await decisionsIn(sessions)).toEqual([
      "shell deny callback",
      "shell allow callback remember",
      "shell allow remembered",
      "write_file deny callback interrupt"
    ])
  })

  it("t denies and tells the model why (a line typed there); a on an edit allows every file edit from then on", async () => {
    const workdir = tempDir("tty-work")
    const sessions = tempDir("tty-sessions")
    const turns = turnsFile([
      shell("rm -rf build"),
      { text: "Understood." },
      { toolCalls: [{ name: "write_file", input: { path: "a.txt", content: "a\n" } }, { name: "edit_file", input: { path: "a.txt", old_string: "a", new_string: "b" } }] },
      { text: "Edited." }
    ])
    const tty = terminal(["--model", `scripted:${turns}`, "--checkpointer", `file:${sessions}`, "--workdir", workdir])
    await tty.waitFor("> ")
    tty.type("clean up\r")
    await tty.waitFor("Esc no, and stop the turn")
    tty.type("t")
    await tty.waitFor("why (the model is told; Enter sends): ")
    tty.type("keep the build, it takes an hourx\u007f\r")
    await tty.waitFor("denied; the model is told why")
    const told = await tty.waitFor("out tokens]")
    expect(told).toContain("permission denied: the user denied shell: keep the build, it takes an hour; the tool did not run")
    tty.type("edit\r")
    const asked = await tty.waitFor("Esc no, and stop the turn")
    expect(asked).toContain("a always file edits this session")
    tty.type("a")
    await tty.waitFor("allowed (and file edits from now on, this session)")
    const edited = await tty.waitFor("out tokens]")
    expect(edited).toContain("[allowed edit_file: remembered]")
    expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe("b\n")
    tty.type("\u0004")
    expect(await tty.closed).toBe(0)
    expect(await decisionsIn(sessions)).toEqual(["shell deny callback", "write_file allow callback remember", "edit_file allow remembered"])
  })

  it("-p on a terminal asks too (on stderr); acceptEdits runs an edit without asking", async () => {
    const workdir = tempDir("tty-work")
    writeFileSync(join(workdir, "a.txt"), "one\ntwo\nthree\n")
    const turns = turnsFile([
      { toolCalls: [{ name: "edit_file", input: { path: "a.txt", old_string: "two", new_string: "TWO" } }] },
      shell("echo hi > hi.txt"),
      { text: "Edited." }
    ])
    const tty = terminal([
      "-p",
      "edit it",
      "--model",
      `scripted:${turns}`,
      "--checkpointer",
      `file:${tempDir("tty-sessions")}`,
      "--workdir",
      workdir,
      "--permission-mode",
      "acceptEdits"
    ])
    const asked = await tty.waitFor("Esc no, and stop the turn")
    expect(asked).toContain("? shell echo hi > hi.txt")
    tty.type("y")
    await tty.waitFor("allowed")
    await tty.waitFor("Edited.")
    expect(await tty.closed).toBe(0)
    expect(readFileSync(join(workdir, "hi.txt"), "utf8")).toBe("hi\n")
    expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe("one\nTWO\nthree\n")
  })
})

describe("-p with stderr sent to a file", () => {
  it("still asks on the terminal (the question waits for a key there), and the file has it too", async () => {
    const workdir = tempDir("tty-work")
    const errors = join(tempDir("tty-stderr"), "errors.log")
    const turns = turnsFile([shell("echo hi > hi.txt"), { text: "Ran it." }])
    const tty = terminal(["-p", "run it", "--model", `scripted:${turns}`, "--checkpointer", `file:${tempDir("tty-sessions")}`, "--workdir", workdir], {}, {
      stderrTo: errors
    })
    const asked = await tty.waitFor("Esc no, and stop the turn")
    expect(asked).toContain("? shell echo hi > hi.txt")
    tty.type("y")
    await tty.waitFor("Ran it.")
    expect(await tty.closed).toBe(0)
    expect(readFileSync(join(workdir, "hi.txt"), "utf8")).toBe("hi\n")
    expect(readFileSync(errors, "utf8")).toContain("? shell echo hi > hi.txt")
  })
})

describe("prompts and sessions", () => {
  it("a trailing \\ and a paste stay one prompt (Ctrl-C drops one begun); --continue recaps the last turns; /resume alone picks a session with the arrows", async () => {
    const sessions = tempDir("tty-sessions")
    const workdir = tempDir("tty-work")
    const common = ["--checkpointer", `file:${sessions}`, "--workdir", workdir, "--permission-mode", "plan"]
    const first = terminal([...common, "--model", `scripted:${turnsFile([{ text: "Got both lines." }, { text: "Got the paste." }])}`])
    await first.waitFor("> ")
    // Ctrl-C drops a prompt begun.
    first.type("dropped line \\\r")
    await first.waitFor("… ")
    first.type("\u0003")
    await first.waitFor("(the prompt begun is dropped)")
    first.type("first line \\\r")
    await first.waitFor("… ")
    first.type("second line\r")
    await first.waitFor("Got both lines.")
    await first.waitFor("out tokens]")
    first.type("\u001b[200~pasted one\rpasted two\u001b[201~")
    first.type("\r")
    await first.waitFor("Got the paste.")
    await first.waitFor("out tokens]")
    first.type("\u0004")
    expect(await first.closed).toBe(0)
    const checkpointer = fileCheckpointer({ dir: sessions })
    const [firstSession] = await checkpointer.list()
    const prompts = (await checkpointer.read(firstSession!.id)).flatMap(({ event }) => event._tag === "UserMessage" ? [event.content] : [])
    await checkpointer.close()
    expect(prompts).toEqual(["first line \nsecond line", "pasted one\npasted two"])

    const second = terminal([...common, "--model", `scripted:${turnsFile([{ text: "Another session." }])}`, "--continue"])
    const recap = await second.waitFor("Got the paste.")
    expect(recap).toContain(`session ${firstSession!.id}`)
    expect(recap).toContain("the last turns:")
    expect(recap).toContain("> first line second line")
    expect(recap).toContain("Got both lines.")
    expect(recap).toContain("> pasted one pasted two")
    second.type("/clear\r")
    await second.waitFor("new session ")
    second.type("another\r")
    await second.waitFor("Another session.")
    await second.waitFor("out tokens]")
    // The picker starts on the current session (the most recent); ↓ selects the first one.
    second.type("/resume\r")
    const picker = await second.waitFor("Enter resumes that session")
    expect(picker).toMatch(/▸ [0-9a-f]{8} .*"another" {2}\(current\)/)
    expect(picker).toContain(`  ${firstSession!.id.slice(0, 8)}`)
    second.type("\u001b[B")
    await second.waitFor(`▸ ${firstSession!.id.slice(0, 8)}`)
    second.type("\r")
    await second.waitFor(`session ${firstSession!.id}`)
    await second.waitFor("> pasted one pasted two")
    second.type("\u0004")
    expect(await second.closed).toBe(0)
  })
})

describe("the screen", () => {
  it("an edit is shown as a unified diff; colours on a terminal, none with NO_COLOR or --no-color", async () => {
    const run = async (extraArgs: ReadonlyArray<string>, env: NodeJS.ProcessEnv) => {
      const workdir = tempDir("tty-work")
      writeFileSync(join(workdir, "a.txt"), "one\ntwo\nthree\n")
      const turns = turnsFile([
        { toolCalls: [{ name: "edit_file", input: { path: "a.txt", old_string: "two", new_string: "TWO" } }] },
        { text: "Changed two." }
      ])
      const tty = terminal(
        ["--model", `scripted:${turns}`, "--checkpointer", `file:${tempDir("tty-sessions")}`, "--workdir", workdir, "--permission-mode", "acceptEdits", ...extraArgs],
        env
      )
      await tty.waitFor("> ")
      tty.type("change two\r")
      const shown = await tty.waitFor("out tokens]")
      tty.type("\u0004")
      expect(await tty.closed).toBe(0)
      return { shown, raw: tty.raw() }
    }
    const coloured = await run([], { NO_COLOR: undefined })
    // While the model works, the spinner: elapsed time, and the tokens so far once there are some.
    expect(coloured.shown).toMatch(/⠋ thinking \d+\.\ds/)
    expect(coloured.shown).toMatch(/running edit_file \d+\.\ds · \d+ tokens/)
    expect(coloured.shown).toContain("--- a/a.txt")
    expect(coloured.shown).toContain("+++ b/a.txt")
    expect(coloured.shown).toContain("@@ -1,3 +1,3 @@")
    expect(coloured.shown).toMatch(/ one\n\s+-two\n\s+\+TWO\n\s+ three/)
    expect(coloured.raw).toMatch(COLOUR)
    expect(coloured.raw).toContain("\u001b[31m-two\u001b[39m")
    expect(coloured.raw).toContain("\u001b[32m+TWO\u001b[39m")

    for (const [args, env] of [[[], { NO_COLOR: "1" }], [["--no-color"], { NO_COLOR: undefined }]] as const) {
      const plain = await run(args, env)
      expect(plain.shown).toContain("-two")
      expect(plain.shown).toMatch(/thinking \d+\.\ds/)
      expect(plain.raw).not.toMatch(COLOUR)
    }
  })

  it("streamed text appears before the turn ends (the scripted model holds the last piece); Ctrl-C stops it there", async () => {
    const turns = turnsFile([{ text: "Thinking out loud, and the LAST-WORD", chunkDelayMs: 60_000 }])
    const tty = terminal([
      "--model",
      `scripted:${turns}`,
      "--checkpointer",
      `file:${tempDir("tty-sessions")}`,
      "--workdir",
      tempDir("tty-work"),
      "--permission-mode",
      "plan"
    ])
    await tty.waitFor("> ")
    tty.type("think\r")
    // The first piece is on the screen while the model is still answering.
    await tty.waitFor("Thinking ")
    expect(tty.screen()).not.toContain("LAST-WORD")
    expect(tty.screen()).not.toContain("out tokens]")
    tty.type("\u0003")
    await tty.waitFor("(interrupted: the turn stopped")
    tty.type("\u0004")
    expect(await tty.closed).toBe(0)
  })
})
