/**
 * Stores that are busy, read-only or failing, with real processes and real file systems:
 *
 * - a SQLite reader opening while another process holds the write lock;
 * - a `-shm` left read-only by a process that opened the database while the database was
 *   read-only. The tests run as root, and root ignores permission bits, so those processes
 *   run as `nobody` (setpriv) in a directory `nobody` owns;
 * - a read-only store (SQLite and file backends): the reading process runs in a mount
 *   namespace of its own (`unshare --mount`) where the store's directory is a read-only bind
 *   mount — a real EROFS, which root cannot write through either; nothing leaks out of it;
 * - a full disk: a 2 MiB tmpfs mounted in such a namespace, filled by appends;
 * - a file system shut down under a writer: an ext4 image loop-mounted in such a namespace,
 *   then shut down (FS_IOC_SHUTDOWN) between two operations of the writer.
 *
 * The probing processes are test/workers/store-probe.ts: one JSON line per operation.
 */
import { execFileSync } from "node:child_process"
import { chmodSync, chownSync, existsSync, mkdirSync, statSync } from "node:fs"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { sqliteCheckpointer } from "../src/checkpoint-sqlite.js"
import { CheckpointBusyError, fileCheckpointer, UserMessage } from "../src/index.js"
import { contentOf, makeTempDir, removeTempDirs, startWorker, type WorkerOptions } from "./support/processes.js"

afterAll(removeTempDirs)

