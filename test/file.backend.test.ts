/**
 * The file backend beyond the shared contract: torn tails, damage in the middle of a log,
 * codecs, encoder failures, injected I/O failures and bad options — on real files.
 */
import { randomBytes } from "node:crypto"
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Chunk, Effect, Layer, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { defaultDirectory } from "../src/backends/file/FileCheckpointer.js"
import { headerLine, LOG_VERSION, recordLine } from "../src/backends/file/format.js"
import * as LogFilesModule from "../src/backends/file/LogFiles.js"
import type { LogHandle } from "../src/backends/file/LogFiles.js"
import {
  Checkpointer,
  CodecError,
  FileCheckpointer,
  type LogCodecService,
  LogCodec,
  SessionLock
} from "../src/core.js"
import {
  aes256gcmCodec,
  CheckpointIntegrityError,
  ConfigurationError,
  EventDecodeError,
  fileCheckpointer,
  gzipCodec,
  type PromiseCheckpointerWithIntegrity,
  SchemaVersionError,
  StorageError,
  UserMessage
} from "../src/index.js"
import { expectConfigurationError, thrownBy } from "./support/refusals.js"

const freshDir = () => mkdtempSync(join(tmpdir(), "lite-agent-file-"))
const logOf = (dir: string, id: string) => join(dir, id, "log")
const message = (text: string) => new UserMessage({ content: text, origin: "user" })
const contents = async (c: PromiseCheckpointerWithIntegrity, id: string) =>
  (await c.read(id)).map((s) => [s.seq, (s.event as UserMessage).content])

const open: Array<PromiseCheckpointerWithIntegrity> = []
const checkpointer = (options: Parameters<typeof fileCheckpointer>[0]) => {
  const c = fileCheckpointer(options)
  open.push(c)
  return c
}
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()))
})

/** Byte ranges of the record lines of a log (header excluded). */
const lineRanges = (bytes: Buffer): Array<[number, number]> => {
  const ranges: Array<[number, number]> = []
  let start = bytes.indexOf(0x0a) + 1
  while (start < bytes.length) {
    const end = bytes.indexOf(0x0a, start)
    if (end < 0) break
    ranges.push([start, end + 1])
    start = end + 1
  }
  return ranges
}

