import { execFile } from "node:child_process"
import { promisify } from "node:util"
import { mkdtempSync, readdirSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { describe, expect, it } from "vitest"
import { reply, startFakeAnthropic } from "./support/fakeAnthropic.js"
import { offlineEnv } from "./support/offline.js"

const root = resolve(import.meta.dirname, "..")
const execFileAsync = promisify(execFile)
// Asynchronous: a worker held by a synchronous child misses its test runner's replies under load.
const runExample = async (file: string, env: NodeJS.ProcessEnv = offlineEnv()) =>
  (await execFileAsync(process.execPath, ["--import", "tsx", resolve(root, "examples", file)], { cwd: root, encoding: "utf8", env })).stdout

/** The demo output the README shows: the ```text block after its marker comment. */
const readmeDemoOutput = (): string => {
  const readme = readFileSync(join(root, "README.md"), "utf8")
  const block = /<!-- npm run demo's output[^\n]*-->\n```text\n([\s\S]*?)^```$/m.exec(readme)
  if (block === null) throw new Error("README.md has no marked demo output block")
  return block[1]!
}

/** What differs between two runs of the demo: session ids, pids, temporary paths. */
const normalizeDemoOutput = (output: string): string =>
  output
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, "<session id>")
    .replace(/\[pid \d+\]/g, "[pid <pid>]")
    .replace(/\S*?(lite-agent-demo-(?:home-)?)[A-Za-z0-9]{6}\b/g, "<tmp>/$1XXXXXX")

