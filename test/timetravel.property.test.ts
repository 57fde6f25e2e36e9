/**
 * The time-travel law, on real directories and every backend: after random prompts and file
 * operations, restoring to a random checkpoint gives back the workdir exactly as it was at
 * that checkpoint (bytes and modes), and the log folds to the prefix before it.
 */
import { Chunk, Effect, FastCheck as fc, Schema, Stream } from "effect"
import { describe, expect, it } from "vitest"
import { Checkpointer, Session, SessionEvent, TimeTravel } from "../src/core.js"
import { BACKENDS, diskState, freshWorkdir, timeTravelLayer, type ToolCall, turn } from "./support/agentSim.js"

const PATHS = ["a.txt", "dir/b.bin", "dir/sub/c.txt", "deep/er/d.md"] as const

type Op =
  | { readonly kind: "write"; readonly path: string; readonly content: string | Uint8Array; readonly mode: number | null }
  | { readonly kind: "edit"; readonly path: string; readonly replacement: string }
  | { readonly kind: "delete"; readonly path: string }
  | { readonly kind: "chmod"; readonly path: string; readonly mode: number }

const contentArb = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constant(""),
  fc.array(fc.constantFrom("line", "crlf\r\n", "lf\n", "ünï", "\t"), { maxLength: 6 }).map((parts) => parts.join("")),
  fc.uint8Array({ maxLength: 64 })
)
const opArb: fc.Arbitrary<Op> = fc.oneof(
  {
    arbitrary: fc.record({
      kind: fc.constant("write" as const),
      path: fc.constantFrom(...PATHS),
      content: contentArb,
      mode: fc.option(fc.constantFrom(0o600, 0o755, 0o640))
    }),
    weight: 4
  },
  { arbitrary: fc.record({ kind: fc.constant("edit" as const), path: fc.constantFrom(...PATHS), replacement: fc.string({ maxLength: 20 }) }), weight: 2 },
  { arbitrary: fc.record({ kind: fc.constant("delete" as const), path: fc.constantFrom(...PATHS) }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant("chmod" as const), path: fc.constantFrom(...PATHS), mode: fc.constantFrom(0o600, 0o644, 0o755, 0o640) }), weight: 2 }
)
const scriptArb = fc.record({
  prompts: fc.array(fc.array(opArb, { maxLength: 4 }), { minLength: 1, maxLength: 5 }),
  pick: fc.nat()
})

/** Turn abstract ops into tool calls that are valid for the files on disk right now. */
const callsFor = (ops: ReadonlyArray<Op>, disk: () => Record<string, { data: string }>): Array<ToolCall> => {
  const calls: Array<ToolCall> = []
  for (const op of ops) {
    const present = disk()[op.path] !== undefined || calls.some((c) => c.name === "write_file" && c.input.path === op.path)
    switch (op.kind) {
      case "write":
        calls.push({
          name: "write_file",
          input: op.mode === null ? { path: op.path, content: op.content } : { path: op.path, content: op.content, mode: op.mode }
        })
        break
      case "edit": {
        const current = disk()[op.path]
        const text = current === undefined ? "" : Buffer.from(current.data, "base64").toString("utf8")
        // The whole content is trivially a unique match; only valid UTF-8 text round-trips through edit.
        if (text.length > 0 && Buffer.from(text, "utf8").toString("base64") === current!.data) {
          calls.push({ name: "edit_file", input: { path: op.path, old_string: text, new_string: op.replacement + "!" } })
        }
        break
      }
      case "delete":
        if (present) calls.push({ name: "delete_file", input: { path: op.path } })
        break
      case "chmod":
        if (present) calls.push({ name: "chmod_file", input: { path: op.path, mode: op.mode } })
        break
    }
  }
  return calls
}

const encode = Schema.encodeSync(SessionEvent)

describe("time travel: the restore law", () => {
  for (const backend of BACKENDS) {
    it(`${backend}: restoring to a random checkpoint gives back the workdir and the conversation before it`, async () => {
      await fc.assert(
        fc.asyncProperty(scriptArb, async ({ pick, prompts }) => {
          const workdir = freshWorkdir()
          const sessionId = "prop"
          await Effect.runPromise(Effect.gen(function*() {
            const checkpointer = yield* Checkpointer
            const timeTravel = yield* TimeTravel.TimeTravel
            const atCheckpoint: Array<{ seq: number; disk: ReturnType<typeof diskState> }> = []
            let index = 0
            for (const ops of prompts) {
              const disk = diskState(workdir)
              // Apply each op against the state as it evolves within the turn.
              const calls = callsFor(ops, () => diskState(workdir))
              const seq = yield* turn(sessionId, `prompt ${index++}`, calls)
              atCheckpoint.push({ seq, disk })
            }
            const before = Chunk.toReadonlyArray(yield* Stream.runCollect(checkpointer.read(sessionId)))
            const target = atCheckpoint[pick % atCheckpoint.length]!
            const result = yield* timeTravel.restore(sessionId, target.seq)
            expect(result.conversationRestored).toBe(true)
            expect(diskState(workdir)).toEqual(target.disk)
            // Nothing is deleted: the log is the one before and the move of the leaf; the session
            // folds to what the log's prefix before the checkpoint folded to.
            const after = Chunk.toReadonlyArray(yield* Stream.runCollect(checkpointer.read(sessionId)))
            expect(after.map((s) => encode(s.event)).slice(0, before.length)).toEqual(before.map((s) => encode(s.event)))
            expect(after.at(-1)!.event).toMatchObject({ _tag: "LeafMoved", to: target.seq - 1 })
            const folded = Session.fold(after)
            const prefix = Session.fold(before.slice(0, target.seq - 1))
            expect(folded.leaf).toBe(target.seq - 1)
            expect(Session.conversation(folded).entries.map((e) => encode(e.event))).toEqual(
              Session.conversation(prefix).entries.map((e) => encode(e.event))
            )
            // And the checkpoints left are exactly the earlier ones.
            const remaining = yield* timeTravel.listCheckpoints(sessionId)
            expect(remaining.map((c) => c.seq)).toEqual(atCheckpoint.filter((c) => c.seq < target.seq).map((c) => c.seq))
          }).pipe(Effect.scoped, Effect.provide(timeTravelLayer(backend, workdir))))
        }),
        { numRuns: backend === "memory" ? 60 : 30 }
      )
    }, 300_000)
  }
})
