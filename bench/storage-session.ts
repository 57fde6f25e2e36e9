/**
 * One session of `npm run bench -- storage`, in a process of its own as `lite-agent -p` runs one:
 * a new session over the workdir (its first capture), one turn that edits one file. Prints
 * `{ "turnMs": … }`: the turn alone, Node's start and the store's opening aside.
 *
 *   node --import tsx bench/storage-session.ts '<json StorageSessionConfig>'
 */
import { createLiteAgent, fileCheckpointer, gzipCodec } from "../src/index.js"
import { scripted } from "../src/provider.js"

export interface StorageSessionConfig {
  readonly store: string
  readonly workdir: string
  readonly codec: "none" | "gzip"
  readonly capture: "all" | "tools"
  /** The file the turn rewrites, relative to the workdir, and its new content. */
  readonly path: string
  readonly content: string
}

const config = JSON.parse(process.argv[2] ?? "{}") as StorageSessionConfig
const checkpointer = fileCheckpointer({ dir: config.store, ...(config.codec === "gzip" ? { codec: gzipCodec() } : {}) })
await checkpointer.list()
const agent = createLiteAgent({
  model: scripted([{ toolCalls: [{ name: "write_file", input: { path: config.path, content: config.content } }] }, { text: "edited" }]),
  workdir: config.workdir,
  checkpointer,
  workspace: { capture: config.capture }
})
const start = process.hrtime.bigint()
await agent.send("edit one file")
const turnMs = Number(process.hrtime.bigint() - start) / 1e6
await agent.close()
await checkpointer.close()
console.log(JSON.stringify({ turnMs }))
