import { execFileSync } from "node:child_process"
import { mkdtempSync, readdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { describe, expect, it } from "vitest"

const root = resolve(import.meta.dirname, "..")
/** Offline: without ANTHROPIC_API_KEY the examples use the scripted model. */
const offlineEnv = () => {
  const env = { ...process.env }
  delete env.ANTHROPIC_API_KEY
  return env
}
const runExample = (file: string, env: NodeJS.ProcessEnv = offlineEnv()) =>
  execFileSync(process.execPath, ["--import", "tsx", resolve(root, "examples", file)], { cwd: root, encoding: "utf8", env })

describe("examples", () => {
  it("promise-checkpointer.ts runs and shows the conflict and the truncate", () => {
    const output = runExample("promise-checkpointer.ts")
    expect(output).toContain("conflict: expected 2, actual 3")
    expect(output).toContain("after truncate: head 2")
  })

  it("effect-checkpointer.ts runs and lists the checkpoints with their files", () => {
    const output = runExample("effect-checkpointer.ts")
    expect(output).toContain("head 6, 4 messages")
    expect(output).toContain('checkpoint 1 "Fix the answer in src/answer.ts" files=[src/answer.ts]')
    expect(output).toContain('checkpoint 6 "Now add a test" files=[]')
  })

  it("time-travel.ts rolls files and conversation back, and refuses to overwrite a hand edit", () => {
    const output = runExample("time-travel.ts")
    expect(output).toContain('checkpoint 6: "Make it louder" files=[farewell.txt, greeting.txt]')
    expect(output).toContain("refused: farewell.txt modified_externally")
    expect(output).toContain("restored: farewell.txt, greeting.txt; conversation restored: true")
    expect(output).toContain('greeting.txt is now: "hello\\n"')
    expect(output).toContain("checkpoints left: Create the greeting")
  })

  it("agent-demo.ts (npm run demo): three prompts, checkpoints, restore to the second, resume in a new process", () => {
    const home = mkdtempSync(join(tmpdir(), "lite-agent-demo-test-home-"))
    const output = runExample("agent-demo.ts", { ...offlineEnv(), LITE_AGENT_HOME: home })
    expect(output).toContain("lite-agent demo (scripted model, offline)")
    expect(output).toContain("[tool] write_file src/greet.ts -> wrote src/greet.ts (57 bytes)")
    expect(output).toMatch(/seq {2}8 {2}"Add a farewell\(name\) function and a README.md that documents both."/)
    expect(output).toContain("restored files: README.md, src/greet.ts")
    expect(output).toContain('not undone (shell commands): {"command":"wc -l src/greet.ts"}')
    const after = output.slice(output.indexOf("Files after restore:"))
    expect(after).toContain("| export const greet = (name: string) => `Hello, ${name}!`")
    expect(after).not.toContain("farewell")
    expect(output).toMatch(/\[pid \d+\] session [0-9a-f-]+ has 1 checkpoint\(s\)/)
    expect(output).toContain("(the model was shown 5 messages, loaded from the persisted session)")
    // It used the default file checkpointer, under LITE_AGENT_HOME.
    expect(readdirSync(join(home, "sessions")).length).toBeGreaterThan(0)
  })

  it("agent-layers.ts runs one program on three backends by swapping layers", () => {
    const output = runExample("agent-layers.ts")
    for (const name of ["memory", "file  ", "sqlite"]) {
      expect(output).toContain(`${name}: Wrote hello.txt. (head 7; checkpoints: 2 hello.txt)`)
    }
  })
})
