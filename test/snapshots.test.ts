/**
 * The object store on real files: restore refuses a missing or damaged object and changes
 * nothing; objects go through the log's codec (never plaintext under gzip or AES, bound to their
 * name); blobs kept per session by earlier releases move into the shared store when it opens;
 * and logs written before the store, with snapshot bytes inline, still restore.
 */
import { createCipheriv, randomBytes } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { recordLine, headerLine } from "../src/backends/file/format.js"
import { encodeStoredEvent } from "../src/core/encoding.js"
import { sha256Hex } from "../src/core/internal/sha256.js"
import { DEFAULT_GRACE_MS } from "../src/core/internal/objectCollection.js"
import { shiftedBy } from "../src/testing/helpers.js"
import { Checkpointer } from "../src/core/Checkpointer.js"
import {
  aes256gcmCodec,
  AssistantMessage,
  CodecError,
  createLiteAgent,
  fileCheckpointer,
  FileChange,
  FileSnapshot,
  gzipCodec,
  jsonCodec,
  type LiteAgent,
  type LogCodecService,
  type PromiseCheckpointer,
  RestoreRefusedError,
  SnapshotBlobError,
  STORED_ARGUMENT_MIN_BYTES,
  ToolResult,
  UserMessage
} from "../src/index.js"
import { scripted } from "../src/provider.js"
import { closeAfterEach, tempDir } from "./support/agent.js"

const track = closeAfterEach()

const write = (content: string) => ({ toolCalls: [{ name: "write_file", input: { path: "a.txt", content } }] })
const bytesOf = (text: string) => new TextEncoder().encode(text)
/** A collection as if run past the grace period (through the store's Effect layer: the clock is the caller's). */
const gcLater = (checkpointer: PromiseCheckpointer) =>
  Effect.runPromise(shiftedBy(2 * DEFAULT_GRACE_MS)(Effect.flatMap(Checkpointer, (c) => c.gc())).pipe(Effect.provide(checkpointer.layer)))
/** Where the file backend keeps an object of the store in `dir`. */
const objectPath = (dir: string, sha256: string) => join(dir, ".objects", sha256.slice(0, 2), sha256.slice(2))
/** Where earlier releases kept a session's blob. */
const sessionBlobPath = (dir: string, sessionId: string, sha256: string) => join(dir, sessionId, "blobs", sha256)
const snapshot = (path: string, data: Uint8Array) =>
  new FileSnapshot({ toolUseId: "toolu_x", path, state: { _tag: "content", data, mode: 0o644, size: data.length, sha256: sha256Hex(data) } })

describe("restore and the snapshot store", () => {
  /** Three prompts rewriting a.txt: one, two, three. Restoring to prompt 2 needs the snapshot of "one". */
  const threeVersions = async () => {
    const dir = tempDir("blob-log")
    const workdir = tempDir("blob-work")
    const checkpointer = track(fileCheckpointer({ dir }))
    const agent: LiteAgent = track(createLiteAgent({
      model: scripted([write("one"), { text: "1" }, write("two"), { text: "2" }, write("three"), { text: "3" }]),
      workdir,
      checkpointer
    }))
    for (const prompt of ["v1", "v2", "v3"]) await agent.send(prompt)
    const second = (await agent.listCheckpoints(agent.sessionId))[1]!
    const blob = objectPath(dir, sha256Hex(bytesOf("one")))
    expect(existsSync(blob)).toBe(true)
    // The JSON codec stores a blob as its raw bytes.
    expect(readFileSync(blob, "utf8")).toBe("one")
    return { agent, checkpointer, workdir, second, blob }
  }

  it.each([
    ["missing", (blob: string) => rmSync(blob), "snapshot_missing"],
    ["damaged", (blob: string) => writeFileSync(blob, "0ne"), "snapshot_truncated"]
  ] as const)("a %s blob: the plan shows the refusal, restore refuses, nothing changes", async (_, tamper, reason) => {
    const { agent, checkpointer, workdir, second, blob } = await threeVersions()
    tamper(blob)
    const head = await checkpointer.head(agent.sessionId)
    const dry = await agent.restore(agent.sessionId, second.seq, { dryRun: true })
    expect(dry.refusals).toEqual([expect.objectContaining({ path: "a.txt", reason })])
    const error = await agent.restore(agent.sessionId, second.seq).catch((e: unknown) => e)
    expect(error).toBeInstanceOf(RestoreRefusedError)
    expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe("three")
    expect(await checkpointer.head(agent.sessionId)).toBe(head)
  })

  it("a restore puts the bytes back and keeps every object: the branch it leaves still references them", async () => {
    const { agent, checkpointer, workdir, second } = await threeVersions()
    // "one", "two" and "three", each once: the captures after the writes and the snapshots before them share blobs.
    const blobs = (await checkpointer.listSnapshots(agent.sessionId)).map((blob) => blob.sha256).sort()
    expect(blobs.length).toBe(3)
    await agent.restore(agent.sessionId, second.seq)
    expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe("one")
    // "two" and "three" are referenced only by the branch the restore left, which stays: a collection keeps them.
    expect(await gcLater(checkpointer)).toMatchObject({ deleted: 0 })
    expect((await checkpointer.listSnapshots(agent.sessionId)).map((blob) => blob.sha256).sort()).toEqual(blobs)
  })
})

