import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createLiteAgent, memoryCheckpointer } from "@lite-agent/sdk"
import { scripted } from "@lite-agent/provider"

const workdir = mkdtempSync(join(tmpdir(), "docs-time-travel-"))
const checkpointer = memoryCheckpointer()
const write = (path: string, content: string) => ({ name: "write_file", input: { path, content } })
const agent = createLiteAgent({
  model: scripted([
    { toolCalls: [write("greeting.txt", "hello\n")] },
    { text: "Created greeting.txt." },
    { toolCalls: [write("greeting.txt", "HELLO!!!\n"), { name: "shell", input: { command: "date > built.txt" } }] },
    { text: "Made it louder." }
  ]),
  workdir,
  checkpointer
})

try {
  await agent.send("Create greeting.txt")
  await agent.send("Make it louder")
  const checkpoints = await agent.listCheckpoints(agent.sessionId) // { seq, prompt, ts, files, unavailableFiles, notCovered }[]
  const louder = checkpoints[1]!.seq
  const dryRun = await agent.restore(agent.sessionId, louder, { dryRun: true }) // the plan; changes nothing
  console.log(dryRun.plan, dryRun.refusals)
  const result = await agent.restore(agent.sessionId, louder)
  // { restoredFiles, conversationRestored, unverifiedFiles, commandsNotUndone, notCovered, dryRun, plan, refusals }
  console.log(result.restoredFiles, result.conversationRestored, result.commandsNotUndone)
  console.log(`greeting.txt: ${JSON.stringify(readFileSync(join(workdir, "greeting.txt"), "utf8"))}`)
} finally {
  await agent.close()
  await checkpointer.close()
  rmSync(workdir, { recursive: true, force: true })
}
