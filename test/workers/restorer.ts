/**
 * Worker for test/restore.processes.test.ts: a restore in a Node process of its own that kills
 * itself (SIGKILL, nothing flushed or put back) at a chosen point.
 *
 *   node --import tsx test/workers/restorer.ts <file|sqlite> <location> <workdir> <sessionId> <seq|undo|redo> <killAt>
 *
 * `undo` / `redo` undo or redo the session's last move instead of a restore; `fork:<seq>:<forkId>`
 * forks it from just before `seq` in the workdir, `fork:<seq>:<forkId>:<dir>` into `dir`.
 *
 * killAt: `operation:N` — just before the N-th file write or delete (1: the intent is in the
 * log, no file changed yet); `before-move` — every file done, the session's leaf not moved yet;
 * `after-move` — the leaf moved, the process not told yet; `never`; `race:<file>` — never killed,
 * but the intent is appended only once `<file>` exists (so that two workers planned from the same
 * state race on it; it prints `waiting` when it gets there); for a fork, `before-fork` / `after-fork`
 * — just before / after its `SessionForked` is stored. Prints `done`, or `failed <error tag>` when
 * the restore fails.
 */
import { existsSync } from "node:fs"
import { Effect, Layer } from "effect"
import { SqliteCheckpointer } from "../../src/checkpoint-sqlite.js"
import { Checkpointer, FileCheckpointer, type SessionEventInput, TimeTravel, Workspace } from "../../src/core.js"

const [backend, location, workdir, sessionId, seqArg, killAt] = process.argv.slice(2) as [string, string, string, string, string, string]

/** Until `file` exists, looked for every few milliseconds. */
const waitFor = (file: string) =>
  Effect.promise(async () => {
    process.stdout.write("waiting\n")
    while (!existsSync(file)) await new Promise((resolve) => setTimeout(resolve, 5))
  })

const die = (point: string) =>
  point === killAt ? Effect.zipRight(Effect.sync(() => process.kill(process.pid, "SIGKILL")), Effect.never) : Effect.void

const store = backend === "sqlite" ? SqliteCheckpointer.layer({ file: location }) : FileCheckpointer.layer({ dir: location })
const checkpointer = Layer.effect(
  Checkpointer,
  Effect.map(Checkpointer, (real) => ({
    ...real,
    append: (id: string, events: ReadonlyArray<SessionEventInput>, expectedHead?: number) =>
      events.some((event) => event._tag === "SessionForked")
        ? Effect.zipRight(die("before-fork"), Effect.tap(real.append(id, events, expectedHead), () => die("after-fork")))
        : events.some((event) => event._tag === "LeafMoved")
        ? Effect.zipRight(die("before-move"), Effect.tap(real.append(id, events, expectedHead), () => die("after-move")))
        : events.some((event) => event._tag === "RestoreStarted") && killAt.startsWith("race:")
        ? Effect.zipRight(waitFor(killAt.slice("race:".length)), real.append(id, events, expectedHead))
        : real.append(id, events, expectedHead)
  }))
).pipe(Layer.provide(store))

let operations = 0
const workspace = Layer.sync(Workspace.Workspace, () => {
  const real = Workspace.make(workdir)
  const counted = <A, E>(operation: Effect.Effect<A, E>) => Effect.suspend(() => Effect.zipRight(die(`operation:${++operations}`), operation))
  return {
    ...real,
    write: (path: string, data: Uint8Array, mode: number) => counted(real.write(path, data, mode)),
    remove: (path: string) => counted(real.remove(path))
  }
})

const program = Effect.gen(function*() {
  const timeTravel = yield* TimeTravel.TimeTravel
  const [, forkSeq, forkId, forkDir] = seqArg.split(":")
  const move = seqArg === "undo"
    ? timeTravel.undo(sessionId)
    : seqArg === "redo"
    ? timeTravel.redo(sessionId)
    : seqArg.startsWith("fork:")
    ? timeTravel.fork(sessionId, Number(forkSeq), { id: forkId!, ...(forkDir === undefined ? {} : { workdir: forkDir }) })
    : timeTravel.restore(sessionId, Number(seqArg))
  const outcome = yield* Effect.either(move)
  process.stdout.write(outcome._tag === "Right" ? "done\n" : `failed ${outcome.left._tag}\n`)
})

await Effect.runPromise(program.pipe(Effect.provide(TimeTravel.layer.pipe(Layer.provideMerge(Layer.merge(checkpointer, workspace))))))
