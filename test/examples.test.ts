import { execFileSync } from "node:child_process"
import { resolve } from "node:path"
import { describe, expect, it } from "vitest"

const root = resolve(import.meta.dirname, "..")
const runExample = (file: string) =>
  execFileSync(process.execPath, ["--import", "tsx", resolve(root, "examples", file)], { cwd: root, encoding: "utf8" })

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
})
