import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createLiteAgent, memoryCheckpointer } from "@lite-agent/sdk"
import { scripted } from "@lite-agent/provider"

const workdir = mkdtempSync(join(tmpdir(), "docs-tree-"))
const side = join(mkdtempSync(join(tmpdir(), "docs-tree-side-")), "side")
const checkpointer = memoryCheckpointer()
const write = (content: string) => ({ toolCalls: [{ name: "write_file", input: { path: "plan.md", content } }] })
const agent = createLiteAgent({
  model: scripted([write("v1\n"), { text: "Wrote v1." }, write("v2\n"), { text: "Wrote v2." }, write("v2b\n"), { text: "Wrote v2b." }]),
  workdir,
  checkpointer,
  sessionId: "plans"
})
const plan = (dir = workdir) => readFileSync(join(dir, "plan.md"), "utf8").trim()

try {
  await agent.send("Write v1")
  await agent.send("Write v2")
  const [, second] = await agent.listCheckpoints("plans")
  await agent.restore("plans", second!.seq) // back to v1; "Write v2" stays in the log as a branch
  await agent.send("Write v2b instead") // a second branch from the same point
  const tree = await agent.tree("plans")
  for (const checkpoint of tree.checkpoints) {
    console.log(`${checkpoint.current ? "*" : " "} ${checkpoint.seq} ${checkpoint.prompt} → after it: [${checkpoint.children.join(", ")}]`)
  }
  console.log(`branches: ${tree.branches.map((branch) => `${branch.leaf}${branch.current ? " (current)" : ""}`).join(", ")}`)

  await agent.undo("plans") // back to the "Write v2" branch: conversation and files
  console.log(`after undo: ${plan()}`)
  await agent.redo("plans")
  console.log(`after redo: ${plan()}`)

  // A fork of the tip into a directory of its own, to run beside this one.
  const fork = await agent.fork("plans", undefined, { workdir: side })
  console.log(`a fork of ${fork.forkedFrom.session} (its first ${fork.forkedFrom.at} events shared) in side/: ${plan(side)}`)
  await checkpointer.delete(fork.sessionId) // a fork goes before the session it shares events with
} finally {
  await agent.close()
  await checkpointer.close()
  rmSync(workdir, { recursive: true, force: true })
  rmSync(join(side, ".."), { recursive: true, force: true })
}
