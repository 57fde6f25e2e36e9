/**
 * The file backend's session lock across Linux namespaces, with real processes: writers
 * started with `unshare --net` (a network namespace of their own, as in a container or a
 * sandbox sharing the sessions directory) or `unshare --pid --fork` (a PID namespace of their
 * own) share one session with writers on the host. Also: a lock holder SIGKILLed in another
 * namespace, and a holder SIGSTOPped past its lease while another writer takes over.
 *
 * `unshare` needs root on Linux: CI runs there, so these tests run there; elsewhere they are
 * skipped with the reason printed.
 */
import { setTimeout as sleep } from "node:timers/promises"
import { describe, expect, it } from "vitest"
import { CheckpointBusyError, fileCheckpointer, UserMessage } from "../src/index.js"
import { DEFAULT_LEASE_MS, MAX_POLL_MS } from "../src/backends/file/SessionLock.js"
import type { WriterCommand } from "./workers/writer.js"
import { expectCleanExit, isRunning, live, makeTempDir, removeTempDirs, startWorker, type Worker } from "./support/processes.js"
import { command, expectContiguous, nextReply, readFresh, writerPool, writerScenarios } from "./support/writers.js"

const unavailable = process.platform !== "linux"
  ? `unshare is Linux-only (this is ${process.platform})`
  : process.getuid?.() !== 0
  ? "unshare needs root"
  : undefined
if (unavailable !== undefined) console.log(`file.namespaces.test.ts skipped: ${unavailable}`)

/** Its own network namespace: no abstract Unix socket of the host is visible there. */
const OWN_NETWORK = ["unshare", "--net"] as const
/** Its own PID namespace; if `unshare` is killed, so is the worker. */
const OWN_PIDS = ["unshare", "--pid", "--fork", "--kill-child"] as const
/** Its own user (root mapped to root), mount, network and PID namespaces: a rootless container. */
const OWN_EVERYTHING = ["unshare", "--user", "--map-root-user", "--mount", "--net", "--pid", "--fork", "--kill-child"] as const

/** Writers 2 and 3 in namespaces of their own, 0 and 1 on the host. */
const splitAt = (launcher: ReadonlyArray<string>) => (writer: number) => (writer >= 2 ? launcher : [])