describe("torn tails", () => {
  it("a last record cut at any byte offset (with or without trailing NULs) is cut back, kept aside, and not glued to", async () => {
    const dir = freshDir()
    const seed = checkpointer({ dir })
    await seed.append("s", [message("one"), message("two")])
    await seed.append("s", [message("three — the last record")])
    const original = readFileSync(logOf(dir, "s"))
    const [lastStart, lastEnd] = lineRanges(original).at(-1)!
    let cases = 0
    for (let cut = lastStart + 1; cut < lastEnd; cut++) {
      for (const nulRun of [0, 512]) {
        const torn = Buffer.concat([original.subarray(0, cut), Buffer.alloc(nulRun)])
        writeFileSync(logOf(dir, "s"), torn)
        const c = fileCheckpointer({ dir })
        // Readers never see the fragment; the head is the last whole append.
        expect(await c.head("s")).toBe(2)
        expect(await contents(c, "s")).toEqual([[1, "one"], [2, "two"]])
        // The next append cuts the fragment away (keeping it) and lands on a clean line.
        expect(await c.append("s", [message(`replacement ${cut}`)], 2)).toBe(3)
        expect(await contents(c, "s")).toEqual([[1, "one"], [2, "two"], [3, `replacement ${cut}`]])
        const report = await c.checkIntegrity()
        expect(report.ok).toBe(true)
        await c.close()
        cases++
      }
    }
    expect(cases).toBe(2 * (lastEnd - lastStart - 1))
    const kept = readdirSync(join(dir, "s")).filter((name) => name.startsWith("torn-"))
    expect(kept.length).toBe(cases)
    // What was cut is kept byte for byte.
    const one = kept.find((name) => name.endsWith(`-${lastStart}`))!
    expect(readFileSync(join(dir, "s", one)).length).toBeGreaterThan(0)
  })

  it("a last record failing its checksum is cut back like a torn one", async () => {
    const dir = freshDir()
    const c = checkpointer({ dir })
    await c.append("s", [message("kept")])
    await c.append("s", [message("flipped")])
    const bytes = readFileSync(logOf(dir, "s"))
    const [start, end] = lineRanges(bytes).at(-1)!
    bytes[start + Math.floor((end - start) / 2)] = bytes[start + Math.floor((end - start) / 2)]! ^ 0x01
    writeFileSync(logOf(dir, "s"), bytes)
    // Found by the next process to open the log (damage is not looked for at every append of
    // a log this process keeps open and locked).
    const later = checkpointer({ dir })
    expect(await later.head("s")).toBe(1)
    expect(await later.append("s", [message("next")], 1)).toBe(2)
    expect(await contents(later, "s")).toEqual([[1, "kept"], [2, "next"]])
  })

  it("an append cut short between its records is invisible as a whole, then cut away", async () => {
    const dir = freshDir()
    const c = checkpointer({ dir })
    await c.append("s", [message("a")])
    await c.append("s", [message("b1"), message("b2"), message("b3")])
    const bytes = readFileSync(logOf(dir, "s"))
    const ranges = lineRanges(bytes)
    // Keep two complete lines of the three-record batch: the batch never committed.
    writeFileSync(logOf(dir, "s"), bytes.subarray(0, ranges[2]![1]))
    // As a crash leaves it for the next process.
    const later = checkpointer({ dir })
    expect(await later.head("s")).toBe(1)
    expect(await contents(later, "s")).toEqual([[1, "a"]])
    expect(await later.append("s", [message("c")], 1)).toBe(2)
    expect(await contents(later, "s")).toEqual([[1, "a"], [2, "c"]])
  })
})

describe("logs kept open between mutations", () => {
  it("see what another writer did meanwhile: its appends, a truncate (a new file) and a delete", async () => {
    const dir = freshDir()
    const mine = checkpointer({ dir })
    const other = checkpointer({ dir })
    await mine.append("s", [message("1")])
    await other.append("s", [message("2"), message("3")], 1)
    expect(await mine.append("s", [message("4")], 3)).toBe(4)
    await other.truncate("s", 2, 4)
    expect(await mine.append("s", [message("3b")], 2)).toBe(3)
    expect(await contents(other, "s")).toEqual([[1, "1"], [2, "2"], [3, "3b"]])
    await other.delete("s")
    expect(await mine.append("s", [message("fresh")], 0)).toBe(1)
    expect(await contents(other, "s")).toEqual([[1, "fresh"]])
  })

  it("stay open for the 16 sessions used last, and close with the checkpointer", async () => {
    const dir = freshDir()
    const c = fileCheckpointer({ dir })
    // Descriptors of this process open on a log in `dir`.
    const openLogs = () =>
      readdirSync("/proc/self/fd").filter((fd) => {
        try {
          const target = readlinkSync(join("/proc/self/fd", fd))
          return target.startsWith(dir) && target.endsWith("/log")
        } catch {
          return false
        }
      }).length
    for (let round = 0; round < 2; round++) {
      for (let n = 0; n < 40; n++) expect(await c.append(`s${n}`, [message(`${round}`)], round)).toBe(round + 1)
    }
    expect(openLogs()).toBe(16)
    for (let n = 0; n < 40; n++) expect(await contents(c, `s${n}`)).toEqual([[1, "0"], [2, "1"]])
    await c.close()
    expect(openLogs()).toBe(0)
  })
})

