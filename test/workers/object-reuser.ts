/**
 * Worker for test/objects.gc.processes.test.ts: one side of the lost-object race on a store.
 *
 *   node test/workers/object-reuser.ts <file|sqlite|postgres> <location> writer <name>
 *   node test/workers/object-reuser.ts <file|sqlite|postgres> <location> collector
 *
 * A writer, over and over: stores an object as if two hours ago from a session it deletes at once
 * (an old object no log references: what a collector deletes), waits a moment, then references it
 * from its own session — half the time with the bytes, half by hash alone — and prints
 * `{"acked":{session,seq,sha256,text}}` once the append returned (or `{"refused":…}` when the
 * reference came after the object was collected: the typed refusal). A collector runs `gc` with
 * the shortest grace over and over and prints `{"gc":report}` after each run.
 */
import { Effect } from "effect"
import { Checkpointer } from "../../src/core/Checkpointer.js"
import { MIN_GRACE_MS } from "../../src/core/internal/objectCollection.js"
import { sha256Hex } from "../../src/core/internal/sha256.js"
import { FileSnapshot } from "../../src/index.js"
import { shiftedBy } from "../../src/testing/helpers.js"
import { isStoreBackend, openStore } from "../support/stores.js"

const [backend, location, role, name] = process.argv.slice(2)
if (!isStoreBackend(backend) || location === undefined || (role !== "writer" && role !== "collector")) {
  throw new Error("usage: object-reuser.ts <backend> <location> writer <name> | collector")
}

const store = await openStore(backend, location)
const print = (line: unknown) => process.stdout.write(JSON.stringify(line) + "\n")
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

if (role === "collector") {
  for (;;) print({ gc: await store.gc({ graceMs: MIN_GRACE_MS }) })
}

const TWO_HOURS_MS = 2 * 60 * 60_000
const withBytes = (path: string, text: string) => {
  const data = new TextEncoder().encode(text)
  return new FileSnapshot({ toolUseId: "t", path, state: { _tag: "content", data, mode: 0o644, size: data.length, sha256: sha256Hex(data) } })
}
const byHash = (path: string, text: string) => {
  const data = new TextEncoder().encode(text)
  return new FileSnapshot({ toolUseId: "t", path, state: { _tag: "stored", sha256: sha256Hex(data), mode: 0o644, size: data.length } })
}
const appendLongAgo = (session: string, event: FileSnapshot) =>
  Effect.runPromise(shiftedBy(-TWO_HOURS_MS)(Effect.flatMap(Checkpointer, (c) => c.append(session, [event]))).pipe(Effect.provide(store.layer)))

const session = `w-${name}-${process.pid}`
for (let n = 0; ; n++) {
  const text = `object ${name} ${process.pid} ${n} `.repeat(1 + (n % 7))
  const old = `old-${name}-${process.pid}-${n}`
  await appendLongAgo(old, withBytes("a", text))
  await store.delete(old)
  await pause(Math.random() * 30)
  try {
    const seq = await store.append(session, [n % 2 === 0 ? withBytes(`f${n}`, text) : byHash(`f${n}`, text)])
    print({ acked: { session, seq, sha256: sha256Hex(new TextEncoder().encode(text)), text } })
  } catch (error) {
    if ((error as { readonly _tag?: string })._tag !== "InvalidEventError") throw error
    print({ refused: { session, n } })
  }
}
