import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createLiteAgent, memoryCheckpointer } from "@lite-agent/sdk"
import { scripted } from "@lite-agent/provider"

const workdir = mkdtempSync(join(tmpdir(), "docs-compact-work-"))
const answer = (text: string) => ({ text: `${text} ${"(a long explanation) ".repeat(40)}` })
const agent = createLiteAgent({
  model: scripted([
    answer("Planned the API."),
    answer("Wrote the handlers."),
    answer("Added the tests."),
    { text: "The user wants a REST API (plan, handlers, tests done); keep the API decisions." } // the summary
  ]),
  workdir,
  checkpointer: memoryCheckpointer()
})

try {
  for (const prompt of ["Plan a REST API.", "Write the handlers.", "Add tests."]) await agent.send(prompt)
  const run = agent.compact("keep the API decisions", { keepRecentTokens: 0 })
  for await (const event of run) console.log(event.phase, event.stage, event.completed ?? "", event.total ?? "", event.tokens ?? "")
  const { before, after, method, compacted } = await run // awaitable and iterable: use either or both
  console.log({ before, after, method, compacted })
} finally {
  await agent.close()
  rmSync(workdir, { recursive: true, force: true })
}