describe("read handles kept between looks", () => {
  it("at most 256 logs stay open for reading; a rewritten or deleted log's handle is let go; all close with the checkpointer", async () => {
    const dir = freshDir()
    const writer = checkpointer({ dir })
    const reader = fileCheckpointer({ dir })
    /** The log files this process has open, as /proc names them ("… (deleted)" once unlinked). */
    const openLogTargets = () =>
      readdirSync("/proc/self/fd").flatMap((fd) => {
        try {
          const target = readlinkSync(join("/proc/self/fd", fd))
          return target.startsWith(dir) && target.includes("/log") ? [target] : []
        } catch {
          return []
        }
      })
    const sessions = Array.from({ length: 300 }, (_, n) => `s${n}`)
    for (const session of sessions) await writer.append(session, [message("one"), message("two")])
    const writerHandles = openLogTargets().length
    for (const session of sessions) expect(await reader.head(session)).toBe(2)
    expect(openLogTargets().length - writerHandles).toBe(256)
    // The last session read is kept; a rewrite gives its path a new file, read anew.
    const last = sessions.at(-1)!
    await writer.truncate(last, 1, 2)
    expect(await reader.head(last)).toBe(1)
    await writer.delete(last)
    expect(await reader.head(last)).toBe(0)
    expect(openLogTargets().filter((target) => target.endsWith("(deleted)"))).toEqual([])
    await writer.close()
    await reader.close()
    expect(openLogTargets()).toEqual([])
  })
})

describe("damage in the middle of a log", () => {
  it("is a typed integrity error naming the seq and offset; nothing after it is dropped silently", async () => {
    const dir = freshDir()
    const c = checkpointer({ dir })
    for (const text of ["m1", "m2", "m3", "m4", "m5"]) await c.append("s", [message(text)])
    const bytes = readFileSync(logOf(dir, "s"))
    const [start] = lineRanges(bytes)[1]!
    bytes[start + 20] = bytes[start + 20]! ^ 0x20
    writeFileSync(logOf(dir, "s"), bytes)
    const error = await c.read("s").catch((e: unknown) => e)
    expect(error).toBeInstanceOf(CheckpointIntegrityError)
    expect(error).toMatchObject({ sessionId: "s", seq: 2, offset: start })
    // The tail is intact, so the head is still known; the damaged record is not skipped.
    expect(await c.head("s")).toBe(5)
    const report = await c.checkIntegrity()
    expect(report.ok).toBe(false)
    expect(report.detail).toContain(`byte offset ${start}`)
    // checkIntegrity changed nothing.
    expect(readFileSync(logOf(dir, "s"))).toEqual(bytes)
  })

  it("an event kind this version does not know is EventDecodeError naming the session and seq", async () => {
    const dir = freshDir()
    const c = checkpointer({ dir })
    await c.append("s", [message("known")])
    const future = recordLine(2, 2, JSON.stringify({ ts: 1, event: { _tag: "HologramMessage", beam: true } }))
    writeFileSync(logOf(dir, "s"), Buffer.concat([readFileSync(logOf(dir, "s")), Buffer.from(future)]))
    const error = await c.read("s").catch((e: unknown) => e)
    expect(error).toBeInstanceOf(EventDecodeError)
    expect(error).toMatchObject({ sessionId: "s", seq: 2 })
    expect(String((error as Error).message)).toContain("HologramMessage")
  })

  it("a log written by a newer format version is refused with SchemaVersionError and left alone", async () => {
    const dir = freshDir()
    const c = checkpointer({ dir })
    await c.append("s", [message("x")])
    const bytes = readFileSync(logOf(dir, "s"))
    const newer = Buffer.from(
      bytes.toString("utf8").replace(`"version":${LOG_VERSION}`, `"version":${LOG_VERSION + 1}`),
      "utf8"
    )
    writeFileSync(logOf(dir, "s"), newer)
    await expect(c.read("s")).rejects.toBeInstanceOf(SchemaVersionError)
    const error = await c.append("s", [message("y")]).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(SchemaVersionError)
    expect(error).toMatchObject({ found: LOG_VERSION + 1, supported: LOG_VERSION })
    expect(readFileSync(logOf(dir, "s"))).toEqual(newer)
  })
})

