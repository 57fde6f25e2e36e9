/**
 * Two agents (two processes' worth: each its own checkpointer and its own concurrency rules)
 * moving one session's leaf at once, in one workdir. The second sees the first's restore under
 * way as one a crash cut short and finishes it too; whichever commits second must not then put
 * back what it found — the other's work — and leave files that are not the leaf's.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { createLiteAgent, fileCheckpointer } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { closeAfterEach, tempDir } from "./support/agent.js"

const track = closeAfterEach()
const FILES = Array.from({ length: 12 }, (_, i) => `f${i}.txt`)
const writes = (version: string) => FILES.map((path) => ({ name: "write_file", input: { path, content: `${version}\n` } }))

describe("the same move by two agents at once", () => {
  it.each([0, 3, 6, 11])("the second starts after the first wrote file %i: both end, and the files are the leaf's", async (startAfter) => {
    const workdir = tempDir("moves")
    const store = tempDir("moves-store")
    const first = track(createLiteAgent({
      model: scripted([{ toolCalls: writes("one") }, { text: "one" }, { toolCalls: writes("two") }, { text: "two" }]),
      workdir,
      checkpointer: fileCheckpointer({ dir: store }),
      sessionId: "s"
    }))
    await first.send("one")
    await first.send("two")
    const [, second] = await first.listCheckpoints("s")
    await first.restore("s", second!.seq)
    expect(readFileSync(join(workdir, "f0.txt"), "utf8")).toBe("one\n")
    const other = track(createLiteAgent({ model: scripted([]), workdir, checkpointer: fileCheckpointer({ dir: store }), sessionId: "s" }))

    // The first undoes the restore; once it has written `startAfter + 1` files, the other undoes too.
    let written = 0
    let otherUndo: Promise<unknown> | undefined
    first.subscribe((event) => {
      if (event.type === "checkpoint_restore" && event.phase === "progress" && ++written === startAfter + 1) {
        otherUndo = other.undo("s").then((result) => ({ ok: result }), (error: unknown) => ({ error }))
      }
    })
    const mine = await first.undo("s").then((result) => ({ ok: result }), (error: unknown) => ({ error }))
    const theirs = await otherUndo
    expect(theirs).toBeDefined()
    // The leaf is where the undo goes (the tip: "two"), by one of them or both, and so are the files.
    const tree = await first.tree("s")
    expect(tree.leaf).not.toBe(second!.seq - 1)
    expect(FILES.map((path) => readFileSync(join(workdir, path), "utf8"))).toEqual(FILES.map(() => "two\n"))
    // Each ended as a success or a refusal that changed nothing (the undo already done) — never a failure that put files back.
    expect("ok" in mine).toBe(true)
    if ("error" in (theirs as object)) expect((theirs as { error: unknown }).error).toMatchObject({ _tag: "RestoreRefusedError" })
  })
})
