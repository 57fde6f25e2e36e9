/**
 * The store's quota (`maxStoreBytes`): it never deletes anything and never refuses an append;
 * past it, captures and the file tools' snapshots store no new content and record the paths as
 * not covered, saying why; `du` says whether it is reached. On the memory, file and SQLite
 * backends (the quota is written once, over every backend's primitives; PostgreSQL passes the
 * option through: test/postgres.backend.test.ts), then through the agent with real files.
 */
import { randomBytes } from "node:crypto"
import { readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect, Layer } from "effect"
import { describe, expect, it } from "vitest"
import { Checkpointer, type CheckpointerService, ConfigurationError, FileCheckpointer, FileSnapshot, MemoryCheckpointer, RestoreRefusedError } from "../src/core.js"
import { SqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { createLiteAgent, fileCheckpointer, memoryCheckpointer } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { DEFAULT_GRACE_MS } from "../src/core/internal/objectCollection.js"
import { sha256Hex } from "../src/core/internal/sha256.js"
import { shiftedBy } from "../src/testing/helpers.js"
import { closeAfterEach, tempDir } from "./support/agent.js"

const track = closeAfterEach()

const snapshotOf = (path: string, data: Uint8Array) =>
  new FileSnapshot({ toolUseId: "toolu_q", path, state: { _tag: "content", data, mode: 0o644, size: data.length, sha256: sha256Hex(data) } })

const backends = {
  memory: (maxStoreBytes?: number) => (maxStoreBytes === undefined ? MemoryCheckpointer.layer : MemoryCheckpointer.layerWith({ maxStoreBytes })),
  file: (maxStoreBytes?: number) => FileCheckpointer.layer({ dir: tempDir("quota-file"), ...(maxStoreBytes === undefined ? {} : { maxStoreBytes }) }),
  sqlite: (maxStoreBytes?: number) =>
    SqliteCheckpointer.layer({ file: join(tempDir("quota-db"), "s.db"), ...(maxStoreBytes === undefined ? {} : { maxStoreBytes }) })
}

const run = <A, E>(layer: Layer.Layer<Checkpointer, unknown>, use: (c: CheckpointerService) => Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(Checkpointer, use).pipe(Effect.provide(layer))))

describe.each(Object.keys(backends) as Array<keyof typeof backends>)("the store's quota on the %s backend", (name) => {
  const layerOf = backends[name]

  it("counts what is stored, refuses no append, deletes nothing, says in du when it is reached; gc frees room", () =>
    run(layerOf(10_000), (c) =>
      Effect.gen(function*() {
        const first = randomBytes(6_000)
        const second = randomBytes(6_000)
        const empty = yield* c.storeRoom([sha256Hex(first)])
        expect(empty).toEqual({ maxStoreBytes: 10_000, storeBytes: 0, roomBytes: 10_000, stored: new Set() })

        yield* c.append("q", [snapshotOf("a", first)])
        // This checkpointer's own writes count at once, before the next measure of the store.
        const after = yield* c.storeRoom([sha256Hex(first), sha256Hex(second)])
        expect(after!.stored).toEqual(new Set([sha256Hex(first)]))
        expect(after!.storeBytes).toBeGreaterThanOrEqual(first.length)
        expect(after!.roomBytes).toBe(10_000 - after!.storeBytes)

        // Past the quota an append is still taken whole: only the writers that ask stop storing.
        yield* c.append("q", [snapshotOf("b", second)])
        expect((yield* c.storeRoom([]))!.roomBytes).toBe(0)
        expect(Buffer.from(yield* c.readSnapshot("q", sha256Hex(first))).equals(first)).toBe(true)
        expect(Buffer.from(yield* c.readSnapshot("q", sha256Hex(second))).equals(second)).toBe(true)
        const usage = yield* c.du()
        expect(usage.quota).toEqual({ maxStoreBytes: 10_000, storeBytes: usage.objects.bytes + usage.logBytes, reached: true })
        expect(usage.objects.objects).toBe(2)

        // Deleting the session and collecting past the grace period frees the room; the next ask measures afresh.
        yield* c.delete("q")
        yield* shiftedBy(2 * DEFAULT_GRACE_MS)(c.gc())
        const freed = yield* shiftedBy(2 * DEFAULT_GRACE_MS)(c.storeRoom([sha256Hex(first)]))
        expect(freed).toEqual({ maxStoreBytes: 10_000, storeBytes: 0, roomBytes: 10_000, stored: new Set() })
        expect((yield* c.du()).quota).toEqual({ maxStoreBytes: 10_000, storeBytes: 0, reached: false })
      })))

  it("without a quota: no room to ask for, nothing about it in du", () =>
    run(layerOf(), (c) =>
      Effect.gen(function*() {
        yield* c.append("q", [snapshotOf("a", randomBytes(100))])
        expect(yield* c.storeRoom([])).toBeUndefined()
        expect("quota" in (yield* c.du())).toBe(false)
      })))

  it("a quota that is not a non-negative integer is a ConfigurationError naming it", async () => {
    for (const bad of [-1, 1.5, "100", Number.NaN]) {
      const failure = await Effect.runPromise(
        Effect.flip(Effect.scoped(Layer.build(layerOf(bad as number))))
      )
      expect(failure).toBeInstanceOf(ConfigurationError)
      expect((failure as ConfigurationError).message).toContain("maxStoreBytes")
    }
  })
})