describe("codecs", () => {
  it("gzip and AES-256-GCM logs hold no plaintext and read back exactly", async () => {
    for (const codec of [gzipCodec(), aes256gcmCodec(randomBytes(32))]) {
      const dir = freshDir()
      const c = checkpointer({ dir, codec })
      await c.append("s", [message("secret plan: ship on friday")])
      expect(readFileSync(logOf(dir, "s"), "utf8")).not.toContain("secret plan")
      expect(await contents(c, "s")).toEqual([[1, "secret plan: ship on friday"]])
    }
  })

  it("a log is refused, not misread, when opened with another codec or another key", async () => {
    const dir = freshDir()
    const key = randomBytes(32)
    const writer = checkpointer({ dir, codec: aes256gcmCodec(key) })
    await writer.append("s", [message("hidden")])
    const before = readFileSync(logOf(dir, "s"))
    for (const other of [undefined, gzipCodec(), aes256gcmCodec(randomBytes(32))]) {
      const reader = checkpointer({ dir, ...(other === undefined ? {} : { codec: other }) })
      const error = await reader.read("s").catch((e: unknown) => e)
      expect(error).toBeInstanceOf(CodecError)
      expect(String((error as Error).message)).toMatch(/aes-256-gcm|different key/)
      await expect(reader.append("s", [message("plaintext?")])).rejects.toBeInstanceOf(CodecError)
    }
    expect(readFileSync(logOf(dir, "s"))).toEqual(before)
  })

  it("a tampered or moved AES record fails authentication even with a valid checksum", async () => {
    const dir = freshDir()
    const key = randomBytes(32)
    const c = checkpointer({ dir, codec: aes256gcmCodec(key) })
    await c.append("s", [message("first")])
    await c.append("s", [message("second")])
    const text = readFileSync(logOf(dir, "s"), "utf8")
    const [header, line1, line2] = text.split("\n")
    const payload = (line: string) => line.split("\t")[3]!
    // Swap the two ciphertexts, re-checksummed: each record now sits at the wrong seq.
    writeFileSync(logOf(dir, "s"), [header, recordLine(1, 1, payload(line2!)), recordLine(2, 2, payload(line1!))].join("\n").replace(/\n\n/g, "\n"))
    const swapped = await c.read("s").catch((e: unknown) => e)
    expect(swapped).toBeInstanceOf(CodecError)
    expect(String((swapped as Error).message)).toMatch(/authentication failed/)
    // Flip one ciphertext byte, re-checksummed.
    const sealed = Buffer.from(payload(line1!), "base64")
    sealed[sealed.length - 20] = sealed[sealed.length - 20]! ^ 0xff
    writeFileSync(logOf(dir, "s"), `${header}\n${recordLine(1, 1, sealed.toString("base64"))}`)
    await expect(c.read("s")).rejects.toBeInstanceOf(CodecError)
  })

  it("an AES key of the wrong size is a ConfigurationError", () => {
    expect(() => aes256gcmCodec(randomBytes(16))).toThrow(ConfigurationError)
  })

  it("an encoder failure fails the append with a typed error: nothing written, no tail repair, no plaintext fallback", async () => {
    const dir = freshDir()
    const good = checkpointer({ dir })
    await good.append("s", [message("before")])
    // Leave a torn tail behind, as a crashed writer would.
    const torn = Buffer.concat([readFileSync(logOf(dir, "s")), Buffer.from("deadbeef\t2\t2\t{\"ts\":1,")])
    writeFileSync(logOf(dir, "s"), torn)
    const failing: LogCodecService = {
      name: "json",
      encode: () =>
        Effect.sleep("5 millis").pipe(
          Effect.zipRight(Effect.fail(new CodecError({ codec: "json", operation: "encode", detail: "HSM unavailable" })))
        ),
      decode: (records) => Effect.succeed(records.map((r) => r.payload))
    }
    const c = checkpointer({ dir, codec: failing })
    const error = await c.append("s", [message("never written")]).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(CodecError)
    expect(error).toMatchObject({ operation: "encode" })
    expect(readFileSync(logOf(dir, "s"))).toEqual(torn)
    expect(readdirSync(join(dir, "s")).filter((n) => n.startsWith("torn-"))).toEqual([])
    // The same for a session that does not exist yet: nothing is created.
    await expect(c.append("new", [message("x")])).rejects.toBeInstanceOf(CodecError)
    expect(existsSync(join(dir, "new", "log"))).toBe(false)
    expect((await c.list()).map((s) => s.id)).toEqual(["s"])
  })

  it("codecs are Layers for Effect users", async () => {
    const dir = freshDir()
    const program = Effect.gen(function*() {
      const c = yield* Checkpointer
      yield* c.append("s", [message("via layer")])
      return Chunk.toArray(yield* Stream.runCollect(c.read("s")))
    })
    const layer = FileCheckpointer.layerWithoutDependencies({ dir }).pipe(
      Layer.provide(LogCodec.layerGzip),
      Layer.provide(LogFilesModule.layerNode),
      Layer.provide(SessionLock.layerNode())
    )
    const stored = await Effect.runPromise(program.pipe(Effect.provide(layer)))
    expect((stored[0]!.event as UserMessage).content).toBe("via layer")
    expect(JSON.parse(readFileSync(logOf(dir, "s"), "utf8").split("\n")[0]!)).toMatchObject({ codec: "gzip" })
  })
})