const NOBODY = 65534
const asNobody: WorkerOptions = { launcher: ["setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups"] }
/** Runs the worker with `dir` mounted read-only over itself, in a mount namespace of its own. */
const readOnlyMount = (dir: string): WorkerOptions => ({
  launcher: ["unshare", "--mount", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', dir]
})
/** Runs the worker with a 2 MiB tmpfs mounted on `dir`, in a mount namespace of its own. */
const tinyTmpfs = (dir: string): WorkerOptions => ({
  launcher: ["unshare", "--mount", "sh", "-c", 'mount -t tmpfs -o size=2m tmpfs "$0" && exec "$@"', dir]
})

interface ProbeLine {
  readonly op: string
  readonly ok: boolean
  readonly value?: unknown
  readonly tag?: string
  readonly code?: string
  readonly message?: string
}

/** Run test/workers/store-probe.ts to its end; its outcomes by operation. */
const probe = async (args: ReadonlyArray<string>, options: WorkerOptions) => {
  const worker = startWorker("store-probe.ts", args, options)
  const { code } = await worker.closed
  expect(code, worker.stderr()).toBe(0)
  const lines = worker.lines.filter((line) => line.startsWith("{")).map((line) => JSON.parse(line) as ProbeLine)
  return (op: string): ProbeLine => {
    const found = lines.find((line) => line.op === op)
    if (found === undefined) throw new Error(`no outcome for ${op}; output:\n${worker.lines.join("\n")}\n${worker.stderr()}`)
    return found
  }
}

const message = (content: string) => [new UserMessage({ content, origin: "user" })]

describe("sqlite: a reader opens while another process writes", () => {
  it("a new checkpointer opens and reads while another process holds the write lock; a write still waits for it", async () => {
    const file = join(makeTempDir("sqlite-busy-open"), "s.db")
    const writer = sqliteCheckpointer({ file })
    await writer.append("s", message("one"))
    await writer.close()

    const holder = startWorker("sqlite-write-holder.ts", [file])
    await holder.waitForLine((line) => line === "locked")
    const reader = sqliteCheckpointer({ file, busyTimeoutMs: 1000 })
    try {
      expect((await reader.read("s")).map(contentOf)).toEqual(["one"])
      // The holder's uncommitted row is not seen.
      expect((await reader.list()).map((session) => session.id)).toEqual(["s"])
      const refused = await reader.append("s", message("two")).then(() => undefined, (error: unknown) => error)
      expect(refused).toBeInstanceOf(CheckpointBusyError)
    } finally {
      holder.child.stdin!.end()
      await holder.closed
      await reader.close()
    }
    const after = sqliteCheckpointer({ file })
    expect((await after.read("s")).map(contentOf)).toEqual(["one"])
    await after.close()
  })
})

describe("sqlite: a database that was read-only for a while", () => {
  it("an append while the file is 0444 is refused as read-only and reads go on; once writable again, the store works (a -shm left by someone else is reported with the command)", async () => {
    const dir = makeTempDir("sqlite-transient-ro")
    chownSync(dir, NOBODY, NOBODY)
    const file = join(dir, "s.db")
    const shm = `${file}-shm`
    const args = (...ops: Array<string>) => ["sqlite", file, "s", ...ops]

    expect((await probe(args("append:one"), asNobody))("append:one")).toMatchObject({ ok: true, value: 1 })

    chmodSync(file, 0o444)
    const whileReadOnly = await probe(args("append:two", "read"), asNobody)
    expect(whileReadOnly("append:two")).toMatchObject({ ok: false, tag: "StorageError", code: "SQLITE_READONLY" })
    expect(whileReadOnly("append:two").message).toContain("reading only")
    expect(whileReadOnly("read")).toMatchObject({ ok: true, value: ["one"] })
    // What SQLite leaves behind: a -shm with the database's mode at the time, 0444.
    expect(statSync(shm).mode & 0o777).toBe(0o444)

    chmodSync(file, 0o644)
    // A -shm this user may not change: reported, naming the file and the command.
    chownSync(shm, 0, 0)
    const blocked = await probe(args("read"), asNobody)
    expect(blocked("read")).toMatchObject({ ok: false, tag: "StorageError", code: "SQLITE_READONLY" })
    expect(blocked("read").message).toContain(`chmod --reference=${file} ${shm}`)

    // Its own -shm: put back to the database's mode, and the store works again.
    chownSync(shm, NOBODY, NOBODY)
    const recovered = await probe(args("append:three", "read"), asNobody)
    expect(recovered("append:three")).toMatchObject({ ok: true, value: 2 })
    expect(recovered("read")).toMatchObject({ ok: true, value: ["one", "three"] })
  })
})

describe("a read-only store (a read-only bind mount)", () => {
  it("sqlite: read while no process has it open and while one writes; appends and deletes refused as read-only; nothing changed", async () => {
    const dir = makeTempDir("sqlite-ro-mount")
    const file = join(dir, "s.db")
    const writer = sqliteCheckpointer({ file })
    await writer.append("s", message("one"))
    await writer.append("s", message("two"))
    await writer.close()
    // Closed by its last connection: no -wal or -shm, which SQLite cannot create on a read-only mount.
    expect([existsSync(`${file}-wal`), existsSync(`${file}-shm`)]).toEqual([false, false])

    const idle = await probe(["sqlite", file, "s", "read", "append:three", "delete", "read"], readOnlyMount(dir))
    expect(idle("read")).toMatchObject({ ok: true, value: ["one", "two"] })
    expect(idle("append:three")).toMatchObject({ ok: false, tag: "StorageError", code: "SQLITE_READONLY" })
    expect(idle("append:three").message).toContain("reading only")
    expect(idle("delete")).toMatchObject({ ok: false, tag: "StorageError", code: "SQLITE_READONLY" })

    // With a writer on the writable path, its -shm exists: the read-only reader goes through it.
    const live = sqliteCheckpointer({ file })
    try {
      await live.append("s", message("three"))
      const busy = await probe(["sqlite", file, "s", "read"], readOnlyMount(dir))
      expect(busy("read")).toMatchObject({ ok: true, value: ["one", "two", "three"] })
    } finally {
      await live.close()
    }
  })

  it("file: reads the sessions; appends and deletes refused as read-only; nothing changed", async () => {
    const dir = makeTempDir("file-ro-mount")
    const writer = fileCheckpointer({ dir })
    await writer.append("s", message("one"))
    await writer.append("s", message("two"))
    await writer.close()

    const outcome = await probe(["file", dir, "s", "read", "append:three", "delete"], readOnlyMount(dir))
    expect(outcome("read")).toMatchObject({ ok: true, value: ["one", "two"] })
    expect(outcome("append:three")).toMatchObject({ ok: false, tag: "StorageError", code: "EROFS" })
    expect(outcome("append:three").message).toContain("reading only")
    expect(outcome("delete")).toMatchObject({ ok: false, tag: "StorageError" })

    const after = fileCheckpointer({ dir })
    expect((await after.read("s")).map(contentOf)).toEqual(["one", "two"])
    await after.close()
  })
})

describe("sqlite: a full disk", () => {
  it("appends on a full tmpfs fail with StorageError SQLITE_FULL (not corruption); everything acknowledged reads back", async () => {
    const dir = makeTempDir("sqlite-full")
    const outcome = await probe(["sqlite", join(dir, "s.db"), "s", "append:first", "fill", "read"], tinyTmpfs(dir))
    expect(outcome("append:first")).toMatchObject({ ok: true, value: 1 })
    expect(outcome("fill")).toMatchObject({ ok: false, tag: "StorageError", code: "SQLITE_FULL" })
    expect(outcome("fill").message).toContain("full")
    const filled = Number(outcome("filled").value)
    expect(filled).toBeGreaterThan(0)
    const read = outcome("read")
    expect(read.ok, read.message).toBe(true)
    const contents = read.value as Array<string>
    expect(contents.length).toBe(1 + filled)
    expect(contents[0]).toBe("first")
    contents.slice(1).forEach((content, index) => expect(content.startsWith(`${index}:`)).toBe(true))
  })
})

describe("sqlite: the file system shut down under a writer", () => {
  it("after the shutdown every call is a StorageError, not corruption; remounted, the database is intact with everything acknowledged", async () => {
    const base = makeTempDir("sqlite-fs-shutdown")
    const image = join(base, "fs.img")
    const mountPoint = join(base, "mnt")
    mkdirSync(mountPoint)
    execFileSync("truncate", ["-s", "32M", image])
    execFileSync("mkfs.ext4", ["-q", "-F", image])
    const mounted: WorkerOptions = {
      launcher: ["unshare", "--mount", "sh", "-c", 'mount -o loop "$0" "$1" && shift && exec "$@"', image, mountPoint]
    }
    const file = join(mountPoint, "s.db")

    const failing = await probe(
      ["sqlite", file, "s", "append:one", "append:two", `shutdown:${mountPoint}`, "append:three", "read", "integrity"],
      mounted
    )
    expect(failing("append:two")).toMatchObject({ ok: true, value: 2 })
    expect(failing(`shutdown:${mountPoint}`)).toMatchObject({ ok: true })
    // The failed write leaves SQLite reporting "database disk image is malformed" for what follows.
    const afterShutdown = ["append:three", "read"].map(failing)
    expect(afterShutdown.map((line) => [line.ok, line.tag])).toEqual([[false, "StorageError"], [false, "StorageError"]])
    for (const line of afterShutdown) expect(line.code, line.message).toMatch(/^(EIO|SQLITE_IOERR)/)
    // The integrity check cannot read the file either: an error, not a report of damage.
    expect(failing("integrity")).toMatchObject({ ok: false, tag: "StorageError" })

    const remounted = await probe(["sqlite", file, "s", "read", "integrity"], mounted)
    expect(remounted("read")).toMatchObject({ ok: true, value: ["one", "two"] })
    expect(remounted("integrity")).toMatchObject({ ok: true, value: { ok: true } })
  })
})
