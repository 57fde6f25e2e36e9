/**
 * Worker for test/file.processes.test.ts: a long-lived writer process driven over IPC, so
 * one set of processes can serve several tests (starting Node with Effect loaded costs
 * seconds on a small machine).
 *
 *   node --import tsx test/workers/writer.ts <dir> <writer>
 *
 * Sends `{ type: "ready" }` once its checkpointer on `<dir>` is open, then answers:
 *
 * - `{ type: "retry", session, count }`: `count` single-event appends, each `head()` then
 *   `append(id, [event], head)`, re-reading the head and retrying on
 *   `CheckpointConflictError`. Event contents are "w<writer>:<index>". Replies
 *   `{ type: "retry-result", heads, expected, conflicts }` (the head each append returned
 *   and the expected head it succeeded with).
 * - `{ type: "batch", session, count, size }`: `count` appends of `size`-event batches
 *   without an expected head ("w<writer>:b<index>:<part>/<size>"). Replies
 *   `{ type: "batch-result", heads }`.
 * - `{ type: "round", session, round, expectedHead }`: one append of "r<round>:w<writer>"
 *   with that expected head. Replies `{ type: "round-result", round, writer, ok: true, head }`
 *   or `{ ..., ok: false, tag, sessionId, expected, actual }` (the error's fields).
 * - `{ type: "exit" }`: closes the checkpointer and exits.
 */
import { CheckpointConflictError, fileCheckpointer, UserMessage } from "../../src/index.js"

const [dir, writerArg] = process.argv.slice(2)
if (dir === undefined || writerArg === undefined) throw new Error("usage: writer.ts <dir> <writer>")
const writer = Number(writerArg)

export type WriterCommand =
  | { readonly type: "retry"; readonly session: string; readonly count: number }
  | { readonly type: "batch"; readonly session: string; readonly count: number; readonly size: number }
  | { readonly type: "round"; readonly session: string; readonly round: number; readonly expectedHead: number }
  | { readonly type: "exit" }

const send = (message: object) =>
  new Promise<void>((resolve, reject) => {
    if (process.send === undefined) return reject(new Error("writer.ts needs an IPC channel"))
    process.send(message, undefined, {}, (error) => (error ? reject(error) : resolve()))
  })

const tagOf = (error: unknown) =>
  typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "unknown"

const checkpointer = fileCheckpointer({ dir })

const retry = async (session: string, count: number) => {
  const heads: Array<number> = []
  const expected: Array<number> = []
  let conflicts = 0
  for (let index = 0; index < count; index++) {
    const event = new UserMessage({ content: `w${writer}:${index}` })
    for (;;) {
      const head = await checkpointer.head(session)
      try {
        heads.push(await checkpointer.append(session, [event], head))
        expected.push(head)
        break
      } catch (error) {
        if (!(error instanceof CheckpointConflictError)) throw error
        if (error.sessionId !== session || error.expected !== head || error.actual === head) {
          throw new Error(`inconsistent conflict ${JSON.stringify(error)} after reading head ${head}`)
        }
        conflicts++
      }
    }
  }
  await send({ type: "retry-result", heads, expected, conflicts })
}

const batch = async (session: string, count: number, size: number) => {
  const heads: Array<number> = []
  for (let index = 0; index < count; index++) {
    const events = Array.from(
      { length: size },
      (_, part) => new UserMessage({ content: `w${writer}:b${index}:${part}/${size}` })
    )
    heads.push(await checkpointer.append(session, events))
  }
  await send({ type: "batch-result", heads })
}

const round = async (session: string, round: number, expectedHead: number) => {
  try {
    const head = await checkpointer.append(session, [new UserMessage({ content: `r${round}:w${writer}` })], expectedHead)
    await send({ type: "round-result", round, writer, ok: true, head })
  } catch (error) {
    if (error instanceof CheckpointConflictError) {
      const { _tag: tag, actual, expected, sessionId } = error
      await send({ type: "round-result", round, writer, ok: false, tag, sessionId, expected, actual })
    } else {
      await send({ type: "round-result", round, writer, ok: false, tag: tagOf(error), detail: String(error) })
    }
  }
}

const fail = (error: unknown) => {
  process.stderr.write(`writer ${writer} failed: ${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
  process.exit(1)
}

process.on("message", (command: WriterCommand) => {
  switch (command.type) {
    case "retry":
      return void retry(command.session, command.count).catch(fail)
    case "batch":
      return void batch(command.session, command.count, command.size).catch(fail)
    case "round":
      return void round(command.session, command.round, command.expectedHead).catch(fail)
    case "exit":
      return void checkpointer.close().then(() => process.exit(0), fail)
  }
})

// Open the checkpointer (directory checks, runtime) before reporting ready.
checkpointer.list().then(() => send({ type: "ready", writer }), fail)