/** The node file primitives, except that writes fail as `fault` says. */
const faultyFiles = (fault: { writesLeft: number; partial: boolean; reason: string }) => {
  const node = LogFilesModule.node
  const faulty = (handle: LogHandle): LogHandle => ({
    ...handle,
    writeAt: (position, bytes) =>
      Effect.suspend(() => {
        if (fault.writesLeft-- > 0) return handle.writeAt(position, bytes)
        // Like a full disk: part of the data lands, then the write fails.
        return (fault.partial ? handle.writeAt(position, bytes.subarray(0, Math.floor(bytes.length / 2))) : Effect.void)
          .pipe(Effect.zipRight(Effect.fail(new StorageError({ operation: "write", detail: fault.reason }))))
      })
  })
  return Layer.succeed(LogFilesModule.LogFiles, {
    ...node,
    open: (path, mode) => Effect.map(node.open(path, mode), (handle) => (handle === undefined ? undefined : faulty(handle))),
    create: (path) => Effect.map(node.create(path), faulty)
  })
}

describe("I/O failures", () => {
  const run = <A>(dir: string, fault: { writesLeft: number; partial: boolean; reason: string }, program: Effect.Effect<A, unknown, Checkpointer>) =>
    Effect.runPromise(
      Effect.either(program).pipe(
        Effect.provide(
          FileCheckpointer.layerWithoutDependencies({ dir }).pipe(
            Layer.provide(LogCodec.layerJson),
            Layer.provide(faultyFiles(fault)),
            Layer.provide(SessionLock.layerNode())
          )
        )
      )
    )

  it("a disk-full error mid-append is a StorageError and the log stays exactly as it was", async () => {
    const dir = freshDir()
    const seed = checkpointer({ dir })
    await seed.append("s", [message("one"), message("two")])
    const before = readFileSync(logOf(dir, "s"))
    const result = await run(
      dir,
      { writesLeft: 0, partial: true, reason: "ENOSPC: no space left on device" },
      Effect.flatMap(Checkpointer, (c) => c.append("s", [message("three"), message("four")], 2))
    )
    expect(result._tag).toBe("Left")
    expect(result._tag === "Left" && result.left).toBeInstanceOf(StorageError)
    expect(String(result._tag === "Left" && (result.left as Error).message)).toContain("ENOSPC")
    expect(readFileSync(logOf(dir, "s"))).toEqual(before)
    expect(await contents(seed, "s")).toEqual([[1, "one"], [2, "two"]])
    expect(await seed.append("s", [message("three")], 2)).toBe(3)
  })

  it("a permission error creating a new session leaves no session behind", async () => {
    const dir = freshDir()
    const result = await run(
      dir,
      { writesLeft: 0, partial: false, reason: "EACCES: permission denied" },
      Effect.flatMap(Checkpointer, (c) => c.append("fresh", [message("x")]))
    )
    expect(result._tag === "Left" && result.left).toBeInstanceOf(StorageError)
    expect(existsSync(logOf(dir, "fresh"))).toBe(false)
    expect(readdirSync(join(dir, "fresh"))).toEqual([]) // the temp file was removed
    const c = checkpointer({ dir })
    expect(await c.list()).toEqual([])
  })

  it("a failure while truncating leaves the log as it was", async () => {
    const dir = freshDir()
    const seed = checkpointer({ dir })
    await seed.append("s", [message("one"), message("two"), message("three")])
    const before = readFileSync(logOf(dir, "s"))
    const result = await run(
      dir,
      { writesLeft: 0, partial: true, reason: "ENOSPC: no space left on device" },
      Effect.flatMap(Checkpointer, (c) => c.truncate("s", 1, 3))
    )
    expect(result._tag === "Left" && result.left).toBeInstanceOf(StorageError)
    expect(readFileSync(logOf(dir, "s"))).toEqual(before)
    expect(readdirSync(join(dir, "s"))).toEqual(["log"])
  })
})

