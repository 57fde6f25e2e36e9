/**
 * Drives sessions the way the agent runtime will: a user prompt, an assistant message with
 * tool calls, the file tools run with their tool-use ids, and tool results — on real
 * temporary directories and real backends.
 */
import { lstatSync, mkdtempSync, readdirSync, readFileSync, realpathSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Chunk, Effect, Layer, Stream } from "effect"
import { SqliteCheckpointer } from "../../src/checkpoint-sqlite.js"
import {
  AssistantMessage,
  Checkpointer,
  FileCheckpointer,
  FileTools,
  MemoryCheckpointer,
  TimeTravel,
  ToolResult,
  UserMessage,
  Workspace
} from "../../src/core.js"

export type Backend = "memory" | "file" | "sqlite"
export const BACKENDS: ReadonlyArray<Backend> = ["memory", "file", "sqlite"]

export const checkpointerLayer = (backend: Backend): Layer.Layer<Checkpointer, unknown> => {
  switch (backend) {
    case "memory":
      return MemoryCheckpointer.layer
    case "file":
      return FileCheckpointer.layer({ dir: mkdtempSync(join(tmpdir(), "lite-agent-tt-log-")) })
    case "sqlite":
      return SqliteCheckpointer.layer({ file: join(mkdtempSync(join(tmpdir(), "lite-agent-tt-db-")), "s.db") })
  }
}

export const freshWorkdir = () => realpathSync(mkdtempSync(join(tmpdir(), "lite-agent-workdir-")))

/** Everything time travel needs, on one backend and one workdir (optionally a custom workspace). */
export const timeTravelLayer = (
  backend: Backend,
  workdir: string,
  options: { readonly snapshotMaxBytes?: number; readonly workspace?: Layer.Layer<Workspace.Workspace> } = {}
) => {
  const workspace = options.workspace ?? Workspace.layer(workdir)
  const base = Layer.merge(checkpointerLayer(backend), workspace)
  return Layer.mergeAll(
    TimeTravel.layer,
    FileTools.layer(options.snapshotMaxBytes === undefined ? {} : { snapshotMaxBytes: options.snapshotMaxBytes }),
    base
  ).pipe(Layer.provideMerge(base))
}

/** Run `program` with time travel on `backend` and `workdir` (a fresh store per run). */
export const runTimeTravel = <A, E>(
  backend: Backend,
  workdir: string,
  program: Effect.Effect<A, E, Checkpointer | TimeTravel.TimeTravel | FileTools.FileTools | Workspace.Workspace>
) => Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(timeTravelLayer(backend, workdir))))

/** A session's whole log as read. */
export const logOf = (sessionId: string) =>
  Effect.flatMap(Checkpointer, (c) => Effect.map(Stream.runCollect(c.read(sessionId)), Chunk.toReadonlyArray))

/** The error `effect` fails with (a defect when it succeeds). */
export const failureOf = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Effect.either(effect), (either) => either._tag === "Left" ? Effect.succeed(either.left) : Effect.dieMessage("expected a failure"))

export type ToolCall =
  | { readonly name: "write_file"; readonly input: { readonly path: string; readonly content: string | Uint8Array; readonly mode?: number } }
  | { readonly name: "edit_file"; readonly input: { readonly path: string; readonly old_string: string; readonly new_string: string } }
  | { readonly name: "delete_file"; readonly input: { readonly path: string } }
  | { readonly name: "chmod_file"; readonly input: { readonly path: string; readonly mode: number } }
  | { readonly name: "bash"; readonly input: { readonly command: string } }

let toolCounter = 0

/** One turn: the prompt (a checkpoint), the assistant's tool calls, each run, each result. Returns the prompt's seq. */
export const turn = (sessionId: string, prompt: string, calls: ReadonlyArray<ToolCall>) =>
  Effect.gen(function*() {
    const checkpointer = yield* Checkpointer
    const tools = yield* FileTools.FileTools
    const promptSeq = yield* checkpointer.append(sessionId, [new UserMessage({ content: prompt, origin: "user" })])
    const ids = calls.map(() => `toolu_${++toolCounter}`)
    yield* checkpointer.append(sessionId, [
      new AssistantMessage({
        content: calls.map((call, i) => ({
          type: "tool_use" as const,
          id: ids[i]!,
          name: call.name,
          input: JSON.parse(JSON.stringify(call.input, (_, v) => (v instanceof Uint8Array ? "<bytes>" : v)))
        }))
      })
    ])
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i]!
      const context = { sessionId, toolUseId: ids[i]! }
      const outcome = yield* Effect.either(
        call.name === "write_file"
          ? tools.writeFile(context, call.input)
          : call.name === "edit_file"
          ? tools.editFile(context, call.input)
          : call.name === "delete_file"
          ? tools.deleteFile(context, call.input)
          : call.name === "chmod_file"
          ? tools.chmodFile(context, call.input)
          : Effect.succeed({ path: "", sha256: null })
      )
      yield* checkpointer.append(sessionId, [
        new ToolResult({
          toolUseId: ids[i]!,
          toolName: call.name,
          content: outcome._tag === "Right" ? "ok" : outcome.left.message,
          isError: outcome._tag === "Left"
        })
      ])
    }
    return promptSeq
  })

/** Session "s" of two prompts: the first creates a.txt and src/b.txt, the second edits a.txt and creates c.txt. Their seqs. */
export const twoPrompts = Effect.gen(function*() {
  const first = yield* turn("s", "create files", [
    { name: "write_file", input: { path: "a.txt", content: "alpha\n" } },
    { name: "write_file", input: { path: "src/b.txt", content: "beta\r\n" } }
  ])
  const second = yield* turn("s", "edit them", [
    { name: "edit_file", input: { path: "a.txt", old_string: "alpha", new_string: "ALPHA" } },
    { name: "write_file", input: { path: "c.txt", content: "gamma" } }
  ])
  return { first, second }
})

export interface DiskFile {
  readonly data: string
  readonly mode: number
}

/** Every regular file under `root` (relative path → base64 content and mode), `.git` included. */
export const diskState = (root: string): Record<string, DiskFile> => {
  const files: Record<string, DiskFile> = {}
  const walk = (dir: string, prefix: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = join(dir, entry.name)
      const relative = prefix === "" ? entry.name : `${prefix}/${entry.name}`
      if (entry.isDirectory()) walk(full, relative)
      else if (entry.isFile()) {
        files[relative] = { data: readFileSync(full).toString("base64"), mode: lstatSync(full).mode & 0o7777 }
      } else files[relative] = { data: `<${entry.isSymbolicLink() ? "symlink" : "other"}>`, mode: 0 }
    }
  }
  walk(root, "")
  return files
}