describe("large tool-call arguments", () => {
  it("are stored once with the snapshot of the file they wrote; the model sees a note; restore still works", async () => {
    const dir = tempDir("args-log")
    const workdir = tempDir("args-work")
    const first = "a".repeat(STORED_ARGUMENT_MIN_BYTES)
    const second = "b".repeat(STORED_ARGUMENT_MIN_BYTES)
    const checkpointer = track(fileCheckpointer({ dir }))
    const model = scripted([write(first), { text: "1" }, write(second), { text: "2" }])
    const agent: LiteAgent = track(createLiteAgent({ model, workdir, checkpointer }))
    await agent.send("v1")
    await agent.send("v2")
    expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe(second)

    const calls = (await checkpointer.read(agent.sessionId)).flatMap(({ event }) =>
      event._tag === "AssistantMessage" ? event.content.filter((block) => block.type === "tool_use") : []
    )
    expect(calls.map((call) => [call.input, call.storedArguments?.map((argument) => argument.key)])).toEqual([
      [{ path: "a.txt" }, ["content"]],
      [{ path: "a.txt" }, ["content"]]
    ])
    expect(await checkpointer.toolInput(agent.sessionId, calls[0]!)).toEqual({ path: "a.txt", content: first })
    // The first write's argument and the snapshot taken before the second write are one blob.
    expect((await checkpointer.listSnapshots(agent.sessionId)).map((blob) => blob.sha256).sort()).toEqual(
      [sha256Hex(bytesOf(first)), sha256Hex(bytesOf(second))].sort()
    )
    const log = readFileSync(join(dir, agent.sessionId, "log"), "utf8")
    expect(log.includes(first.slice(0, 1000))).toBe(false)

    // The model call after the write sees the argument as a note, not the bytes.
    const afterWrite = JSON.stringify(model.calls()[1]!.prompt)
    expect(afterWrite).toContain(`${STORED_ARGUMENT_MIN_BYTES} bytes kept in the session's snapshot store`)
    expect(afterWrite.includes(first.slice(0, 1000))).toBe(false)

    const checkpoints = await agent.listCheckpoints(agent.sessionId)
    await agent.restore(agent.sessionId, checkpoints[1]!.seq)
    expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe(first)
  })
})

describe("the file backend's collection", () => {
  it("removes what a crash left half-written or half-collected, once old: a half-collected object goes back in place", async () => {
    const dir = tempDir("object-leftovers")
    const checkpointer = track(fileCheckpointer({ dir }))
    const [kept, dropped] = [bytesOf("kept"), bytesOf("dropped")]
    await checkpointer.append("s", [snapshot("a", kept)])
    await checkpointer.append("s", [snapshot("b", dropped)])
    await checkpointer.truncate("s", 1)
    const temp = join(dir, ".objects", "tmp", "12345-crashed")
    writeFileSync(temp, "half an object")
    // A collector killed between its rename and its decision left the referenced object in the trash.
    mkdirSync(join(dir, ".objects", "trash"))
    const trashed = join(dir, ".objects", "trash", `${sha256Hex(kept)}.999-dead`)
    renameSync(objectPath(dir, sha256Hex(kept)), trashed)
    // Readers find it there meanwhile.
    expect(new TextDecoder().decode(await checkpointer.readSnapshot("s", sha256Hex(kept)))).toBe("kept")
    expect(await checkpointer.gc()).toMatchObject({ deleted: 0 })
    expect(existsSync(objectPath(dir, sha256Hex(kept)))).toBe(true)
    expect(existsSync(trashed)).toBe(false)
    expect(existsSync(temp)).toBe(true)
    const later = await gcLater(checkpointer)
    expect(later).toMatchObject({ deleted: 1, freedBytes: dropped.length })
    expect(existsSync(temp)).toBe(false)
    expect(existsSync(objectPath(dir, sha256Hex(dropped)))).toBe(false)
    expect(new TextDecoder().decode(await checkpointer.readSnapshot("s", sha256Hex(kept)))).toBe("kept")
  })

  it("stores bytes shared by sessions once", async () => {
    const dir = tempDir("object-once")
    const checkpointer = track(fileCheckpointer({ dir }))
    const data = bytesOf("the same file in two sessions")
    await checkpointer.append("s", [snapshot("a", data)])
    await checkpointer.append("t", [snapshot("b", data)])
    expect(existsSync(objectPath(dir, sha256Hex(data)))).toBe(true)
    expect(existsSync(join(dir, "s", "blobs"))).toBe(false)
    expect(existsSync(join(dir, "t", "blobs"))).toBe(false)
  })
})