describe.skipIf(unavailable !== undefined)("file backend across namespaces", () => {
  describe("writers 2 and 3 each in a network namespace of their own", () => {
    writerScenarios(
      writerPool("file", async () => makeTempDir("netns"), { launcher: splitAt(OWN_NETWORK) }),
      { retryCount: 200, timeoutMs: 120_000, setting: " (2 of 4 in network namespaces of their own)" }
    )
  })

  describe("writers 2 and 3 each in a PID namespace of their own", () => {
    writerScenarios(
      writerPool("file", async () => makeTempDir("pidns"), { launcher: splitAt(OWN_PIDS) }),
      { retryCount: 200, timeoutMs: 120_000, setting: " (2 of 4 in PID namespaces of their own)" }
    )
  })

  describe("lock holders in other namespaces", () => {
    const killAll = () => {
      for (const child of live) child.kill("SIGKILL")
    }

    it("a holder SIGKILLed in another namespace: waiters (on the host and in a third namespace) get the lock promptly, and the log is intact", async () => {
      const dir = makeTempDir("ns-kill")
      const trials = [
        { holder: OWN_NETWORK, name: "network namespace" },
        { holder: OWN_PIDS, name: "PID namespace" },
        { holder: OWN_EVERYTHING, name: "user, mount, network and PID namespace" }
      ]
      try {
        for (const [trial, { holder: launcher, name }] of trials.entries()) {
          const session = `held-${trial}`
          const holder = startWorker("lock-holder.ts", [dir, session], { launcher })
          // A waiter in a network namespace of its own, ready before the holder is killed.
          const remote = startWorker("appender.ts", [JSON.stringify({ mode: "once", dir, session, content: "remote" })], {
            launcher: OWN_NETWORK
          })
          await holder.waitForLine((line) => line === "locked")
          await remote.waitForLine((line) => line === "ready")

          // The lock is real across the namespaces: an append from the host gives up…
          const impatient = fileCheckpointer({ dir, busyTimeoutMs: 300 })
          try {
            const refused = await impatient.append(session, [new UserMessage({ content: "impatient" })]).then(
              (head) => new Error(`append succeeded (head ${head}) while a process in another namespace held the lock`),
              (error: unknown) => error
            )
            expect(refused).toBeInstanceOf(CheckpointBusyError)
          } finally {
            await impatient.close()
          }

          // …while a patient one from the host and one from the third namespace wait.
          const patient = fileCheckpointer({ dir })
          try {
            await patient.list()
            let settledAt: number | undefined
            const appended = patient.append(session, [new UserMessage({ content: "host" })]).finally(() => {
              settledAt = performance.now()
            })
            appended.catch(() => {})
            remote.child.stdin!.end("go\n")
            await sleep(300)
            expect(settledAt).toBeUndefined()
            expect(remote.lines.filter((line) => line.startsWith("ok ") || line.startsWith("error "))).toEqual([])

            const killedAt = performance.now()
            holder.child.kill("SIGKILL")
            const head = await appended
            const remoteLine = await remote.waitForLine((line) => line.startsWith("ok ") || line.startsWith("error "))
            await expectCleanExit(remote)
            const fromKill = settledAt! - killedAt
            console.log(
              `holder in a ${name} SIGKILLed: the host's waiting append succeeded ${fromKill.toFixed(1)} ms later ` +
                `(lease ${DEFAULT_LEASE_MS} ms, poll ${MAX_POLL_MS} ms); the other namespace's: ${remoteLine}`
            )
            // The holder's death is seen through its FIFO, not by waiting out its lease.
            expect(fromKill).toBeLessThan(2_000)
            expect(remoteLine).toMatch(/^ok [12]$/)
            expect(remoteLine).not.toBe(`ok ${head}`)

            // Every session of the directory so far reads back whole (the store's checkIntegrity).
            const { contents, events, integrity } = await readFresh("file", dir, session)
            expect(integrity.ok, integrity.detail).toBe(true)
            expectContiguous(events.map((e) => e.seq), 2)
            expect([...contents].sort()).toEqual(["host", "remote"])
            expect(contents[head - 1]).toBe("host")
          } finally {
            await patient.close()
          }
          await holder.closed
        }
      } finally {
        killAll()
        removeTempDirs()
      }
    })

    it("a holder SIGSTOPped past its lease: another writer takes over; once resumed, the holder writes nothing (CheckpointLockLostError); the log stays intact", async () => {
      const dir = makeTempDir("ns-stop")
      const session = "paused"
      const leaseMs = 1_000
      const env = { LITE_AGENT_TEST_LOCK_LEASE_MS: String(leaseMs) }
      const start = (writer: number, launcher: ReadonlyArray<string>) =>
        startWorker("writer.ts", ["file", dir, String(writer)], { ipc: true, launcher, env })
      // The holder in a network namespace of its own (unshare execs Node: the signals reach it).
      const sleeper = start(0, OWN_NETWORK)
      const worker = start(1, [])
      const send = (target: Worker, message: WriterCommand) => command(target, message)
      try {
        await nextReply(sleeper, "ready")
        await nextReply(worker, "ready")

        send(sleeper, { type: "slow-append", session, content: "sleeper", pauseMs: 2_000 })
        await nextReply(sleeper, "holding")
        expect(sleeper.child.kill("SIGSTOP")).toBe(true)
        const stoppedAt = performance.now()

        // The other writer takes the lock over once the lease has run out, and keeps writing.
        const count = 100
        send(worker, { type: "retry", session, count })
        const observer = fileCheckpointer({ dir })
        let takenOverAfter: number | undefined
        try {
          for (;;) {
            const head = await observer.head(session)
            if (head > 0 && takenOverAfter === undefined) takenOverAfter = performance.now() - stoppedAt
            if (head >= 30 && performance.now() - stoppedAt > 2_500) break
            await sleep(20)
          }
        } finally {
          await observer.close()
        }
        expect(isRunning(worker.child)).toBe(true)
        // Resume the holder while the other writer is still at work.
        expect(sleeper.child.kill("SIGCONT")).toBe(true)
        const resumed = await nextReply(sleeper, "slow-result")
        const result = await nextReply(worker, "retry-result")
        console.log(
          `holder SIGSTOPped with the lock: taken over ${takenOverAfter?.toFixed(0)} ms later (lease ${leaseMs} ms); ` +
            `resumed, its append: ${resumed.ok ? `landed at ${resumed.head}` : resumed.tag}; the other writer: ` +
            `${result.heads.length} appends, ${result.busy} busy and ${result.conflicts} conflicts retried`
        )
        expect(takenOverAfter).toBeGreaterThanOrEqual(leaseMs - 100)
        // Its lock was taken while it slept, so it must not have written: a typed error, nothing else.
        expect(resumed).toMatchObject({ ok: false, tag: "CheckpointLockLostError" })

        // After the error, the resumed writer can simply retry.
        send(sleeper, { type: "retry", session, count: 1 })
        const retried = await nextReply(sleeper, "retry-result")

        const { contents, events, head, integrity } = await readFresh("file", dir, session)
        expect(integrity.ok, integrity.detail).toBe(true)
        expect(head).toBe(count + 1)
        expectContiguous(events.map((e) => e.seq), count + 1)
        expect(contents.filter((content) => content.startsWith("w1:"))).toEqual(
          Array.from({ length: count }, (_, index) => `w1:${index}`)
        )
        expect(contents.filter((content) => !content.startsWith("w1:"))).toEqual(["w0:0"])
        expect(contents[retried.heads[0]! - 1]).toBe("w0:0")
        result.heads.forEach((returned, index) => expect(contents[returned - 1]).toBe(`w1:${index}`))
        for (const target of [sleeper, worker]) send(target, { type: "exit" })
        await Promise.all([expectCleanExit(sleeper), expectCleanExit(worker)])
      } finally {
        killAll()
        removeTempDirs()
      }
    })
  })
})
