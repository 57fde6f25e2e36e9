/**
 * One session's first capture in a process of its own: `node first-capture.js <store dir>
 * <workdir> <session id>` opens the file store, writes the session's metadata, captures the
 * workdir (starting from what the store knows of it), appends the capture and prints one JSON
 * line of what it cost.
 */
import { Effect, Stream } from "effect"
import { Checkpointer } from "../../src/core/Checkpointer.js"
import { SessionMetadata } from "../../src/core/events.js"
import { fold } from "../../src/core/sessionFold.js"
import * as FileCheckpointer from "../../src/backends/file/FileCheckpointer.js"
import * as WorkspaceCapture from "../../src/tools/WorkspaceCapture.js"

const [dir, workdir, sessionId] = process.argv.slice(2) as [string, string, string]

const program = Effect.gen(function*() {
  const checkpointer = yield* Checkpointer
  yield* checkpointer.append(sessionId, [new SessionMetadata({ formatVersion: 1, workdir })])
  const capture = yield* WorkspaceCapture.make(workdir, {}, checkpointer)
  const state = fold(yield* Stream.runCollect(checkpointer.read(sessionId)))
  const captured = yield* capture.capture(sessionId, state, { _tag: "checkpoint" })
  yield* checkpointer.append(sessionId, captured.events, state.head)
  const stats = yield* checkpointer.stats(sessionId)
  const event = captured.events[0]!
  return {
    hashedFiles: captured.hashedFiles,
    events: captured.events.length,
    changes: event.changes.length,
    contentFiles: event.changes.filter((change) => change.state._tag === "content").length,
    chunks: event.manifest?.length ?? 0,
    storedChunks: event.manifest?.filter((chunk) => chunk._tag === "stored").length ?? 0,
    logBytes: stats.logBytes
  }
})

Effect.runPromise(program.pipe(Effect.scoped, Effect.provide(FileCheckpointer.layer({ dir })))).then(
  (result) => process.stdout.write(JSON.stringify(result) + "\n"),
  (error) => {
    process.stderr.write(String(error) + "\n")
    process.exit(1)
  }
)