describe("blobs go through the codec", () => {
  const plaintext = bytesOf(`SECRET-SNAPSHOT-${randomBytes(8).toString("hex")}`.repeat(20))

  it.each([
    ["gzip", () => gzipCodec()],
    ["aes-256-gcm", () => aes256gcmCodec(randomBytes(32))]
  ] as const)("%s: the blob on disk is not the plaintext, and reads back", async (_, codec) => {
    const dir = tempDir("blob-codec")
    const checkpointer: PromiseCheckpointer = track(fileCheckpointer({ dir, codec: codec() }))
    await checkpointer.append("s", [snapshot("secret.txt", plaintext)])
    const onDisk = readFileSync(objectPath(dir, sha256Hex(plaintext)))
    expect(onDisk.includes(Buffer.from("SECRET-SNAPSHOT"))).toBe(false)
    expect(Array.from(await checkpointer.readSnapshot("s", sha256Hex(plaintext)))).toEqual(Array.from(plaintext))
  })

  it("aes-256-gcm: a wrong key, or a blob moved to another name, is a CodecError — never bytes", async () => {
    const dir = tempDir("blob-aes")
    const key = randomBytes(32)
    const checkpointer = track(fileCheckpointer({ dir, codec: aes256gcmCodec(key) }))
    const other = bytesOf("other content")
    await checkpointer.append("s", [snapshot("a", plaintext), snapshot("b", other)])
    const wrongKey = track(fileCheckpointer({ dir, codec: aes256gcmCodec(randomBytes(32)) }))
    expect(await wrongKey.readSnapshot("s", sha256Hex(plaintext)).catch((e: unknown) => e)).toBeInstanceOf(CodecError)
    renameSync(objectPath(dir, sha256Hex(plaintext)), objectPath(dir, sha256Hex(other)))
    expect(await checkpointer.readSnapshot("s", sha256Hex(other)).catch((e: unknown) => e)).toBeInstanceOf(CodecError)
    const missing = await checkpointer.readSnapshot("s", sha256Hex(plaintext)).catch((e: unknown) => e)
    expect(missing).toBeInstanceOf(SnapshotBlobError)
    expect(missing).toMatchObject({ reason: "missing" })
  })
})

