/**
 * A session deleted by one process while another forks it (issue: a fork that could not be
 * read, "event 1 is not there"). Real processes on one store: in every trial one of the two
 * gives way with a typed error — the delete refuses because the fork exists, or the fork fails
 * because its source went — and whatever fork exists afterwards reads whole.
 */
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { type StoredEvent, UserMessage } from "../src/index.js"
import { live, makeTempDir, removeTempDirs, startWorker, type Worker } from "./support/processes.js"
import { openStore } from "./support/stores.js"
import type { ForkerCommand, ForkerReply } from "./workers/forker.js"

afterAll(() => {
  for (const child of live) child.kill("SIGKILL")
  removeTempDirs()
})

const TRIALS = 60
const SOURCE_EVENTS = 4

const shown = (stored: StoredEvent) => (stored.event._tag === "UserMessage" ? stored.event.content : stored.event._tag)

const ask = async (worker: Worker, command: ForkerCommand) => {
  worker.child.send(command)
  return (await worker.nextMessage()) as ForkerReply
}

describe.each(["file", "sqlite"] as const)("delete while fork, across processes: %s", (backend) => {
  it(`${TRIALS} trials: a fork that exists afterwards is whole, and the loser of each race gets a typed error`, async () => {
    const location = backend === "sqlite" ? join(makeTempDir("fork-race-db"), "sessions.db") : makeTempDir("fork-race")
    const workers = [startWorker("forker.ts", [backend, location], { ipc: true }), startWorker("forker.ts", [backend, location], { ipc: true })]
    for (const worker of workers) expect(await worker.nextMessage()).toEqual({ ready: true })
    const store = await openStore(backend, location)
        try {
      for (let trial = 0; trial < TRIALS; trial++) {
        const source = `s${trial}`
        const fork = `f${trial}`
        await store.append(source, Array.from({ length: SOURCE_EVENTS }, (_, i) => new UserMessage({ content: `${trial}.${i}` })))
        // Which process deletes alternates; the pauses spread the two over each other's steps.
        const [deleter, forker] = trial % 2 === 0 ? workers : [workers[1]!, workers[0]!]
        const [deleted, forked] = await Promise.all([
          ask(deleter!, { op: "delete", session: source, jitterMs: 4 }),
          ask(forker!, { op: "fork", from: source, fork, at: SOURCE_EVENTS, jitterMs: 4 })
        ])
        const context = `trial ${trial}: delete ${JSON.stringify(deleted)}, fork ${JSON.stringify(forked)}`
        // Never both: a fork outliving its source could not read the events it shares.
        expect(deleted.ok && forked.ok, context).toBe(false)
        if (!deleted.ok) expect(deleted.tag, context).toBe("SessionForkedError")
        if (!forked.ok) expect(forked.tag, context).toBe("InvalidEventError")
        if (forked.ok) {
          expect((await store.read(fork)).map(shown), context).toEqual(
            [...Array.from({ length: SOURCE_EVENTS }, (_, i) => `${trial}.${i}`), "SessionForked"]
          )
        } else {
          expect(await store.head(fork), context).toBe(0)
        }
        expect(await store.head(source), context).toBe(deleted.ok ? 0 : SOURCE_EVENTS + 1)
      }
      expect(await store.checkIntegrity()).toMatchObject({ ok: true })
    } finally {
      await store.close()
      for (const worker of workers) {
        worker.child.send({ op: "close" } satisfies ForkerCommand)
        await worker.closed
      }
    }
  }, 120_000)
})