describe("examples", () => {
  it("promise-checkpointer.ts runs and shows the conflict and the truncate", async () => {
    const output = await runExample("promise-checkpointer.ts")
    expect(output).toContain("conflict: expected 2, actual 3")
    expect(output).toContain("after truncate: head 2")
  })

  it("effect-checkpointer.ts runs and lists the checkpoints with their files", async () => {
    const output = await runExample("effect-checkpointer.ts")
    expect(output).toContain("head 6, 4 messages")
    expect(output).toContain('checkpoint 1 "Fix the answer in src/answer.ts" files=[src/answer.ts]')
    expect(output).toContain('checkpoint 6 "Now add a test" files=[]')
  })

  it("time-travel.ts rolls files and conversation back, and refuses to overwrite a hand edit", async () => {
    const output = await runExample("time-travel.ts")
    expect(output).toContain('checkpoint 6: "Make it louder" files=[farewell.txt, greeting.txt]')
    expect(output).toContain("refused: farewell.txt modified_externally")
    expect(output).toContain("restored: farewell.txt, greeting.txt; conversation restored: true")
    expect(output).toContain('greeting.txt is now: "hello\\n"')
    expect(output).toContain("checkpoints left: Create the greeting")
  })

  it("agent-demo.ts (npm run demo): three prompts, checkpoints, restore to the second, resume in a new process", async () => {
    // The prefix the demo gives its own LITE_AGENT_HOME, so that the output is what `npm run demo` prints.
    const home = mkdtempSync(join(tmpdir(), "lite-agent-demo-home-"))
    const output = await runExample("agent-demo.ts", offlineEnv({ LITE_AGENT_HOME: home }))
    expect(output).toContain("lite-agent demo (scripted model, offline)")
    expect(output).toContain("[tool] write_file src/greet.ts -> wrote src/greet.ts (57 bytes)")
    expect(output).toMatch(/seq 11 {2}"Add a farewell\(name\) function and a README.md that documents both."/)
    // It compacted once, printing the stages, then the restore cut the Compaction with the rest.
    expect(output).toContain("[compaction] start measure")
    expect(output).toMatch(/\[compaction\] progress archive 15\/15/)
    expect(output).toContain("[compaction] done persist")
    expect(output).toMatch(/\{ before: (\d+), after: (\d+) \} tokens; one Compaction event written, nothing deleted/)
    const [, tokensBefore, tokensAfter] = /\{ before: (\d+), after: (\d+) \}/.exec(output)!
    expect(Number(tokensAfter)).toBeLessThan(Number(tokensBefore))
    expect(output).toContain("restored files: README.md, src/greet.ts")
    // The workspace capture covered the shell command: nothing is left not undone.
    expect(output).toContain("not undone (shell commands): -")
    const after = output.slice(output.indexOf("Files after restore:"))
    expect(after).toContain("| export const greet = (name: string) => `Hello, ${name}!`")
    expect(after).not.toContain("farewell")
    expect(output).toMatch(/\[pid \d+\] session [0-9a-f-]+ has 1 checkpoint\(s\)/)
    expect(output).toContain("(the model was shown 5 messages, loaded from the persisted session)")
    // It used the default file checkpointer, under LITE_AGENT_HOME.
    expect(readdirSync(join(home, "sessions")).length).toBeGreaterThan(0)
    // The README shows this very output.
    expect(normalizeDemoOutput(readmeDemoOutput())).toBe(normalizeDemoOutput(output))
  })

  it("agent-layers.ts runs one program on three backends by swapping layers", async () => {
    const output = await runExample("agent-layers.ts")
    for (const name of ["memory", "file  ", "sqlite"]) {
      expect(output).toContain(`${name}: Wrote hello.txt. (head 9; checkpoints: 3 hello.txt)`)
    }
  })

  it("agent-demo.ts with ANTHROPIC_API_KEY runs the same script through the Anthropic provider (fake server)", async () => {
    const server = await startFakeAnthropic()
    try {
      const use = (id: string, name: string, input: Record<string, unknown>) => ({ type: "tool_use" as const, id, name, input })
      server.enqueue(
        reply.message([use("toolu_1", "write_file", { path: "src/greet.ts", content: "export const greet = 1\n" })]),
        reply.text("Created it."),
        reply.message([use("toolu_2", "write_file", { path: "README.md", content: "# greet\n" })]),
        reply.text("Added the README."),
        reply.message([use("toolu_3", "delete_file", { path: "README.md" }), use("toolu_4", "shell", { command: "wc -l src/greet.ts" })]),
        reply.text("Deleted it."),
        reply.text("The user built src/greet.ts and deleted the README."),
        reply.text("We built src/greet.ts.")
      )
      server.countTokensWith((body) => Math.ceil(JSON.stringify(body).length / 4))
      const home = mkdtempSync(join(tmpdir(), "lite-agent-demo-live-home-"))
      const { stdout } = await execFileAsync(process.execPath, ["--import", "tsx", resolve(root, "examples", "agent-demo.ts")], {
        cwd: root,
        env: offlineEnv({ LITE_AGENT_HOME: home, ANTHROPIC_API_KEY: "sk-demo-test", ANTHROPIC_BASE_URL: server.url })
      })
      expect(stdout).toContain("lite-agent demo (Anthropic)")
      expect(stdout).toContain("[tool] write_file src/greet.ts -> wrote src/greet.ts (23 bytes)")
      expect(stdout).toContain("restored files: README.md")
      expect(stdout).toContain("We built src/greet.ts.")
      // Eight model calls (the sixth summarizes), the last from the resuming process, which sent the persisted conversation.
      // Compaction counted with count_tokens, before and after.
      expect(stdout).toMatch(/\[compaction\] progress measure \d+ tokens \(measured\)/)
      expect(stdout).toMatch(/\[compaction\] progress project \d+ tokens \(measured\)/)
      expect(stdout).toContain("[compaction] done")
      const counts = server.requests.filter((request) => request.path === "/v1/messages/count_tokens")
      expect(counts).toHaveLength(2)
      const requests = server.requests.filter((request) => request.path === "/v1/messages")
      expect(requests.length).toBe(8)
      expect(server.requests.every((request) => request.headers["x-api-key"] === "sk-demo-test")).toBe(true)
      const summarizer = JSON.stringify(requests[6]!.body)
      expect(summarizer).toContain("keep the function names")
      expect(summarizer).not.toContain('"tools"')
      const last = JSON.stringify(requests[7]!.body)
      expect(last).toContain("Create src/greet.ts exporting greet(name)")
      expect(last).toContain("What have we built so far?")
    } finally {
      await server.close()
    }
  })
})