describe("the store's quota through the agent", () => {
  it("past it a capture stores no new content: those paths are not covered, with the reason; raised, the next capture stores them", async () => {
    const workdir = tempDir("quota-work")
    const originals = { "a.txt": randomBytes(3_000), "b.txt": randomBytes(3_000), "c.txt": randomBytes(3_000) }
    for (const [path, data] of Object.entries(originals)) writeFileSync(join(workdir, path), data)
    const dir = tempDir("quota-store")
    const tight = track(fileCheckpointer({ dir, maxStoreBytes: 4_000 }))
    const first = track(createLiteAgent({
      model: scripted([{ toolCalls: [{ name: "write_file", input: { path: "d.txt", content: "d\n" } }] }, { text: "wrote d" }]),
      workdir,
      checkpointer: tight,
      sessionId: "s"
    }))
    const turn = await first.send("first")
    // The store was empty: room for one of the three files, not for the others — which each
    // capture of the turn (before the prompt, after the tool) tried again, and reported.
    const refusedPaths = [...new Set((turn.captureProblems ?? []).filter((problem) => problem.detail.includes("reached its quota (maxStoreBytes 4000")).map((problem) => problem.path))].sort()
    expect(refusedPaths).toHaveLength(2)
    const usage = await tight.du()
    expect(usage.quota).toEqual({ maxStoreBytes: 4_000, storeBytes: usage.objects.bytes + usage.logBytes, reached: true })
    const [atFirst] = await first.listCheckpoints("s")
    expect(atFirst!.notCovered.map((left) => left.path).sort()).toEqual(refusedPaths)
    expect(atFirst!.notCovered[0]!.reason).toContain("no new content is stored until gc, pruning or deleting sessions frees room")
    await first.close()
    await tight.close()

    // The quota raised: the next capture (the refused paths made it walk the workdir) stores them.
    const roomy = track(fileCheckpointer({ dir, maxStoreBytes: 10_000_000 }))
    const second = track(createLiteAgent({
      model: scripted([{ text: "looked" }, { toolCalls: [{ name: "shell", input: { command: "for f in a b c; do echo changed > $f.txt; done" } }] }, { text: "changed" }]),
      workdir,
      checkpointer: roomy,
      sessionId: "s"
    }))
    expect((await second.send("second")).captureProblems ?? []).toEqual([])
    await second.send("third")
    const checkpoints = await second.listCheckpoints("s")
    const atSecond = checkpoints.find((checkpoint) => checkpoint.prompt === "second")!
    expect(atSecond.notCovered).toEqual([])
    await second.restore("s", atSecond.seq)
    for (const [path, data] of Object.entries(originals)) expect(readFileSync(join(workdir, path))).toEqual(data)
    // The first checkpoint's history stays what it was: those two paths were not captured then.
    const back = await second.restore("s", checkpoints.find((checkpoint) => checkpoint.prompt === "first")!.seq, { dryRun: true })
    expect(back.notCovered.map((left) => left.path).sort()).toEqual(refusedPaths)
    expect((await roomy.du()).quota).toMatchObject({ maxStoreBytes: 10_000_000, reached: false })
  })

  it("past it a file tool's snapshot keeps no new content: a restore refuses that path, saying why, and changes nothing", async () => {
    const workdir = tempDir("quota-tools")
    writeFileSync(join(workdir, "a.txt"), "the user's\n")
    const checkpointer = track(memoryCheckpointer({ maxStoreBytes: 0 }))
    const agent = track(createLiteAgent({
      model: scripted([{ toolCalls: [{ name: "write_file", input: { path: "a.txt", content: "the agent's\n" } }] }, { text: "wrote" }]),
      workdir,
      checkpointer,
      sessionId: "t",
      workspace: { capture: "tools" }
    }))
    await agent.send("write")
    const [checkpoint] = await agent.listCheckpoints("t")
    const refused = await agent.restore("t", checkpoint!.seq).then(() => undefined, (error: unknown) => error)
    expect(refused).toBeInstanceOf(RestoreRefusedError)
    expect((refused as RestoreRefusedError).refusals).toEqual([
      { reason: "snapshot_unavailable", path: "a.txt", detail: expect.stringContaining("the store reached its quota (maxStoreBytes 0") }
    ])
    expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe("the agent's\n")
  })

  it("memoryCheckpointer and fileCheckpointer refuse a bad quota at once", () => {
    expect(() => memoryCheckpointer({ maxStoreBytes: -5 })).toThrow(/maxStoreBytes/)
    expect(() => fileCheckpointer({ dir: tempDir("quota-bad"), maxStoreBytes: 0.5 })).toThrow(/maxStoreBytes/)
  })
})
