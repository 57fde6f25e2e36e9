/**
 * A long session that rewrites one big file every prompt (the case that used to grow without
 * bound): per-turn cost early vs late, bytes on disk against the unique snapshot bytes,
 * resuming it from a fresh checkpointer and agent, and the heap its fold retains — each
 * against the same session with 1-byte files, measured in the same run.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Stream } from "effect"
import { Checkpointer, FileCheckpointer, Session } from "../src/core.js"
import { createLiteAgent, fileCheckpointer } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { median, ms, ratio } from "./shared.js"

const PROMPTS = 60
const BIG = 512 * 1024

const diskBytes = (path: string) => Number(execFileSync("du", ["-sb", path], { encoding: "utf8" }).split("\t")[0])

const gc = () => (globalThis as { gc?: () => void }).gc?.()

const session = async (fileBytes: number) => {
  const dir = mkdtempSync(join(tmpdir(), "lite-agent-bench-long-"))
  const workdir = mkdtempSync(join(tmpdir(), "lite-agent-bench-long-work-"))
  const contentOf = (i: number) => `${i}:`.padEnd(fileBytes, String.fromCharCode(97 + (i % 26)))
  const turns = Array.from({ length: PROMPTS }, (_, i) => [
    { toolCalls: [{ name: "write_file", input: { path: "big.txt", content: contentOf(i) } }] },
    { text: `version ${i}` }
  ]).flat()
  const checkpointer = fileCheckpointer({ dir })
  const agent = createLiteAgent({ model: scripted(turns, { recordPrompts: false }), workdir, checkpointer, sessionId: "long" })
  const times: Array<number> = []
  for (let i = 0; i < PROMPTS; i++) {
    const start = process.hrtime.bigint()
    await agent.send(`rewrite big.txt, version ${i}`)
    times.push(ms(start))
  }
  await agent.close()
  await checkpointer.close()

  // Resuming: a fresh checkpointer and agent (no cache) list the checkpoints.
  const resumeTimes: Array<number> = []
  for (let i = 0; i < 9; i++) {
    // The garbage the 60 turns above left is not the resume's cost.
    gc()
    const start = process.hrtime.bigint()
    const fresh = fileCheckpointer({ dir })
    const resumed = createLiteAgent({ model: scripted([]), workdir, checkpointer: fresh, sessionId: "long" })
    const checkpoints = await resumed.listCheckpoints("long")
    if (checkpoints.length !== PROMPTS) throw new Error("bad resume")
    resumeTimes.push(ms(start))
    await resumed.close()
    await fresh.close()
  }

  // The heap the fold retains, averaged over several folds kept alive at once (one alone is within the GC's noise).
  const FOLDS = 10
  gc()
  const before = process.memoryUsage().heapUsed
  const states = await Effect.runPromise(
    Effect.flatMap(Checkpointer, (c) =>
      Effect.forEach(Array.from({ length: FOLDS }), () => Stream.runFold(c.read("long"), Session.emptySessionState, Session.step))).pipe(
        Effect.scoped,
        Effect.provide(FileCheckpointer.layer({ dir }))
      )
  )
  gc()
  const retained = (process.memoryUsage().heapUsed - before) / FOLDS
  if (states.some((state) => state.head === 0)) throw new Error("empty fold")

  return {
    early: median(times.slice(1, 4)),
    late: median(times.slice(-3)),
    logBytes: diskBytes(join(dir, "long", "log")),
    blobBytes: diskBytes(join(dir, "long", "blobs")),
    uniqueSnapshotBytes: (PROMPTS - 1) * fileBytes,
    resume: median(resumeTimes),
    retained
  }
}

export const runLongSessionBench = async (): Promise<Array<Array<string>>> => {
  const small = await session(1)
  const big = await session(BIG)
  return [
    ["turn, prompts 2-4", `${big.early.toFixed(1)} ms`, `${small.early.toFixed(1)} ms`, ratio(big.early, small.early)],
    ["turn, prompts 58-60", `${big.late.toFixed(1)} ms (${ratio(big.late, big.early)} of prompts 2-4)`, `${small.late.toFixed(1)} ms`, ratio(big.late, small.late)],
    [
      "log + blobs on disk",
      `${((big.logBytes + big.blobBytes) / 1e6).toFixed(1)} MB (log ${(big.logBytes / 1e6).toFixed(1)} MB) = ${
        ratio(big.logBytes + big.blobBytes, big.uniqueSnapshotBytes)
      } the unique snapshot bytes`,
      `${((small.logBytes + small.blobBytes) / 1e6).toFixed(2)} MB`,
      ""
    ],
    ["resume (listCheckpoints, fresh checkpointer)", `${big.resume.toFixed(1)} ms`, `${small.resume.toFixed(1)} ms`, ratio(big.resume, small.resume)],
    // Absolute figures: a ratio of two small heaps says nothing; the point is that they do not differ by the snapshot bytes.
    ["heap retained by the fold", `${(big.retained / 1e6).toFixed(2)} MB`, `${(small.retained / 1e6).toFixed(2)} MB`, `${((big.retained - small.retained) / 1e6).toFixed(2)} MB more`]
  ]
}
