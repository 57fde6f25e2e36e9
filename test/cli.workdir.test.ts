/**
 * The CLI says which directory a session belongs to (`--session`, `--continue`, `/resume`), and a
 * session of another directory is refused there until `--rehome` moves it (the issue: a fork
 * written elsewhere, resumed in the source's directory, took every difference for the user's edits).
 */
import { writeFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { createLiteAgent, fileCheckpointer } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { tempDir } from "./support/agent.js"
import { terminal } from "./support/terminal.js"

const UNATTENDED = ["--permission-mode", "bypassPermissions"]

describe("a session's workdir in the terminal", () => {
  it("/resume of a fork written elsewhere says where it belongs and refuses its turn; --rehome moves it here", async () => {
    const home = tempDir("cli-home")
    const sessions = tempDir("cli-sessions")
    const forkDir = join(tempDir("cli-forks"), "f")
    const agent = createLiteAgent({
      model: scripted([{ toolCalls: [{ name: "write_file", input: { path: "a.txt", content: "one\n" } }] }, { text: "wrote" }]),
      workdir: home,
      checkpointer: fileCheckpointer({ dir: sessions }),
      sessionId: "s"
    })
    await agent.send("write a")
    await agent.fork("s", undefined, { id: "f", workdir: forkDir })
    await agent.close()
    const turns = join(tempDir("cli-turns"), "turns.json")
    writeFileSync(turns, JSON.stringify([{ text: "went on here" }]))
    const common = ["--model", `scripted:${turns}`, "--checkpointer", `file:${sessions}`, "--workdir", home, ...UNATTENDED]

    const tty = terminal([...common, "--session", "s"])
    expect(await tty.waitFor(`its workdir: ${home}`)).toContain("session s")
    await tty.waitFor("> ")
    tty.type("/resume f\r")
    await tty.waitFor("session f")
    const warning = await tty.waitFor("refused here")
    expect(warning).toContain(`this session belongs to ${forkDir}, not this directory (${home})`)
    tty.type("go on\r")
    const refused = await tty.waitFor("--rehome to move the session here")
    expect(refused).toContain(`session "f" belongs to workdir ${forkDir}, not ${home}`)
    tty.type("\u0004")
    expect(await tty.closed).toBe(0)

    const moved = terminal([...common, "--session", "f", "--rehome"])
    await moved.waitFor("--rehome: its next turn or move makes this directory its workdir")
    await moved.waitFor("> ")
    moved.type("go on\r")
    await moved.waitFor("went on here")
    await moved.waitFor("out tokens]")
    moved.type("\u0004")
    expect(await moved.closed).toBe(0)
    const checkpointer = fileCheckpointer({ dir: sessions })
    try {
      const workdirs = (await checkpointer.read("f")).flatMap((stored) =>
        stored.event._tag === "SessionMetadata" && stored.event.workdir !== undefined ? [stored.event.workdir] : []
      )
      expect(workdirs.at(-1)).toBe(home)
    } finally {
      await checkpointer.close()
    }
  })
})
