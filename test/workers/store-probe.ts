/**
 * Worker for test/sqlite.availability.test.ts: opens a store and runs operations on one
 * session, printing one JSON line per operation — `{ op, ok: true, value }` or
 * `{ op, ok: false, tag, code, message }` — then closes it. Meant to run where the test
 * process cannot: as another user, or in a mount namespace of its own (a read-only bind
 * mount, a tiny tmpfs).
 *
 *   node --import tsx test/workers/store-probe.ts <file|sqlite> <location> <session> <op>...
 *
 * Operations: `read` (the contents of the session's events), `snapshot:<sha256>` (an object's
 * bytes as text), `append:<content>`, `fill`
 * (appends of 64 KiB events until one fails; the value is how many succeeded), `delete`,
 * `integrity` (the store's integrity report), `shutdown:<mount point>` (shuts the file system
 * mounted there down, as a failing device would: ext4's FS_IOC_SHUTDOWN, through python3's
 * ioctl, as Node has none; every later read or write of it fails with EIO).
 */
import { execFileSync } from "node:child_process"
import { UserMessage } from "../../src/index.js"
import { contentOf } from "../support/contents.js"
import { isStoreBackend, openStore } from "../support/stores.js"

const [backend, location, session, ...ops] = process.argv.slice(2)
if (!isStoreBackend(backend) || location === undefined || session === undefined) {
  throw new Error("usage: store-probe.ts <backend> <location> <session> <op>...")
}

const outcome = async (op: string, run: () => Promise<unknown>) => {
  try {
    console.log(JSON.stringify({ op, ok: true, value: await run() }))
  } catch (error) {
    const { _tag, code } = error as { readonly _tag?: string; readonly code?: string }
    console.log(JSON.stringify({ op, ok: false, tag: _tag, code, message: String(error) }))
  }
}

const checkpointer = await openStore(backend, location)
const big = "x".repeat(64 * 1024)
for (const op of ops) {
  if (op === "read") await outcome(op, async () => (await checkpointer.read(session)).map(contentOf))
  else if (op.startsWith("snapshot:")) {
    await outcome(op, async () => new TextDecoder().decode(await checkpointer.readSnapshot(session, op.slice("snapshot:".length))))
  } else if (op.startsWith("append:")) {
    const content = op.slice("append:".length)
    await outcome(op, () => checkpointer.append(session, [new UserMessage({ content, origin: "user" })]))
  } else if (op === "fill") {
    let appended = 0
    await outcome(op, async () => {
      for (;;) {
        await checkpointer.append(session, [new UserMessage({ content: `${appended}:${big}`, origin: "user" })])
        appended++
      }
    })
    console.log(JSON.stringify({ op: "filled", ok: true, value: appended }))
  } else if (op === "delete") await outcome(op, () => checkpointer.delete(session))
  else if (op === "integrity") await outcome(op, () => checkpointer.checkIntegrity())
  else if (op.startsWith("shutdown:")) {
    // FS_IOC_SHUTDOWN = _IOR('X', 125, __u32); flags 0: flush what is written, then stop.
    const shutdown = "import fcntl, os, struct, sys; fcntl.ioctl(os.open(sys.argv[1], os.O_RDONLY), 0x8004587D, struct.pack('I', 0))"
    await outcome(op, async () => void execFileSync("python3", ["-c", shutdown, op.slice("shutdown:".length)]))
  }
  else throw new Error(`unknown op ${op}`)
}
await outcome("close", () => checkpointer.close())
