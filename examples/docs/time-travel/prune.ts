import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createLiteAgent, memoryCheckpointer, RestoreRefusedError } from "@lite-agent/sdk"
import { scripted } from "@lite-agent/provider"

const workdir = mkdtempSync(join(tmpdir(), "docs-prune-"))
const checkpointer = memoryCheckpointer()
const write = (content: string) => ({ toolCalls: [{ name: "write_file", input: { path: "plan.md", content } }] })
const agent = createLiteAgent({
  model: scripted([write("v1\n"), { text: "Wrote v1." }, write("v2\n"), { text: "Wrote v2." }, write("v2b\n"), { text: "Wrote v2b." }]),
  workdir,
  checkpointer,
  sessionId: "plans"
})

try {
  await agent.send("Write v1")
  await agent.send("Write v2")
  const [, second] = await agent.listCheckpoints("plans")
  await agent.restore("plans", second!.seq) // "Write v2" stays as a branch
  await agent.send("Write v2b instead")
  const before = await checkpointer.du({ branches: true })
  for (const branch of before.sessions[0]!.branches!) {
    console.log(`branch ${branch.tip}${branch.current ? " (current)" : ""}: ${branch.own.objects} object(s) only it holds`)
  }
  const report = await agent.pruneBranches({ olderThanMs: 0 }) // any branch left behind
  for (const session of report.sessions) {
    console.log(`${session.sessionId}: pruned ${session.pruned.map((branch) => branch.tip).join(", ")} (BranchesPruned at ${session.seq})`)
  }
  const tree = await agent.tree("plans")
  console.log(`branches: ${tree.branches.map((branch) => `${branch.leaf}${branch.pruned === true ? " (pruned)" : ""}${branch.current ? " (current)" : ""}`).join(", ")}`)
  console.log(`checkpoints: ${tree.checkpoints.map((checkpoint) => checkpoint.prompt).join(", ")}`)
  const pruned = tree.branches.find((branch) => branch.pruned === true)!
  try {
    await agent.switchBranch("plans", pruned.leaf)
  } catch (error) {
    if (error instanceof RestoreRefusedError) console.log(`switch to ${pruned.leaf}: ${error.refusals[0]!.reason}`)
  }
} finally {
  await agent.close()
  await checkpointer.close()
  rmSync(workdir, { recursive: true, force: true })
}
