/**
 * The main demo, offline: an agent with the scripted model and the default file checkpointer
 * works in a fresh temporary directory — three prompts that create and edit files — then the
 * conversation is compacted (its events printed as they come), the checkpoints are listed, the
 * session is restored to the second one (files and conversation; the compaction is cut with
 * the rest), and a new process resumes the same session from disk.
 *
 *   npm run demo                      # scripted model, no network
 *   ANTHROPIC_API_KEY=… npm run demo  # the same script against Claude
 *
 * Sessions go to $LITE_AGENT_HOME/sessions (a temporary LITE_AGENT_HOME unless you set one).
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative } from "node:path"
import { type AgentEvent, createLiteAgent, type LiteAgent } from "@lite-agent/sdk"
import { anthropic, type ModelProvider, scripted, type ScriptedTurn } from "@lite-agent/sdk/provider"

const live = process.env.ANTHROPIC_API_KEY !== undefined && process.env.ANTHROPIC_API_KEY !== ""

const PROMPTS = [
  "Create src/greet.ts exporting greet(name) that returns a greeting.",
  "Add a farewell(name) function and a README.md that documents both.",
  "Rename greet to hello everywhere and delete the README; then count the lines of src/greet.ts."
] as const

const SCRIPT: ReadonlyArray<ScriptedTurn> = [
  {
    text: "I'll create the module.",
    toolCalls: [{
      name: "write_file",
      input: { path: "src/greet.ts", content: "export const greet = (name: string) => `Hello, ${name}!`\n" }
    }]
  },
  { text: "Created src/greet.ts with greet(name)." },
  {
    toolCalls: [
      {
        name: "edit_file",
        input: {
          path: "src/greet.ts",
          old_string: "`Hello, ${name}!`\n",
          new_string: "`Hello, ${name}!`\nexport const farewell = (name: string) => `Goodbye, ${name}!`\n"
        }
      },
      { name: "write_file", input: { path: "README.md", content: "# greet\n\n- greet(name)\n- farewell(name)\n" } }
    ]
  },
  { text: "Added farewell(name) and a README." },
  {
    toolCalls: [
      { name: "edit_file", input: { path: "src/greet.ts", old_string: "export const greet", new_string: "export const hello" } },
      { name: "delete_file", input: { path: "README.md" } },
      { name: "shell", input: { command: "wc -l src/greet.ts" } }
    ]
  },
  { text: "Renamed greet to hello, deleted README.md; src/greet.ts has 2 lines." },
  // The summary compaction asks for.
  { text: "The user is building src/greet.ts: greet was renamed to hello, farewell was added, the README was deleted." }
]

const RESUME_SCRIPT: ReadonlyArray<ScriptedTurn> = [{ text: "So far: src/greet.ts has greet(name); I can add more when you ask." }]

const modelFor = (script: ReadonlyArray<ScriptedTurn>): ModelProvider => (live ? anthropic() : scripted(script))

const show = (event: AgentEvent) => {
  if (event.type === "tool_start") {
    const input = event.input !== null && typeof event.input === "object" && !Array.isArray(event.input) ? event.input : {}
    const target = "path" in input ? String(input.path) : "command" in input ? String(input.command) : ""
    process.stdout.write(`  [tool] ${event.name} ${target}`)
  }
  if (event.type === "tool_end") process.stdout.write(` -> ${event.output.split("\n")[0]}${event.isError ? " (error)" : ""}\n`)
}

const files = (workdir: string): Array<string> => {
  const found: Array<string> = []
  const walk = (dir: string) => {
    for (const name of readdirSync(dir).sort()) {
      const path = join(dir, name)
      if (statSync(path).isDirectory()) walk(path)
      else found.push(relative(workdir, path))
    }
  }
  walk(workdir)
  return found
}

const printFiles = (title: string, workdir: string) => {
  console.log(`\n${title}`)
  const all = files(workdir)
  if (all.length === 0) console.log("  (no files)")
  for (const path of all) {
    console.log(`  ${path}:`)
    for (const line of readFileSync(join(workdir, path), "utf8").trimEnd().split("\n")) console.log(`    | ${line}`)
  }
}

const send = async (agent: LiteAgent, prompt: string) => {
  console.log(`\n> ${prompt}`)
  const result = await agent.send(prompt)
  console.log(`  ${result.text.trim().split("\n").join("\n  ")}`)
  console.log(`  (${result.steps} model calls, ${result.toolCalls.length} tool calls, head ${result.head})`)
  return result
}

const firstRun = async () => {
  process.env.LITE_AGENT_HOME ??= mkdtempSync(join(tmpdir(), "lite-agent-demo-home-"))
  const workdir = mkdtempSync(join(tmpdir(), "lite-agent-demo-"))
  const agent = createLiteAgent({
    model: modelFor(SCRIPT),
    workdir,
    systemPrompt: "You are a careful coding agent. Use the tools to change files; keep answers short."
  })
  agent.subscribe(show)
  console.log(`lite-agent demo (${live ? "Anthropic" : "scripted model, offline"})`)
  console.log(`workdir:  ${workdir}`)
  console.log(`sessions: ${join(process.env.LITE_AGENT_HOME, "sessions")}`)
  console.log(`session:  ${agent.sessionId}`)

  for (const prompt of PROMPTS) await send(agent, prompt)

  console.log("\nCompacting the conversation ...")
  const compaction = agent.compact("keep the function names", { keepRecentTokens: 0 })
  for await (const event of compaction) {
    // Archive progress comes often; show where it starts and ends.
    if (event.stage === "archive" && event.completed !== 0 && event.completed !== event.total) continue
    const counts = event.total === undefined ? "" : ` ${event.completed}/${event.total}`
    const tokens = event.tokens === undefined ? "" : ` ${event.tokens.tokens} tokens (${event.tokens.method})`
    console.log(`  [compaction] ${event.phase} ${event.stage}${counts}${tokens}`)
  }
  const { before, after, compacted } = await compaction
  console.log(`  { before: ${before}, after: ${after} } tokens; ${compacted ? "one Compaction event written, nothing deleted" : "nothing to reduce"}`)

  const checkpoints = await agent.listCheckpoints(agent.sessionId)
  console.log("\nCheckpoints (one per prompt):")
  for (const checkpoint of checkpoints) {
    console.log(`  seq ${String(checkpoint.seq).padStart(2)}  "${checkpoint.prompt}"  changed since: ${checkpoint.files.join(", ") || "-"}`)
  }

  printFiles("Files before restore:", workdir)
  const target = checkpoints[1]!
  console.log(`\nRestoring to just before checkpoint seq ${target.seq} ("${target.prompt}") ...`)
  const restored = await agent.restore(agent.sessionId, target.seq)
  console.log(`  restored files: ${restored.restoredFiles.join(", ") || "-"}`)
  console.log(`  conversation restored: ${restored.conversationRestored}`)
  console.log(`  not undone (shell commands): ${restored.commandsNotUndone.map((command) => JSON.stringify(command.input)).join(", ") || "-"}`)
  printFiles("Files after restore:", workdir)
  console.log(`\nCheckpoints left: ${(await agent.listCheckpoints(agent.sessionId)).map((checkpoint) => `"${checkpoint.prompt}"`).join(", ")}`)
  const sessionId = agent.sessionId
  await agent.close()

  console.log("\nResuming the session in a new process ...")
  execFileSync(process.execPath, ["--import", "tsx", new URL(import.meta.url).pathname, "--resume", sessionId, workdir], {
    stdio: "inherit",
    env: process.env
  })
}

const resumeRun = async (sessionId: string, workdir: string) => {
  const script = live ? undefined : scripted(RESUME_SCRIPT)
  const agent = createLiteAgent({ model: script ?? anthropic(), workdir })
  agent.resume(sessionId)
  const checkpoints = await agent.listCheckpoints(sessionId)
  console.log(`  [pid ${process.pid}] session ${sessionId} has ${checkpoints.length} checkpoint(s): ${checkpoints.map((c) => `"${c.prompt}"`).join(", ")}`)
  const result = await send(agent, "What have we built so far?")
  const shown = script?.calls()[0]?.prompt.content.length
  if (shown !== undefined) console.log(`  (the model was shown ${shown} messages, loaded from the persisted session)`)
  console.log(`  session head is now ${result.head}`)
  await agent.close()
}

const [flag, sessionArg, workdirArg] = process.argv.slice(2)
await (flag === "--resume" && sessionArg !== undefined && workdirArg !== undefined ? resumeRun(sessionArg, workdirArg) : firstRun())