describe("options and the directory", () => {
  it("bad options throw ConfigurationError at the call; unusable directories are one on the first call", async () => {
    const dir = freshDir()
    const aFile = join(dir, "not-a-dir")
    writeFileSync(aFile, "x")
    const badOptions: Array<[unknown, string, string]> = [
      [{ dir, synchronous: "fast" }, "synchronous", `expected one of "normal", "full", got "fast"`],
      [{ dir, busyTimeoutMs: -1 }, "busyTimeoutMs", "expected a number >= 0, got -1"],
      [{ dir, lockLeaseMs: 99 }, "lockLeaseMs", "expected a number >= 100, got 99"],
      [{ dir, lockLeaseMs: Number.NaN }, "lockLeaseMs", "got NaN"],
      [{ dir, lockLeaseMs: "5000" }, "lockLeaseMs", `got "5000"`],
      [{ dir: "" }, "dir", `expected a non-empty string, got ""`],
      [{ directory: dir }, "directory", `unknown option (did you mean "dir"?)`],
      [{ dir, codec: "gzip" }, "codec", `expected a codec such as gzipCodec() or aes256gcmCodec(key), got "gzip"`],
      ["/tmp/sessions", "file checkpointer options", `expected an object of options, got "/tmp/sessions"`]
    ]
    for (const [options, option, detail] of badOptions) {
      expectConfigurationError(thrownBy(() => checkpointer(options as Parameters<typeof fileCheckpointer>[0])), option, detail)
    }
    for (const options of [{ dir: aFile }, { dir: join(aFile, "below-a-file") }]) {
      const error = await checkpointer(options).head("s").catch((e: unknown) => e)
      expect(error, JSON.stringify(options)).toBeInstanceOf(ConfigurationError)
      expect(error).toMatchObject({ option: "dir" })
    }
    // The same through the Effect layer: the build fails, with the same error.
    const built = await Effect.runPromise(
      Effect.either(Effect.scoped(Layer.build(FileCheckpointer.layer({ dir, lockLeaseMs: 99 }))))
    )
    expect(built).toMatchObject({ _tag: "Left", left: { _tag: "ConfigurationError", option: "lockLeaseMs" } })
  })

  it("lockTimeoutMs is now busyTimeoutMs, as in the SQLite and Postgres backends: the old name is refused with the new one", async () => {
    const dir = freshDir()
    const renamed = `unknown option (renamed: it is now "busyTimeoutMs")`
    const old: unknown = { dir, lockTimeoutMs: 300 }
    const thrown = thrownBy(() => checkpointer(old as Parameters<typeof fileCheckpointer>[0]))
    expectConfigurationError(thrown, "lockTimeoutMs", renamed)
    expect(String(thrown)).toContain(`"busyTimeoutMs"`)
    const built = await Effect.runPromise(
      Effect.flip(Effect.scoped(Layer.build(FileCheckpointer.layer(old as FileCheckpointer.FileCheckpointerLayerOptions))))
    )
    expectConfigurationError(built, "lockTimeoutMs", renamed)
    // The new name is taken, by the facade and by the layer.
    await checkpointer({ dir, busyTimeoutMs: 300 }).head("s")
    await Effect.runPromise(Effect.scoped(Layer.build(FileCheckpointer.layer({ dir, busyTimeoutMs: 300 }))))
  })

  it("a directory the process may not read or write is a ConfigurationError naming it", async () => {
    // Root ignores permission bits, so the refusal comes from injected file primitives.
    const denied = Layer.succeed(LogFilesModule.LogFiles, {
      ...LogFilesModule.node,
      prepareDirectory: (path: string) =>
        Effect.fail(new StorageError({ operation: "open directory", detail: `EACCES: permission denied, access '${path}'` }))
    })
    const result = await Effect.runPromise(
      Effect.either(Effect.flatMap(Checkpointer, (c) => c.head("s"))).pipe(
        Effect.provide(
          FileCheckpointer.layerWithoutDependencies({ dir: "/srv/sessions" }).pipe(
            Layer.provide(LogCodec.layerJson),
            Layer.provide(denied),
            Layer.provide(SessionLock.layerInProcess)
          )
        ),
        Effect.catchAll((error) => Effect.succeed({ _tag: "BuildFailed" as const, error }))
      )
    )
    expect(result._tag).toBe("BuildFailed")
    const error = result._tag === "BuildFailed" ? result.error : undefined
    expect(error).toBeInstanceOf(ConfigurationError)
    expect(String((error as Error).message)).toContain("/srv/sessions: EACCES")
  })

  it("the default directory is outside the project: $LITE_AGENT_HOME/sessions or ~/.lite-agent/sessions", async () => {
    const home = freshDir()
    const previous = process.env["LITE_AGENT_HOME"]
    process.env["LITE_AGENT_HOME"] = home
    try {
      expect(defaultDirectory()).toBe(join(home, "sessions"))
      const c = checkpointer(undefined)
      await c.append("default-dir", [message("x")])
      expect(existsSync(join(home, "sessions", "default-dir", "log"))).toBe(true)
    } finally {
      if (previous === undefined) delete process.env["LITE_AGENT_HOME"]
      else process.env["LITE_AGENT_HOME"] = previous
    }
    delete process.env["LITE_AGENT_HOME"]
    expect(defaultDirectory()).toMatch(/\.lite-agent[/\\]sessions$/)
  })

  it("delete removes the session's directory with its side files", async () => {
    const dir = freshDir()
    const c = checkpointer({ dir })
    await c.append("s", [message("x")])
    writeFileSync(logOf(dir, "s"), Buffer.concat([readFileSync(logOf(dir, "s")), Buffer.from("torn")]))
    await c.append("s", [message("y")]) // keeps the torn bytes aside
    expect(readdirSync(join(dir, "s")).some((n) => n.startsWith("torn-"))).toBe(true)
    await c.delete("s")
    expect(existsSync(join(dir, "s"))).toBe(false)
    expect(readdirSync(dir).filter((n) => !n.startsWith("."))).toEqual([])
  })

  it("the log header names the codec, the format version and the log's generation (new on every truncate)", async () => {
    const dir = freshDir()
    const c = checkpointer({ dir })
    await c.append("s", [message("x"), message("y")])
    const headerOf = () => JSON.parse(readFileSync(logOf(dir, "s"), "utf8").split("\n")[0]!) as { generation: string }
    const first = headerOf()
    expect(readFileSync(logOf(dir, "s"), "utf8").split("\n")[0] + "\n").toBe(headerLine("json", undefined, first.generation))
    expect(first.generation).toMatch(/^[0-9a-f]{16}$/)
    await c.truncate("s", 1)
    expect(headerOf().generation).not.toBe(first.generation)
    expect((await c.read("s")).map((stored) => (stored.event as UserMessage).content)).toEqual(["x"])
  })

  it("a tail read of a long log (seeking by bisection) gives exactly the records after sinceSeq, batches and big lines included", async () => {
    const dir = freshDir()
    const c = checkpointer({ dir })
    let seq = 0
    // About 1.5 MB: batches of 1 to 40 events, some lines far longer than a probe window.
    for (let batch = 0; seq < 2500; batch++) {
      const size = 1 + (batch * 7) % 40
      const events = Array.from({ length: size }, (_, i) =>
        message(`${seq + i + 1}:${"x".repeat((seq + i) % 97 === 0 ? 200_000 : 300)}`))
      await c.append("s", events)
      seq += size
    }
    const all = await c.read("s")
    expect(all.length).toBe(seq)
    for (const sinceSeq of [0, 1, 2, 39, 40, 41, 500, 1234, 1999, seq - 41, seq - 1, seq, seq + 5]) {
      const tail = await c.read("s", { sinceSeq })
      expect(tail.map((stored) => stored.seq), `sinceSeq ${sinceSeq}`).toEqual(all.filter((stored) => stored.seq > sinceSeq).map((stored) => stored.seq))
      expect(tail[0]?.event, `sinceSeq ${sinceSeq}`).toEqual(all[sinceSeq]?.event)
    }
  })

  it("a log from before generations (no generation in its header) reads, and gets one on its first truncate", async () => {
    const dir = freshDir()
    const c = checkpointer({ dir })
    await c.append("s", [message("x"), message("y")])
    const [, ...records] = readFileSync(logOf(dir, "s"), "utf8").split("\n")
    writeFileSync(logOf(dir, "s"), headerLine("json", undefined) + records.join("\n"))
    expect((await c.read("s")).length).toBe(2)
    await c.truncate("s", 1)
    expect(JSON.parse(readFileSync(logOf(dir, "s"), "utf8").split("\n")[0]!)).toHaveProperty("generation")
    expect((await c.read("s")).length).toBe(1)
  })
})

