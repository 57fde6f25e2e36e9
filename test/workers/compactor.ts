/**
 * Worker for test/compaction.processes.test.ts: compaction in a Node process of its own, to be
 * killed part-way. File checkpointer in `dir`, scripted model.
 *
 *   node --import tsx test/workers/compactor.ts '<json config>'
 *
 * - mode "setup": four prompts, each answered with a file write and some text; prints `ready`.
 * - mode "compact": prints `compacting`, then compacts (the summary arrives after `delayMs`),
 *   printing `compaction <phase> <stage>` per event and `result <json>` at the end.
 * - mode "continue": compacts (at once) and sends one more prompt; prints `result <json>`.
 */
import { createLiteAgent, fileCheckpointer } from "../../src/index.js"
import { scripted, type ScriptedTurn } from "../../src/provider.js"

interface Config {
  readonly mode: "setup" | "compact" | "continue"
  readonly dir: string
  readonly workdir: string
  readonly sessionId: string
  readonly delayMs?: number
}

const config = JSON.parse(process.argv[2] ?? "{}") as Config
const print = (line: string) => process.stdout.write(`${line}\n`)

const exchanges: Array<ScriptedTurn> = Array.from({ length: 4 }, (_, i) => [
  { toolCalls: [{ name: "write_file", input: { path: `f${i}.txt`, content: `version ${i}\n`.repeat(40) } }] },
  { text: `done ${i}: ${"details ".repeat(80)}` }
]).flat()
const summary: ScriptedTurn = { text: "SUMMARY: four files written.", ...(config.delayMs === undefined ? {} : { delayMs: config.delayMs }) }

const main = async () => {
  const checkpointer = fileCheckpointer({ dir: config.dir })
  const script = config.mode === "setup" ? exchanges : config.mode === "compact" ? [summary] : [summary, { text: "carried on" }]
  const agent = createLiteAgent({ model: scripted(script), workdir: config.workdir, checkpointer, sessionId: config.sessionId })
  agent.subscribe((event) => {
    if (event.type === "compaction") print(`compaction ${event.phase} ${event.stage}`)
  })
  if (config.mode === "setup") {
    for (let i = 0; i < 4; i++) await agent.send(`prompt ${i}`)
    print("ready")
  } else {
    print("compacting")
    const compacted = await agent.compact(undefined, { keepRecentTokens: 0 })
    print(`result ${JSON.stringify(config.mode === "compact" ? compacted : await agent.send("go on"))}`)
  }
  await agent.close()
  await checkpointer.close()
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
  process.exit(1)
})
