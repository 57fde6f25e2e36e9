/**
 * Random sequences of turns — file-tool writes, shell writes, deletes, renames, mode changes and
 * links, the user's own edits between turns — and restores, with the real agent and real
 * commands: after each restore the covered workspace is exactly what it was at that checkpoint.
 */
import { lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { createLiteAgent, memoryCheckpointer } from "../src/index.js"
import { scripted, type ScriptedTurn } from "../src/provider.js"
import { tempDir } from "./support/agent.js"

const PATHS = ["a.txt", "b.txt", "d/c.txt", "d/e/f.txt"] as const
const path = fc.constantFrom(...PATHS)
const text = fc.constantFrom("one", "two", "three\n", "")

type Operation =
  | { readonly kind: "tool-write"; readonly path: string; readonly text: string }
  | { readonly kind: "shell-write"; readonly path: string; readonly text: string }
  | { readonly kind: "shell-delete"; readonly path: string }
  | { readonly kind: "shell-rename"; readonly from: string; readonly to: string }
  | { readonly kind: "shell-chmod"; readonly path: string }
  | { readonly kind: "shell-link"; readonly path: string; readonly target: string }

const operation: fc.Arbitrary<Operation> = fc.oneof(
  fc.record({ kind: fc.constant("tool-write" as const), path, text }),
  fc.record({ kind: fc.constant("shell-write" as const), path, text }),
  fc.record({ kind: fc.constant("shell-delete" as const), path }),
  fc.record({ kind: fc.constant("shell-rename" as const), from: path, to: path }),
  fc.record({ kind: fc.constant("shell-chmod" as const), path }),
  fc.record({ kind: fc.constant("shell-link" as const), path, target: path })
)

type Step =
  | { readonly kind: "turn"; readonly operations: ReadonlyArray<Operation>; readonly userEdit: { readonly path: string; readonly text: string } | undefined }
  | { readonly kind: "restore"; readonly back: number }

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("turn" as const), operations: fc.array(operation, { minLength: 1, maxLength: 4 }), userEdit: fc.option(fc.record({ path, text }), { nil: undefined }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("restore" as const), back: fc.nat({ max: 5 }) }) }
)

const quote = (value: string) => `'${value.replaceAll("'", "'\\''")}'`
const parentOf = (file: string) => (file.includes("/") ? file.slice(0, file.lastIndexOf("/")) : ".")

const toolCall = (op: Operation) => {
  switch (op.kind) {
    case "tool-write":
      return { name: "write_file", input: { path: op.path, content: op.text } }
    case "shell-write":
      return { name: "shell", input: { command: `mkdir -p ${parentOf(op.path)} && rm -f ${op.path} && printf %s ${quote(op.text)} > ${op.path}` } }
    case "shell-delete":
      return { name: "shell", input: { command: `rm -f ${op.path}` } }
    case "shell-rename":
      return { name: "shell", input: { command: `if [ -f ${op.from} ] && [ ! -L ${op.from} ]; then mkdir -p ${parentOf(op.to)} && rm -f ${op.to} && mv ${op.from} ${op.to}; fi` } }
    case "shell-chmod":
      return { name: "shell", input: { command: `if [ -f ${op.path} ] && [ ! -L ${op.path} ]; then chmod 755 ${op.path}; fi` } }
    case "shell-link":
      return { name: "shell", input: { command: `mkdir -p ${parentOf(op.path)} && rm -f ${op.path} && ln -s ${op.target} ${op.path}` } }
  }
}

/** Every path under `dir` with what it holds (links as their targets, never followed). */
const tree = (dir: string, base = ""): Record<string, string> => {
  const result: Record<string, string> = {}
  for (const name of readdirSync(join(dir, base)).sort()) {
    const relative = base === "" ? name : `${base}/${name}`
    const stat = lstatSync(join(dir, relative))
    if (stat.isSymbolicLink()) result[relative] = `link ${readlinkSync(join(dir, relative))}`
    else if (stat.isDirectory()) {
      result[relative] = `dir ${(stat.mode & 0o777).toString(8)}`
      Object.assign(result, tree(dir, relative))
    } else result[relative] = `${(stat.mode & 0o777).toString(8)} ${readFileSync(join(dir, relative), "utf8")}`
  }
  return result
}