describe("followers' looks at an unchanged log", () => {
  it("a version of a log that has not changed is its status, not a read; any change (another writer, a truncate, a delete) is seen", async () => {
    const dir = freshDir()
    const writer = checkpointer({ dir })
    await writer.append("s", [message("one"), message("two")])
    const opened: Array<string> = []
    const node = LogFilesModule.node
    const counting = Layer.succeed(LogFilesModule.LogFiles, {
      ...node,
      open: (path, mode) => Effect.zipRight(Effect.sync(() => opened.push(path)), node.open(path, mode))
    })
    const versions = (times: number) =>
      Effect.flatMap(Checkpointer, (c) => Effect.forEach(Array.from({ length: times }), () => c.version("s")))
    const inReader = <A>(program: Effect.Effect<A, unknown, Checkpointer>) =>
      Effect.runPromise(
        program.pipe(
          Effect.provide(
            FileCheckpointer.layerWithoutDependencies({ dir }).pipe(
              Layer.provide(LogCodec.layerJson),
              Layer.provide(counting),
              Layer.provide(SessionLock.layerNode())
            )
          )
        )
      )
    const seen = await inReader(Effect.gen(function*() {
      const first = yield* versions(50)
      const opensWhileUnchanged = opened.length
      yield* Effect.promise(() => writer.append("s", [message("three")]))
      const afterAppend = yield* versions(1)
      yield* Effect.promise(() => writer.truncate("s", 1))
      const afterTruncate = yield* versions(1)
      yield* Effect.promise(() => writer.delete("s"))
      const afterDelete = yield* versions(1)
      return { first, opensWhileUnchanged, afterAppend, afterTruncate, afterDelete }
    }))
    expect(new Set(seen.first.map((v) => `${v.head} ${v.generation}`)).size).toBe(1)
    expect(seen.first[0]!.head).toBe(2)
    // 50 looks, one read of the log's tail.
    expect(seen.opensWhileUnchanged).toBe(1)
    expect(seen.afterAppend[0]!).toEqual({ head: 3, generation: seen.first[0]!.generation })
    expect(seen.afterTruncate[0]!.head).toBe(1)
    expect(seen.afterTruncate[0]!.generation).not.toBe(seen.first[0]!.generation)
    expect(seen.afterDelete[0]!.head).toBe(0)
    await writer.close()
  })
})
