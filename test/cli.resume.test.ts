/**
 * `lite-agent --resume` in a real pseudo-terminal: the picker opens before the first prompt with
 * this directory's sessions only (a fork says whose), `a` shows every directory's, Enter resumes
 * one with its recap, Esc starts a new session instead. Sessions made through the library, as an
 * app over the same store would.
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { createLiteAgent, fileCheckpointer } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { tempDir } from "./support/agent.js"
import { terminal } from "./support/terminal.js"

const UNATTENDED = ["--permission-mode", "bypassPermissions"]

/** A session of one prompt over `workdir`; its id. */
const sessionIn = async (sessions: string, workdir: string, prompt: string) => {
  const checkpointer = fileCheckpointer({ dir: sessions })
  const agent = createLiteAgent({ model: scripted([{ text: `answered: ${prompt}` }]), workdir, checkpointer })
  try {
    await agent.send(prompt)
    return agent.sessionId
  } finally {
    await agent.close()
    await checkpointer.close()
  }
}

describe("lite-agent --resume", () => {
  it("opens a picker of this directory's sessions (a fork says whose), a shows every directory's, Enter resumes one", async () => {
    const sessions = tempDir("tty-resume-sessions")
    const here = tempDir("tty-resume-here")
    const elsewhere = tempDir("tty-resume-elsewhere")
    const first = await sessionIn(sessions, here, "the first one here")
    await sessionIn(sessions, elsewhere, "one in another directory")
    // A fork of the first, in this directory.
    const checkpointer = fileCheckpointer({ dir: sessions })
    const agent = createLiteAgent({ model: scripted([]), workdir: here, checkpointer })
    const fork = (await agent.fork(first)).sessionId
    await agent.close()
    await checkpointer.close()

    const turns = join(tempDir("tty-resume-turns"), "turns.json")
    writeFileSync(turns, JSON.stringify([{ text: "carried on" }]))
    const tty = terminal(["--model", `scripted:${turns}`, "--checkpointer", `file:${sessions}`, "--workdir", here, "--resume", ...UNATTENDED])
    const picker = await tty.waitFor("q or Esc leaves")
    expect(picker).toContain("sessions of ")
    expect(picker).toContain('"the first one here"')
    expect(picker).toContain(`(fork of ${first.slice(0, 8)})`)
    expect(picker).not.toContain("one in another directory")
    // a: every directory's, the other one's said to be elsewhere.
    tty.type("a")
    const everywhere = await tty.waitFor("q or Esc leaves")
    expect(everywhere).toContain("sessions of every directory:")
    expect(everywhere).toMatch(/"one in another directory" {2}in /)
    tty.type("a")
    const back = await tty.waitFor("q or Esc leaves")
    expect(back).not.toContain("one in another directory")
    // Most recently written first (the fork's source is written too, by the fork): the first
    // session's row is reached with the arrows, and Enter resumes it with its recap.
    const rows = back.split("\n").filter((line) => /^[▸ ] [0-9a-f]{8} /.test(line))
    expect(rows.map((line) => line.slice(2, 10)).sort()).toEqual([first.slice(0, 8), fork.slice(0, 8)].sort())
    expect(rows[0]!.startsWith("▸")).toBe(true)
    for (let down = rows.findIndex((line) => line.slice(2, 10) === first.slice(0, 8)); down > 0; down--) {
      tty.type("\u001b[B")
      await tty.waitFor("q or Esc leaves")
    }
    tty.type("\r")
    await tty.waitFor(`session ${first}`)
    await tty.waitFor("answered: the first one here")
    await tty.waitFor("> ")
    tty.type("go on\r")
    await tty.waitFor("carried on")
    tty.type("\u0004")
    expect(await tty.closed).toBe(0)

    // Esc leaves the picker: a new session starts.
    const fresh = terminal(["--model", `scripted:${turns}`, "--checkpointer", `file:${sessions}`, "--workdir", here, "--resume", ...UNATTENDED])
    await fresh.waitFor("q or Esc leaves")
    fresh.type("q")
    await fresh.waitFor("a new session: ")
    fresh.type("\u0004")
    expect(await fresh.closed).toBe(0)
  })

  it("--session with an unknown id exits 2 before anything starts, naming the closest", async () => {
    const sessions = tempDir("tty-resume-sessions")
    const here = tempDir("tty-resume-here")
    const id = await sessionIn(sessions, here, "the only one")
    const turns = join(tempDir("tty-resume-turns"), "turns.json")
    writeFileSync(turns, JSON.stringify([{ text: "never" }]))
    const tty = terminal(["--model", `scripted:${turns}`, "--checkpointer", `file:${sessions}`, "--workdir", here, "--session", `${id}x`, ...UNATTENDED])
    await tty.waitFor(`no session ${id}x in this store; the closest: ${id}`)
    expect(await tty.closed).toBe(2)
  })
})