describe("blobs kept per session by earlier releases move into the shared store", () => {
  const plaintext = bytesOf(`SHARED-OBJECT-${randomBytes(8).toString("hex")}`.repeat(20))
  const key = randomBytes(32)
  /** The earlier AES-256-GCM form: a random IV, "blob\0<session>\0<sha256>" authenticated. */
  const sealedFor = (sessionId: string, data: Uint8Array) => {
    const iv = randomBytes(12)
    const cipher = createCipheriv("aes-256-gcm", key, iv)
    cipher.setAAD(Buffer.from(`blob\0${sessionId}\0${sha256Hex(data)}`, "utf8"))
    return Buffer.concat([iv, cipher.update(data), cipher.final(), cipher.getAuthTag()])
  }
  /** A store as an earlier release left it: logs of version 1 naming blobs in their sessions' own `blobs/`. */
  const earlierStore = async (dir: string, codec: LogCodecService, blobOf: (sessionId: string, data: Uint8Array) => Uint8Array) => {
    const only = bytesOf("only in t")
    const writer = track(fileCheckpointer({ dir, codec }))
    await writer.append("s", [snapshot("a", plaintext)])
    await writer.append("t", [snapshot("a", plaintext), snapshot("b", only)])
    await writer.close()
    for (const [sessionId, contents] of [["s", [plaintext]], ["t", [plaintext, only]]] as const) {
      mkdirSync(join(dir, sessionId, "blobs"))
      for (const data of contents) writeFileSync(sessionBlobPath(dir, sessionId, sha256Hex(data)), blobOf(sessionId, data))
      const log = join(dir, sessionId, "log")
      writeFileSync(log, readFileSync(log, "utf8").replace('"version":2', '"version":1'))
    }
    rmSync(join(dir, ".objects"), { recursive: true })
    // A blob a crash left half-written.
    writeFileSync(join(dir, "t", "blobs", ".tmp-1-crashed"), "half")
    return [plaintext, only] as const
  }

  it.each([
    ["aes-256-gcm (bound to their session)", () => aes256gcmCodec(key), sealedFor],
    ["json", () => jsonCodec, (_: string, data: Uint8Array) => data]
  ] as const)("%s: opening moves them, each once, every one reads back; the logs say so and the old dirs go", async (_, codec, blobOf) => {
    const dir = tempDir("blob-move")
    const contents = await earlierStore(dir, codec(), blobOf)
    const checkpointer = track(fileCheckpointer({ dir, codec: codec() }))
    for (const data of contents) {
      expect(Array.from(await checkpointer.readSnapshot("t", sha256Hex(data)))).toEqual(Array.from(data))
      expect(existsSync(objectPath(dir, sha256Hex(data)))).toBe(true)
    }
    expect(existsSync(join(dir, "s", "blobs"))).toBe(false)
    expect(existsSync(join(dir, "t", "blobs"))).toBe(false)
    for (const sessionId of ["s", "t"]) expect(readFileSync(join(dir, sessionId, "log"), "utf8")).toMatch(/^\{"format":"lite-agent\/session-log","version":2,/)
    expect((await checkpointer.read("t")).length).toBe(2)
  })
})

describe("a codec that knows only records stores an object as a record named by its hash", () => {
  const plaintext = bytesOf(`RECORD-CODEC-${randomBytes(8).toString("hex")}`.repeat(20))
  /** A codec of records only that authenticates each record's name with its text, as a keyed codec would. */
  const namedCodec: LogCodecService = {
    name: "named",
    encode: (records) =>
      Effect.succeed(records.map((record) => `${Buffer.from(record.payload).toString("base64")}.${sha256Hex(bytesOf(`${record.sessionId}\0${record.seq}\0${record.payload}`))}`)),
    decode: (records) =>
      Effect.forEach(records, (record) => {
        const [body = "", tag] = record.payload.split(".")
        const text = Buffer.from(body, "base64").toString("utf8")
        return tag === sha256Hex(bytesOf(`${record.sessionId}\0${record.seq}\0${text}`))
          ? Effect.succeed(text)
          : Effect.fail(new CodecError({ codec: "named", operation: "decode", detail: `${record.sessionId} ${record.seq}: not its record` }))
      })
  }

  it("bound to its hash; one stored as a record of its session by an earlier release moves in and reads", async () => {
    const dir = tempDir("blob-records")
    const checkpointer = track(fileCheckpointer({ dir, codec: namedCodec }))
    const other = bytesOf("other content")
    await checkpointer.append("s", [snapshot("a", plaintext), snapshot("b", other)])
    // Under another name it is not that name's bytes.
    writeFileSync(objectPath(dir, sha256Hex(other)), readFileSync(objectPath(dir, sha256Hex(plaintext))))
    expect(await checkpointer.readSnapshot("s", sha256Hex(other)).catch((e: unknown) => e)).toBeInstanceOf(CodecError)
    await checkpointer.close()
    // The earlier form: a record of the session, seq 0, in the session's own blobs/.
    const [legacy] = await Effect.runPromise(namedCodec.encode([{ sessionId: "s", seq: 0, payload: Buffer.from(plaintext).toString("base64") }]))
    rmSync(objectPath(dir, sha256Hex(plaintext)))
    mkdirSync(join(dir, "s", "blobs"))
    writeFileSync(sessionBlobPath(dir, "s", sha256Hex(plaintext)), legacy!)
    const reopened = track(fileCheckpointer({ dir, codec: namedCodec }))
    expect(Array.from(await reopened.readSnapshot("s", sha256Hex(plaintext)))).toEqual(Array.from(plaintext))
    expect(existsSync(join(dir, "s", "blobs"))).toBe(false)
  })
})

describe("logs from before the snapshot store", () => {
  it("a log with snapshot bytes inline reads, lists its checkpoint and restores", async () => {
    const dir = tempDir("legacy-log")
    const workdir = tempDir("legacy-work")
    const old = bytesOf("old content\n")
    const now = bytesOf("new content\n")
    writeFileSync(join(workdir, "a.txt"), now)
    chmodSync(join(workdir, "a.txt"), 0o644)
    const events = [
      new UserMessage({ content: "rewrite a.txt", origin: "user" }),
      new AssistantMessage({ content: [{ type: "tool_use", id: "toolu_1", name: "write_file", input: { path: "a.txt", content: "new content\n" } }] }),
      new FileSnapshot({ toolUseId: "toolu_1", path: "a.txt", state: { _tag: "content", data: old, mode: 0o644, size: old.length, sha256: sha256Hex(old) } }),
      new FileChange({ toolUseId: "toolu_1", path: "a.txt", operation: "write", after: { _tag: "file", sha256: sha256Hex(now), size: now.length, mode: 0o644 } }),
      new ToolResult({ toolUseId: "toolu_1", toolName: "write_file", content: "wrote a.txt", isError: false }),
      new AssistantMessage({ content: [{ type: "text", text: "done" }] })
    ]
    const lines = events.map((event, index) => {
      const { ts, event: encoded } = encodeStoredEvent({ seq: index + 1, ts: 1_700_000_000_000, event })
      return recordLine(index + 1, events.length, JSON.stringify({ ts, event: encoded }))
    })
    mkdirSync(join(dir, "legacy"))
    writeFileSync(join(dir, "legacy", "log"), headerLine("json", undefined) + lines.join(""))

    const checkpointer = track(fileCheckpointer({ dir }))
    const stored = await checkpointer.read("legacy")
    const state = (stored[2]!.event as FileSnapshot).state
    expect(state._tag).toBe("content")
    const agent = track(createLiteAgent({ model: scripted([]), workdir, checkpointer, sessionId: "legacy" }))
    const [checkpoint] = await agent.listCheckpoints("legacy")
    expect(checkpoint).toMatchObject({ seq: 1, files: ["a.txt"] })
    const result = await agent.restore("legacy", 1)
    expect(result.restoredFiles).toEqual(["a.txt"])
    expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe("old content\n")
    expect(await agent.listCheckpoints("legacy")).toEqual([])
    expect((await checkpointer.read("legacy")).at(-1)!.event).toMatchObject({ _tag: "LeafMoved", to: 0 })
  })
})

describe("createLiteAgent({ storage })", () => {
  it("configures the default file checkpointer: its codec covers the log and the file snapshots", async () => {
    const dir = tempDir("storage")
    const workdir = tempDir("storage-work")
    const key = randomBytes(32)
    const secret = "TOP-SECRET-FILE-CONTENT"
    const agent = track(createLiteAgent({
      model: scripted([write(`${secret} v1`), { text: "1" }, write(`${secret} v2`), { text: "2" }]),
      workdir,
      storage: { dir, codec: aes256gcmCodec(key), synchronous: "full" }
    }))
    await agent.send("first")
    await agent.send("second")
    const sessionDir = join(dir, agent.sessionId)
    expect(readFileSync(join(sessionDir, "log")).includes(Buffer.from(secret))).toBe(false)
    const blob = objectPath(dir, sha256Hex(bytesOf(`${secret} v1`)))
    expect(existsSync(blob)).toBe(true)
    expect(readFileSync(blob).includes(Buffer.from(secret))).toBe(false)
    const plain = track(fileCheckpointer({ dir }))
    expect(await plain.read(agent.sessionId).catch((e: unknown) => e)).toBeInstanceOf(CodecError)
    const right = track(fileCheckpointer({ dir, codec: aes256gcmCodec(key) }))
    expect(new TextDecoder().decode(await right.readSnapshot(agent.sessionId, sha256Hex(bytesOf(`${secret} v1`))))).toBe(`${secret} v1`)
  })

  it("is refused with a checkpointer, with sessions: false, and with an unknown key", () => {
    const model = scripted([])
    const workdir = tempDir("storage-refused")
    const attempt = (options: Record<string, unknown>) => {
      try {
        createLiteAgent({ model, workdir, ...options } as Parameters<typeof createLiteAgent>[0])
      } catch (error) {
        return error
      }
      return undefined
    }
    expect(attempt({ storage: { dir: workdir }, checkpointer: track(fileCheckpointer({ dir: workdir })) })).toMatchObject({
      _tag: "ConfigurationError",
      option: "storage"
    })
    expect(attempt({ storage: {}, sessions: false })).toMatchObject({ _tag: "ConfigurationError", option: "storage" })
    expect(attempt({ storage: { directory: workdir } })).toMatchObject({ _tag: "ConfigurationError", option: "storage.directory" })
    expect(attempt({ storage: "gzip" })).toMatchObject({ _tag: "ConfigurationError", option: "storage" })
  })
})
