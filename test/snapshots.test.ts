/**
 * The snapshot store on real files: restore refuses a missing or damaged blob and changes
 * nothing; blobs go through the log's codec (never plaintext under gzip or AES, bound to their
 * name); and logs written before the store, with snapshot bytes inline, still restore.
 */
import { createCipheriv, randomBytes } from "node:crypto"
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { recordLine, headerLine } from "../src/backends/file/format.js"
import { encodeStoredEvent } from "../src/core/encoding.js"
import { sha256Hex } from "../src/core/internal/sha256.js"
import {
  aes256gcmCodec,
  AssistantMessage,
  CodecError,
  createLiteAgent,
  fileCheckpointer,
  FileChange,
  FileSnapshot,
  gzipCodec,
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
    const blob = join(dir, agent.sessionId, "blobs", sha256Hex(bytesOf("one")))
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

  it("a restore puts the bytes back and keeps every blob: the branch it leaves still references them", async () => {
    const { agent, checkpointer, workdir, second } = await threeVersions()
    // "one", "two" and "three", each once: the captures after the writes and the snapshots before them share blobs.
    const blobs = (await checkpointer.listSnapshots(agent.sessionId)).map((blob) => blob.sha256).sort()
    expect(blobs.length).toBe(3)
    await agent.restore(agent.sessionId, second.seq)
    expect(readFileSync(join(workdir, "a.txt"), "utf8")).toBe("one")
    // "two" and "three" are referenced only by the branch the restore left, which stays: a sweep keeps them.
    expect(await checkpointer.sweepSnapshots(agent.sessionId)).toBe(0)
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

describe("the file backend's sweep", () => {
  it("removes what a crash left half-written in blobs/, and keeps every referenced blob", async () => {
    const dir = tempDir("blob-leftovers")
    const checkpointer = track(fileCheckpointer({ dir }))
    const data = bytesOf("kept")
    await checkpointer.append("s", [snapshot("a", data)])
    const blobs = join(dir, "s", "blobs")
    writeFileSync(join(blobs, ".tmp-12345-crashed"), "half a blob")
    expect(await checkpointer.sweepSnapshots("s")).toBe(0)
    expect(existsSync(join(blobs, ".tmp-12345-crashed"))).toBe(false)
    expect(new TextDecoder().decode(await checkpointer.readSnapshot("s", sha256Hex(data)))).toBe("kept")
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
    const onDisk = readFileSync(join(dir, "s", "blobs", sha256Hex(plaintext)))
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
    const blobs = join(dir, "s", "blobs")
    renameSync(join(blobs, sha256Hex(plaintext)), join(blobs, sha256Hex(other)))
    expect(await checkpointer.readSnapshot("s", sha256Hex(other)).catch((e: unknown) => e)).toBeInstanceOf(CodecError)
    const missing = await checkpointer.readSnapshot("s", sha256Hex(plaintext)).catch((e: unknown) => e)
    expect(missing).toBeInstanceOf(SnapshotBlobError)
    expect(missing).toMatchObject({ reason: "missing" })
  })
})

describe("aes-256-gcm blobs are bound to their hash, not their session", () => {
  const plaintext = bytesOf(`SHARED-OBJECT-${randomBytes(8).toString("hex")}`.repeat(20))

  it("the same bytes are the same object in every session: a blob copied into another session's store under its name reads back", async () => {
    const dir = tempDir("blob-object")
    const checkpointer = track(fileCheckpointer({ dir, codec: aes256gcmCodec(randomBytes(32)) }))
    await checkpointer.append("s", [snapshot("a", plaintext)])
    await checkpointer.append("t", [new UserMessage({ content: "another session" })])
    mkdirSync(join(dir, "t", "blobs"))
    copyFileSync(join(dir, "s", "blobs", sha256Hex(plaintext)), join(dir, "t", "blobs", sha256Hex(plaintext)))
    expect(Array.from(await checkpointer.readSnapshot("t", sha256Hex(plaintext)))).toEqual(Array.from(plaintext))
  })

  it("a blob written when blobs were bound to their session too still reads; under another session it does not", async () => {
    const dir = tempDir("blob-legacy")
    const key = randomBytes(32)
    const checkpointer = track(fileCheckpointer({ dir, codec: aes256gcmCodec(key) }))
    await checkpointer.append("s", [new UserMessage({ content: "a session whose blob is older" })])
    // The earlier format: AES-256-GCM, a random IV, "blob\0<session>\0<sha256>" authenticated.
    const sha256 = sha256Hex(plaintext)
    const sealed = (sessionId: string) => {
      const iv = randomBytes(12)
      const cipher = createCipheriv("aes-256-gcm", key, iv)
      cipher.setAAD(Buffer.from(`blob\0${sessionId}\0${sha256}`, "utf8"))
      return Buffer.concat([iv, cipher.update(plaintext), cipher.final(), cipher.getAuthTag()])
    }
    mkdirSync(join(dir, "s", "blobs"))
    writeFileSync(join(dir, "s", "blobs", sha256), sealed("s"))
    expect(Array.from(await checkpointer.readSnapshot("s", sha256))).toEqual(Array.from(plaintext))
    writeFileSync(join(dir, "s", "blobs", sha256), sealed("elsewhere"))
    expect(await checkpointer.readSnapshot("s", sha256).catch((e: unknown) => e)).toBeInstanceOf(CodecError)
  })
})

describe("a codec that knows only records stores a blob as a record named by its hash", () => {
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

  it("shared by sessions, bound to its hash; one stored as a record of its session (before) still reads", async () => {
    const dir = tempDir("blob-records")
    const checkpointer = track(fileCheckpointer({ dir, codec: namedCodec }))
    const other = bytesOf("other content")
    await checkpointer.append("s", [snapshot("a", plaintext), snapshot("b", other)])
    await checkpointer.append("t", [new UserMessage({ content: "another session" })])
    mkdirSync(join(dir, "t", "blobs"))
    copyFileSync(join(dir, "s", "blobs", sha256Hex(plaintext)), join(dir, "t", "blobs", sha256Hex(plaintext)))
    expect(Array.from(await checkpointer.readSnapshot("t", sha256Hex(plaintext)))).toEqual(Array.from(plaintext))
    // Under another name it is not that name's bytes.
    copyFileSync(join(dir, "s", "blobs", sha256Hex(plaintext)), join(dir, "s", "blobs", sha256Hex(other)))
    expect(await checkpointer.readSnapshot("s", sha256Hex(other)).catch((e: unknown) => e)).toBeInstanceOf(CodecError)
    // The earlier form: a record of the session, seq 0.
    const [legacy] = await Effect.runPromise(namedCodec.encode([{ sessionId: "s", seq: 0, payload: Buffer.from(plaintext).toString("base64") }]))
    writeFileSync(join(dir, "s", "blobs", sha256Hex(plaintext)), legacy!)
    expect(Array.from(await checkpointer.readSnapshot("s", sha256Hex(plaintext)))).toEqual(Array.from(plaintext))
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
    const blob = join(sessionDir, "blobs", sha256Hex(bytesOf(`${secret} v1`)))
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
