import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createLiteAgent, fileCheckpointer } from "@lite-agent/sdk"
import { scripted } from "@lite-agent/provider"

const workdir = mkdtempSync(join(tmpdir(), "lite-agent-sample-work-"))
const sessions = mkdtempSync(join(tmpdir(), "lite-agent-sample-sessions-"))
const checkpointer = fileCheckpointer({ dir: sessions }) // without it: fileCheckpointer() in ~/.lite-agent/sessions
const write = (path: string, content: string) => ({ toolCalls: [{ name: "write_file", input: { path, content } }] })

const agent = createLiteAgent({
  model: scripted([ // offline, one turn per model call; for Claude: anthropic()
    write("src/auth.ts", "export const login = async () => true\n"),
    { text: "src/auth.ts now uses async/await." },
    write("src/auth.test.ts", "// tests for login\n"),
    { text: "Added src/auth.test.ts." }
  ]),
  modelName: "claude-sonnet-4-6",
  workdir,
  checkpointer
})

try {
  await agent.send("Refactor src/auth.ts to use async/await.")
  const result = await agent.send("Now add tests for it.") // same session, full context
  console.log(result.text, result.toolCalls, result.usage, result.sessionId, result.head)
} finally {
  await agent.close() // a checkpointer you pass stays open: close it too
  await checkpointer.close()
  for (const dir of [workdir, sessions]) rmSync(dir, { recursive: true, force: true })
}
