/**
 * Worker for test/fileLock.concurrentMoves.processes.test.ts: moves the leaf of one session of a file
 * checkpointer directory, in a process of its own.
 *
 *   node --import tsx test/workers/leaf-mover.ts <dir> <workdir> <sessionId> moves <count>
 *   node --import tsx test/workers/leaf-mover.ts <dir> <workdir> <sessionId> commit-after <file>
 *   node --import tsx test/workers/leaf-mover.ts <dir> <workdir> <sessionId> lock-in-turns <ms>
 *
 * `moves`: `count` moves through the promise facade, switching to a branch that is not current
 * and undoing in turn; prints `moved` or `failed <error tag>` for each, then `finished`.
 * `commit-after`: one undo whose commit (the append of its `LeafMoved`) starts only once `file`
 * exists; prints `committing` when it gets there, then `done` or `failed <error tag>`.
 * `lock-in-turns`: holds the session's lock for `ms`, lets it go for `ms`, and again, until killed
 * (writing nothing): a third process whose lock the movers' appends often meet. Prints `started`.
 *
 * Nothing here keeps the event loop alive while a move runs (no open stdin, no timer): a move
 * that waits on something only an unref'd handle would wake ends the process with code 13.
 */
import { existsSync, realpathSync } from "node:fs"
import { Duration, Effect, Layer } from "effect"
import * as SessionLock from "../../src/backends/file/SessionLock.js"
import { Checkpointer, FileCheckpointer, type SessionEventInput, TimeTravel, Workspace } from "../../src/core.js"
import { createLiteAgent, fileCheckpointer } from "../../src/index.js"
import { scripted } from "../../src/provider.js"

const [dir, workdir, sessionId, mode, arg] = process.argv.slice(2) as [string, string, string, string, string]

const tagOf = (error: unknown) =>
  typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : `untyped ${String(error)}`

const moves = async (count: number) => {
  const agent = createLiteAgent({ model: scripted([]), workdir, checkpointer: fileCheckpointer({ dir }), sessionId })
  try {
    for (let round = 0; round < count; round++) {
      try {
        const other = (await agent.tree(sessionId)).branches.find((branch) => !branch.current)
        if (round % 2 === 0 && other !== undefined) await agent.switchBranch(sessionId, other.leaf)
        else await agent.undo(sessionId)
        process.stdout.write("moved\n")
      } catch (error) {
        process.stdout.write(`failed ${tagOf(error)}\n`)
      }
    }
  } finally {
    await agent.close()
  }
  process.stdout.write("finished\n")
}

/** Until `file` exists, looked for every few milliseconds (the timer is gone once it does). */
const untilExists = (file: string) =>
  Effect.promise(async () => {
    process.stdout.write("committing\n")
    while (!existsSync(file)) await new Promise((resolve) => setTimeout(resolve, 5))
  })

const undoCommittingAfter = async (file: string) => {
  const checkpointer = Layer.effect(
    Checkpointer,
    Effect.map(Checkpointer, (real) => ({
      ...real,
      append: (id: string, events: ReadonlyArray<SessionEventInput>, expectedHead?: number) =>
        events.some((event) => event._tag === "LeafMoved")
          ? Effect.zipRight(untilExists(file), real.append(id, events, expectedHead))
          : real.append(id, events, expectedHead)
    }))
  ).pipe(Layer.provide(FileCheckpointer.layer({ dir })))
  const program = Effect.flatMap(TimeTravel.TimeTravel, (timeTravel) => Effect.either(timeTravel.undo(sessionId)))
  const outcome = await Effect.runPromise(
    program.pipe(Effect.provide(TimeTravel.layer.pipe(Layer.provideMerge(Layer.merge(checkpointer, Workspace.layer(workdir))))))
  )
  process.stdout.write(outcome._tag === "Right" ? "done\n" : `failed ${outcome.left._tag}\n`)
}

const lockInTurns = (ms: number) => {
  const pause = Effect.sleep(Duration.millis(ms))
  const turns = Effect.flatMap(SessionLock.SessionLock, (lock) =>
    Effect.zipRight(
      Effect.sync(() => process.stdout.write("started\n")),
      Effect.forever(Effect.zipRight(
        // The backend locks under the real path of its directory; so does this.
        lock.withLock({ directory: realpathSync(dir), sessionId, timeoutMs: 60_000 }, () => pause),
        pause
      ))
    ))
  return Effect.runPromise(turns.pipe(Effect.provide(SessionLock.layerNode())))
}

if (mode === "moves") await moves(Number(arg))
else if (mode === "commit-after") await undoCommittingAfter(arg)
else if (mode === "lock-in-turns") await lockInTurns(Number(arg))
else throw new Error(`unknown mode ${mode}`)