describe("whole-workspace restores, as a model", () => {
  it("after random turns and restores the workspace is exactly what it was at the restored checkpoint", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 2, maxLength: 8 }), async (steps) => {
        const workdir = tempDir("capture-model")
        writeFileSync(join(workdir, "a.txt"), "at the start")
        const turns: Array<ScriptedTurn> = steps.flatMap((s) => (s.kind === "turn" ? [{ toolCalls: s.operations.map(toolCall) }, { text: "ok" }] : []))
        const checkpointer = memoryCheckpointer()
        const agent = createLiteAgent({ model: scripted(turns), workdir, checkpointer })
        try {
          // The workspace right before each remaining prompt, oldest first.
          const atCheckpoints: Array<Record<string, string>> = []
          for (const s of steps) {
            if (s.kind === "turn") {
              // The user's own edit between turns (never through a link).
              if (s.userEdit !== undefined) {
                const target = join(workdir, s.userEdit.path)
                mkdirSync(join(workdir, parentOf(s.userEdit.path)), { recursive: true })
                let isLink = false
                try {
                  isLink = lstatSync(target).isSymbolicLink()
                } catch {
                  // not there yet
                }
                if (!isLink) writeFileSync(target, `user: ${s.userEdit.text}`)
              }
              atCheckpoints.push(tree(workdir))
              await agent.send("go")
              continue
            }
            if (atCheckpoints.length === 0) continue
            const checkpoints = await agent.listCheckpoints(agent.sessionId)
            expect(checkpoints).toHaveLength(atCheckpoints.length)
            const index = Math.max(0, atCheckpoints.length - 1 - s.back)
            await agent.restore(agent.sessionId, checkpoints[index]!.seq, { includeUserEdits: true })
            expect(tree(workdir)).toEqual(atCheckpoints[index])
            atCheckpoints.splice(index)
          }
        } finally {
          await agent.close()
          await checkpointer.close()
        }
      }),
      { numRuns: 25 }
    )
  })
})

describe("the watcher's captures against a walk's", () => {
  it("after random file-system changes, a capture from the watcher's report records exactly what a full walk records", async () => {
    const { Effect, Exit, Scope } = await import("effect")
    const { make } = await import("../src/tools/WorkspaceCapture.js")
    const { Session } = await import("../src/core.js")
    const { chmodSync, renameSync, rmSync, symlinkSync } = await import("node:fs")
    type Change =
      | { readonly kind: "write"; readonly path: string; readonly text: string }
      | { readonly kind: "remove"; readonly path: string }
      | { readonly kind: "rename"; readonly from: string; readonly to: string }
      | { readonly kind: "chmod"; readonly path: string }
      | { readonly kind: "link"; readonly path: string; readonly target: string }
    const entry = fc.constantFrom("a.txt", "b.txt", "d", "d/c.txt", "d/e", "d/e/f.txt", "g/h/i.txt")
    const change: fc.Arbitrary<Change> = fc.oneof(
      fc.record({ kind: fc.constant("write" as const), path: entry, text }),
      fc.record({ kind: fc.constant("remove" as const), path: entry }),
      fc.record({ kind: fc.constant("rename" as const), from: entry, to: entry }),
      fc.record({ kind: fc.constant("chmod" as const), path: entry }),
      fc.record({ kind: fc.constant("link" as const), path: entry, target: entry })
    )
    const apply = (workdir: string, c: Change) => {
      const at = (p: string) => join(workdir, p)
      try {
        switch (c.kind) {
          case "write":
            mkdirSync(join(workdir, parentOf(c.path)), { recursive: true })
            rmSync(at(c.path), { recursive: true, force: true })
            writeFileSync(at(c.path), c.text)
            return
          case "remove":
            rmSync(at(c.path), { recursive: true, force: true })
            return
          case "rename":
            mkdirSync(join(workdir, parentOf(c.to)), { recursive: true })
            renameSync(at(c.from), at(c.to))
            return
          case "chmod":
            chmodSync(at(c.path), 0o700)
            return
          case "link":
            mkdirSync(join(workdir, parentOf(c.path)), { recursive: true })
            rmSync(at(c.path), { recursive: true, force: true })
            symlinkSync(c.target, at(c.path))
            return
        }
      } catch {
        // An impossible change (a rename into itself, a parent that is a file): nothing happened.
      }
    }
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(change, { minLength: 1, maxLength: 5 }), { minLength: 1, maxLength: 5 }), async (rounds) => {
        const workdir = tempDir("watch-model")
        writeFileSync(join(workdir, "a.txt"), "start")
        mkdirSync(join(workdir, "d", "e"), { recursive: true })
        writeFileSync(join(workdir, "d", "c.txt"), "c")
        const scope = Effect.runSync(Scope.make())
        try {
          const watched = await Effect.runPromise(Scope.extend(make(workdir), scope))
          let state = Session.emptySessionState
          const capture = async (engine: typeof watched, from: typeof state) =>
            Effect.runPromise(Effect.map(engine.capture("s", from, { _tag: "checkpoint" }), (captured) => captured.events))
          const fold = (events: Awaited<ReturnType<typeof capture>>) =>
            Session.fold(events.map((event, index) => ({ seq: state.head + index + 1, ts: 0, event })), state)
          state = fold(await capture(watched, state))
          for (const round of rounds) {
            for (const c of round) apply(workdir, c)
            // A fresh engine knows nothing of the watcher's reports: it walks.
            const walked = (await Effect.runPromise(Effect.scoped(Effect.flatMap(make(workdir), (fresh) => fresh.capture("s", state, { _tag: "checkpoint" }))))).events
            const reported = await capture(watched, state)
            const changes = (events: typeof reported) => events.flatMap((event) => event.changes).map((c) => JSON.stringify({ ...c, state: c.state._tag === "content" ? { ...c.state, data: undefined } : c.state }))
            expect(changes(reported).sort()).toEqual(changes(walked).sort())
            state = fold(reported)
          }
        } finally {
          await Effect.runPromise(Scope.close(scope, Exit.void))
        }
      }),
      { numRuns: 40 }
    )
  })
})
