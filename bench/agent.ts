/**
 * The agent runtime's cost per turn, against a baseline of the same number of single-event
 * appends through the same checkpointer. A turn here is what the demo does: the user's
 * message, a scripted model call asking for one write_file, the tool (snapshot, write, change
 * record), its result, and a second model call answering in text — 7 events, 6 appends.
 * Measured early in a session (turns 6-25) and late (the last 20 of 1,000), to show whether a
 * turn's cost grows with the session: the fold is kept between turns (SessionStates), so it
 * should not: the prompt is extended turn by turn too. Each backend starts warm (after a
 * throwaway session) and after a full GC.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { createLiteAgent, fileCheckpointer, memoryCheckpointer, type PromiseCheckpointer, UserMessage } from "../src/index.js"
import * as LanguageModel from "@effect/ai/LanguageModel"
import { Effect } from "effect"
import { sqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { agentToolkitForModel } from "../src/agent/tools.js"
import { scripted, scriptedLayer, type ScriptedTurn } from "../src/provider.js"
import { median, ms, ratio } from "./shared.js"

const TURNS = 1000
const APPENDS_PER_TURN = 6

const turns = (count: number): Array<ScriptedTurn> =>
  Array.from({ length: count }, (_, i) => [
    { toolCalls: [{ name: "write_file", input: { path: `src/file${i % 5}.ts`, content: `export const value = ${i}\n`.repeat(20) } }] },
    { text: `turn ${i} done` }
  ]).flat()

const measure = async (label: string, makeCheckpointer: () => PromiseCheckpointer): Promise<Array<string>> => {
  // What the sections before left behind is not this backend's cost.
  gc()
  // Baseline: the appends alone, one event each, same checkpointer kind.
  const baselineStore = makeCheckpointer()
  const baselineTimes: Array<number> = []
  for (let i = 0; i < 40; i++) {
    const start = process.hrtime.bigint()
    for (let k = 0; k < APPENDS_PER_TURN; k++) {
      await baselineStore.append("baseline", [new UserMessage({ content: `event ${i}.${k} `.repeat(20), origin: "user" })])
    }
    baselineTimes.push(ms(start))
  }
  await baselineStore.close()

  const checkpointer = makeCheckpointer()
  const agent = createLiteAgent({
    model: scripted(turns(TURNS), { recordPrompts: false }),
    workdir: mkdtempSync(join(tmpdir(), "lite-agent-bench-work-")),
    checkpointer,
    sessionId: "bench"
  })
  const turnTimes: Array<number> = []
  for (let i = 0; i < TURNS; i++) {
    const start = process.hrtime.bigint()
    await agent.send(`turn ${i}: change a file`)
    turnTimes.push(ms(start))
  }
  await agent.close()
  await checkpointer.close()
  const baseline = median(baselineTimes.slice(5))
  const early = median(turnTimes.slice(5, 25))
  const late = median(turnTimes.slice(-20))
  return [
    label,
    `${baseline.toFixed(2)} ms`,
    `${early.toFixed(2)} ms (${ratio(early, baseline)})`,
    `${late.toFixed(2)} ms (${ratio(late, baseline)})`,
    ratio(late, early)
  ]
}

/** One scripted model call through `@effect/ai` with and without the agent's toolkit: where a turn's fixed cost goes. */
const modelCall = async (withToolkit: boolean) =>
  Effect.runPromise(Effect.gen(function*() {
    const model = yield* LanguageModel.LanguageModel
    const call = withToolkit
      ? model.generateText({ prompt: "hi", toolkit: agentToolkitForModel, disableToolCallResolution: true })
      : model.generateText({ prompt: "hi" })
    for (let i = 0; i < 20; i++) yield* call
    const start = process.hrtime.bigint()
    for (let i = 0; i < 100; i++) yield* call
    return ms(start) / 100
  }).pipe(Effect.provide(scriptedLayer(Array.from({ length: 120 }, () => ({ text: "ok" }))))))

const gc = () => (globalThis as { gc?: () => void }).gc?.()

/** Turns on a throwaway agent first, so the first backend measured does not pay for the JIT's warm-up in its early turns. */
const warmUp = async () => {
  const agent = createLiteAgent({
    model: scripted(turns(60), { recordPrompts: false }),
    workdir: mkdtempSync(join(tmpdir(), "lite-agent-bench-work-")),
    checkpointer: memoryCheckpointer(),
    sessionId: "warm-up"
  })
  for (let i = 0; i < 60; i++) await agent.send(`warm-up ${i}`)
  await agent.close()
}

type Backend = "file" | "memory" | "sqlite"

const LABELS: Record<Backend, string> = { file: "file (normal)", memory: "memory", sqlite: "sqlite (normal)" }

const checkpointerFor = (backend: Backend) => (): PromiseCheckpointer =>
  backend === "file"
    ? fileCheckpointer({ dir: mkdtempSync(join(tmpdir(), "lite-agent-bench-log-")) })
    : backend === "memory"
    ? memoryCheckpointer()
    : sqliteCheckpointer({ file: join(mkdtempSync(join(tmpdir(), "lite-agent-bench-db-")), "s.db") })

/** One backend's row, measured in this process (bench/agent-turns.ts runs it in a process of its own). */
export const measureBackend = async (backend: Backend): Promise<Array<string>> => {
  await warmUp()
  return measure(LABELS[backend], checkpointerFor(backend))
}

export const runAgentBench = async (): Promise<{ readonly turns: Array<Array<string>>; readonly model: Array<string> }> => {
  // Each backend in a fresh process: a heap grown by the sections before (or by another
  // backend's 1,000 turns) would make late turns pay for garbage collection that is not theirs.
  const turns = (["file", "memory", "sqlite"] as const).map((backend) =>
    JSON.parse(
      execFileSync(process.execPath, ["--expose-gc", "--import", "tsx", join(import.meta.dirname, "agent-turns.ts"), backend], {
        encoding: "utf8",
        maxBuffer: 16 * 1024 * 1024
      })
    ) as Array<string>
  )
  const bare = await modelCall(false)
  const withTools = await modelCall(true)
  return { turns, model: [`${bare.toFixed(2)} ms`, `${withTools.toFixed(2)} ms`, ratio(withTools, bare)] }
}
