import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createLiteAgent, memoryCheckpointer } from "@lite-agent/sdk"
import { scripted } from "@lite-agent/provider"

const workdir = mkdtempSync(join(tmpdir(), "docs-permissions-"))
const checkpointer = memoryCheckpointer()
const shell = (command: string) => ({ name: "shell", input: { command } })
const agent = createLiteAgent({
  model: scripted([{ toolCalls: [shell("rm -rf build"), shell("echo status"), shell("echo again")] }, { text: "Done." }]),
  workdir,
  checkpointer,
  permissionMode: "acceptEdits", // file tools run; shell is asked about
  canUseTool: async (toolName, input) => {
    const command = String((input as { command?: unknown }).command)
    console.log(`asked: ${toolName} ${command}`)
    return command.startsWith("rm ")
      ? { behavior: "deny", message: "no deleting today" }
      : { behavior: "allow", remember: true } // shell is not asked about again in this session
  }
})

try {
  const result = await agent.send("Check the status, then clean up.")
  for (const call of result.toolCalls) console.log(`${JSON.stringify(call.input)} -> ${call.output.split("\n")[0]}`)
  for (const { event } of await checkpointer.read(agent.sessionId)) {
    if (event._tag === "PermissionDecided") console.log(event.toolName, event.behavior, "by", event.decidedBy, event.message ?? "")
  }
} finally {
  await agent.close()
  await checkpointer.close()
  rmSync(workdir, { recursive: true, force: true })
}
