/**
 * A store written before objects were shared (blobs in each session's `blobs/`) moves them into
 * the shared object store when it is opened. Real processes SIGKILLed at random moments of that
 * move: after every kill each blob is in one place or the other, and the next open finishes it.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { Checkpointer } from "../src/core/Checkpointer.js"
import { DEFAULT_GRACE_MS } from "../src/core/internal/objectCollection.js"
import { shiftedBy } from "../src/testing/helpers.js"
import { sha256Hex } from "../src/core/internal/sha256.js"
import { fileCheckpointer, FileSnapshot } from "../src/index.js"
import { live, makeTempDir, removeTempDirs, startWorker } from "./support/processes.js"

/** Runs a worker with `dir` mounted read-only over itself, in a mount namespace of its own. */
const readOnlyMount = (dir: string) => ({
  launcher: ["unshare", "--mount", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', dir]
})

afterAll(() => {
  for (const child of live) child.kill("SIGKILL")
  removeTempDirs()
})

const SESSIONS = 6
const BLOBS_PER_SESSION = 200
const MAX_KILLS = 8

const objectPath = (dir: string, sha256: string) => join(dir, ".objects", sha256.slice(0, 2), sha256.slice(2))
const contentOf = (session: number, n: number) =>
  // Every other session shares half its contents with the one before: moved once, whoever moves it.
  new TextEncoder().encode(`content ${n % 2 === 0 && session % 2 === 1 ? session - 1 : session} ${n} `.repeat(1 + (n % 5)))

describe("moving per-session blobs into the shared store, across processes", () => {
  it("SIGKILLs at random moments lose nothing; the next open finishes the move", async () => {
    const dir = makeTempDir("blob-move")
    const writer = fileCheckpointer({ dir })
    const expected = new Map<string, Array<Uint8Array>>()
    for (let s = 0; s < SESSIONS; s++) {
      const contents = Array.from({ length: BLOBS_PER_SESSION }, (_, n) => contentOf(s, n))
      expected.set(`s${s}`, contents)
      await writer.append(`s${s}`, contents.map((data, n) =>
        new FileSnapshot({ toolUseId: "t", path: `f${n}`, state: { _tag: "content", data, mode: 0o644, size: data.length, sha256: sha256Hex(data) } })))
    }
    await writer.close()
    // As the earlier release left it: each session's blobs in its own directory, its log version 1.
    for (const [session, contents] of expected) {
      mkdirSync(join(dir, session, "blobs"))
      for (const data of contents) writeFileSync(join(dir, session, "blobs", sha256Hex(data)), data)
      const log = join(dir, session, "log")
      writeFileSync(log, readFileSync(log, "utf8").replace('"version":2', '"version":1'))
    }
    rmSync(join(dir, ".objects"), { recursive: true })

    // A store open for reading only cannot move them: it reads them where they are.
    const sample = expected.get("s1")![3]!
    const reader = startWorker("store-probe.ts", ["file", dir, "s1", `snapshot:${sha256Hex(sample)}`], readOnlyMount(dir))
    expect((await reader.closed).code, reader.stderr()).toBe(0)
    expect(reader.lines.map((line) => JSON.parse(line) as { ok: boolean; value: string })[0]).toEqual({
      op: `snapshot:${sha256Hex(sample)}`,
      ok: true,
      value: new TextDecoder().decode(sample)
    })
    expect(existsSync(join(dir, "s1", "blobs", sha256Hex(sample)))).toBe(true)

    const pending = () => [...expected.keys()].filter((session) => existsSync(join(dir, session, "blobs")))
    const remaining = () =>
      pending().reduce((total, session) => total + (existsSync(join(dir, session, "blobs")) ? readdirSync(join(dir, session, "blobs")).length : 0), 0)
    let kills = 0
    let partial = 0
    while (pending().length > 0 && kills < MAX_KILLS) {
      const before = remaining()
      const opener = startWorker("opener.ts", ["file", dir, "0", `k${kills}`])
      // Killed once the move is under way (or over): at some point of it, not before it starts.
      let ended = false
      void opener.closed.then(() => (ended = true))
      while (!ended && remaining() === before) await new Promise((resolve) => setTimeout(resolve, 2))
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 40))
      opener.child.kill("SIGKILL")
      await opener.closed
      kills++
      // Nothing lost: each blob is still in its session's directory or already an object.
      for (const [session, contents] of expected) {
        for (const data of contents) {
          const sha256 = sha256Hex(data)
          const there = existsSync(join(dir, session, "blobs", sha256)) || existsSync(objectPath(dir, sha256))
          expect(there, `${session} ${sha256} after kill ${kills}`).toBe(true)
        }
      }
      if (pending().length > 0 && existsSync(join(dir, ".objects"))) partial++
    }
    console.log(`blob move: ${kills} kills, ${partial} of them left the move part done`)

    const store = fileCheckpointer({ dir })
    try {
      for (const [session, contents] of expected) {
        for (const data of contents) {
          expect(Array.from(await store.readSnapshot(session, sha256Hex(data)))).toEqual(Array.from(data))
        }
        expect(existsSync(join(dir, session, "blobs"))).toBe(false)
        expect(readFileSync(join(dir, session, "log"), "utf8")).toMatch(/^\{"format":"lite-agent\/session-log","version":2,/)
      }
      // Writes the kills cut short are left to a collection once they are old.
      await Effect.runPromise(shiftedBy(2 * DEFAULT_GRACE_MS)(Effect.flatMap(Checkpointer, (c) => c.gc())).pipe(Effect.provide(store.layer)))
      expect(readdirSync(join(dir, ".objects", "tmp"))).toEqual([])
    } finally {
      await store.close()
    }
  }, 180_000)
})
