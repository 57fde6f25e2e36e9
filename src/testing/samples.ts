/**
 * Sample events for the conformance suite, and the forms a store keeps and accepts events in.
 */
import { sha256Hex } from "../core/internal/sha256.js"
import { isPlainObject } from "../core/internal/options.js"
import {
  AssistantMessage,
  BackgroundCompleted,
  Compaction,
  FileChange,
  FileSnapshot,
  type JsonValue,
  BranchesPruned,
  BranchLabeled,
  PermissionDecided,
  LeafMoved,
  SessionForked,
  ForkMade,
  RestoreEnded,
  RestoreStarted,
  RuntimeMessage,
  type SessionEvent,
  SessionMetadata,
  STORED_ARGUMENT_MIN_BYTES,
  ToolResult,
  type ToolUseBlock,
  UserMessage,
  WorkspaceCaptured
} from "../core/events.js"
import { withBlobs } from "../core/internal/blobs.js"
import { encodeChunk, type ManifestEntry } from "../core/manifest.js"

const awkwardText = "héllo wörld — 你好，世界 🚀 \u{1F468}\u200D\u{1F469}\u200D\u{1F467} \"quotes\" \\ back\\slash \n\r\n\t tab"
const largeText = "0123456789abcdef".repeat(64 * 1024) // 1 MiB

const SAMPLE_SNAPSHOT_BYTES = new Uint8Array([0, 1, 2, 255, 254, 13, 10, 0])
/** What a file held before a restore, in the sample `RestoreStarted`. */
export const SAMPLE_RESTORE_BEFORE_BYTES: Uint8Array = new TextEncoder().encode("the agent's version, ü\n")

/** A tool call as a store keeps it: each top-level string argument of at least `STORED_ARGUMENT_MIN_BYTES` UTF-8 bytes moved out. */
const withArgumentsStored = (call: ToolUseBlock): ToolUseBlock => {
  if (!isPlainObject(call.input)) return call
  const input: Record<string, JsonValue> = { ...call.input }
  const storedArguments = [...(call.storedArguments ?? [])]
  for (const [key, value] of Object.entries(input)) {
    if (typeof value !== "string" || !value.isWellFormed()) continue
    const bytes = new TextEncoder().encode(value)
    if (bytes.length < STORED_ARGUMENT_MIN_BYTES) continue
    storedArguments.push({ key, sha256: sha256Hex(bytes), size: bytes.length })
    delete input[key]
  }
  return storedArguments.length === 0 ? call : { ...call, input, storedArguments }
}

/**
 * `event` as a store keeps it (whatever its kind, through its blob lens): inline bytes become a
 * `stored` reference to them, and a tool call's large string arguments become stored arguments.
 */
export const asStored = (event: SessionEvent): SessionEvent =>
  withBlobs(event, {
    state: (state) => (state._tag === "content" ? { _tag: "stored", sha256: state.sha256, size: state.size, mode: state.mode } : state),
    toolCall: withArgumentsStored
  })

/** A generated capture's manifest names chunks no store holds, or bytes that are none: dropped. */
const withoutManifest = (event: SessionEvent): SessionEvent => {
  if (event._tag !== "WorkspaceCaptured" || event.manifest === undefined) return event
  const { manifest: _dropped, ...fields } = event
  return new WorkspaceCaptured(fields)
}

/**
 * `event` made acceptable to any store (for generated events): inline bytes get their true size
 * and hash, a `stored` reference (whose blob a fresh store lacks) becomes `missing`, and tool
 * calls lose their stored arguments (same reason).
 */
export const storable = (event: SessionEvent): SessionEvent =>
  withBlobs(withoutManifest(event), {
    state: (state) =>
      state._tag === "content"
        ? { ...state, size: state.data.length, sha256: sha256Hex(state.data) }
        : state._tag === "stored"
        ? { _tag: "missing" }
        : state,
    toolCall: ({ storedArguments: _dropped, ...call }) => call
  })

/** A session's first capture listed by a manifest of one chunk (its changes are the chunk's entries). */
const manifestSample = () => {
  const sha256 = sha256Hex(SAMPLE_SNAPSHOT_BYTES)
  const stat = { size: SAMPLE_SNAPSHOT_BYTES.length, mtimeMs: 1_700_000_000_000.25, ctimeMs: 1_700_000_000_000.5, ino: 4242, hashedAtMs: 1_700_000_100_000 }
  const entries: ReadonlyArray<ManifestEntry> = [
    { path: "README.md", state: { _tag: "stored", sha256, size: SAMPLE_SNAPSHOT_BYTES.length, mode: 0o644 }, stat },
    { path: "docs", state: { _tag: "directory", mode: 0o755 } },
    { path: "docs/latest", state: { _tag: "link", target: "../README.md" } },
    { path: "huge.iso", state: { _tag: "unavailable", reason: "larger than the cap", size: 20_000_000 } }
  ]
  const chunk = encodeChunk(entries)
  return new WorkspaceCaptured({
    cause: { _tag: "checkpoint" },
    coverage: "0123456789abcdef",
    changes: [
      {
        path: "README.md",
        state: { _tag: "content", data: SAMPLE_SNAPSHOT_BYTES, mode: 0o644, size: SAMPLE_SNAPSHOT_BYTES.length, sha256 },
        firstSeen: true
      },
      ...entries.slice(1).map((entry) => ({ path: entry.path, state: entry.state, firstSeen: true as const }))
    ],
    manifest: [{ _tag: "content", data: chunk, mode: 0, size: chunk.length, sha256: sha256Hex(chunk) }]
  })
}

/** One event of every kind, with every optional field set somewhere. */
export const sampleEvents = (): ReadonlyArray<SessionEvent> => samples()

const samples = () => [
  new SessionMetadata({
    formatVersion: 1,
    title: awkwardText,
    workdir: "/home/dev/project",
    model: "claude-sonnet-4-6",
    labels: { team: "core", "emoji 🚀": "yes" }
  }),
  new SessionMetadata({ formatVersion: 1 }),
  new UserMessage({ content: awkwardText, origin: "user" }),
  new UserMessage({ content: [{ type: "text", text: "first block" }, { type: "text", text: awkwardText }], origin: "user" }),
  new UserMessage({ content: "a record from before the marker" }),
  new RuntimeMessage({ kind: "reminder", content: "<system-reminder>keep going</system-reminder>" }),
  new RuntimeMessage({ kind: "repair", content: [{ type: "text", text: "tool call t1 was interrupted" }] }),
  new RuntimeMessage({ kind: "background_completion", content: "task b1 finished" }),
  new AssistantMessage({
    content: [
      { type: "text", text: awkwardText },
      {
        type: "tool_use",
        id: "toolu_01",
        name: "write_file",
        input: {
          path: "src/a.ts",
          content: largeText,
          nested: { list: [1, -2.5, 1e300, true, null, "x", { deep: [[[]]] }], empty: {} }
        }
      }
    ],
    model: "claude-sonnet-4-6",
    stopReason: "tool_use",
    usage: { inputTokens: 1234, outputTokens: 56 }
  }),
  new AssistantMessage({ content: [] }),
  new ToolResult({ toolUseId: "toolu_01", toolName: "write_file", content: "ok", isError: false }),
  new ToolResult({
    toolUseId: "toolu_02",
    toolName: "bash",
    content: [{ type: "text", text: "exit 1\n" + awkwardText }],
    isError: true
  }),
  // A large record in the log itself: tool results stay inline.
  new ToolResult({ toolUseId: "toolu_03", toolName: "read_file", content: largeText, isError: false }),
  new FileSnapshot({
    toolUseId: "toolu_01",
    path: "src/ünïcode dir/a b.ts",
    state: {
      _tag: "content",
      data: SAMPLE_SNAPSHOT_BYTES,
      mode: 0o644,
      size: SAMPLE_SNAPSHOT_BYTES.length,
      sha256: sha256Hex(SAMPLE_SNAPSHOT_BYTES)
    }
  }),
  new FileSnapshot({ toolUseId: "toolu_01", path: "new.txt", state: { _tag: "missing" } }),
  new FileSnapshot({
    toolUseId: "toolu_03",
    path: "big.bin",
    state: { _tag: "unavailable", reason: "larger than the 10 MiB snapshot cap", size: 20_000_000 }
  }),
  new FileSnapshot({ toolUseId: "toolu_03", path: "fifo", state: { _tag: "unavailable", reason: "not a regular file" } }),
  new FileChange({
    toolUseId: "toolu_01",
    path: "src/a.ts",
    operation: "write",
    after: { _tag: "file", sha256: "b".repeat(64), size: largeText.length, mode: 0o755 }
  }),
  new FileChange({ toolUseId: "toolu_04", path: "gone.txt", operation: "delete", after: { _tag: "absent" } }),
  new FileChange({ toolUseId: "toolu_05", path: "legacy.txt", operation: "edit" }),
  new Compaction({
    summary: awkwardText,
    keptFromSeq: 3,
    tokensBefore: 100_000,
    tokensAfter: 2_000,
    instructions: "keep the API decisions"
  }),
  new Compaction({ summary: "", tokensBefore: 0, tokensAfter: 0 }),
  new BackgroundCompleted({
    taskId: "bg-1",
    command: "npm test",
    exitCode: 0,
    output: awkwardText,
    outputTruncated: false
  }),
  new BackgroundCompleted({
    taskId: "bg-2",
    command: "sleep 100",
    exitCode: null,
    signal: "SIGTERM",
    output: "",
    outputTruncated: true
  }),
  new RestoreStarted({
    checkpoint: 2,
    conversation: true,
    files: [
      {
        path: "src/ünïcode dir/a b.ts",
        before: {
          _tag: "content",
          data: SAMPLE_RESTORE_BEFORE_BYTES,
          mode: 0o755,
          size: SAMPLE_RESTORE_BEFORE_BYTES.length,
          sha256: sha256Hex(SAMPLE_RESTORE_BEFORE_BYTES)
        },
        target: { _tag: "file", sha256: sha256Hex(SAMPLE_SNAPSHOT_BYTES), size: SAMPLE_SNAPSHOT_BYTES.length, mode: 0o644 }
      },
      { path: "new.txt", before: { _tag: "missing" }, target: { _tag: "absent" } }
    ]
  }),
  new RestoreStarted({ checkpoint: 1, conversation: false, files: [] }),
  new RestoreEnded({ startedSeq: 24, outcome: "finished" }),
  new RestoreEnded({ startedSeq: 25, outcome: "undone" }),
  new WorkspaceCaptured({
    cause: { _tag: "tool", toolUseId: "toolu_01" },
    coverage: "0123456789abcdef",
    changes: [
      {
        path: "src/ünïcode dir/a b.ts",
        state: {
          _tag: "content",
          data: SAMPLE_SNAPSHOT_BYTES,
          mode: 0o644,
          size: SAMPLE_SNAPSHOT_BYTES.length,
          sha256: sha256Hex(SAMPLE_SNAPSHOT_BYTES)
        }
      },
      { path: "build", state: { _tag: "missing" } },
      { path: "current", state: { _tag: "link", target: "../outside/ü.txt" } },
      { path: "gen/deep", state: { _tag: "directory", mode: 0o755 }, firstSeen: true },
      { path: "big.bin", state: { _tag: "unavailable", reason: "larger than the cap", size: 20_000_000 } }
    ]
  }),
  manifestSample(),
  new WorkspaceCaptured({ cause: { _tag: "checkpoint" }, coverage: "", changes: [] }),
  new WorkspaceCaptured({ cause: { _tag: "task", taskId: "bg_1" }, coverage: "x", changes: [] }),
  new WorkspaceCaptured({ cause: { _tag: "restore" }, coverage: "x", changes: [] }),
  new RestoreStarted({
    checkpoint: 3,
    conversation: false,
    files: [
      { path: "current", before: { _tag: "link", target: "src/b.ts" }, target: { _tag: "link", target: "src/a.ts" } },
      { path: "gen", before: { _tag: "directory", mode: 0o700 }, target: { _tag: "absent" } },
      { path: "build", before: { _tag: "missing" }, target: { _tag: "directory", mode: 0o755 } }
    ]
  }),
  new LeafMoved({ from: 30, to: 4, reason: "restore", restoreStarted: 29 }),
  new LeafMoved({ from: 4, to: 30, reason: "undo" }),
  new LeafMoved({ from: 30, to: 0, reason: "redo" }),
  new LeafMoved({ from: 0, to: 12, reason: "switch" }),
  new BranchLabeled({ seq: 12, label: "the faster way ✓" }),
  new BranchLabeled({ seq: 3, label: "" }),
  new ForkMade({ fork: "the other way", at: 12 }),
  new BranchesPruned({ branches: [{ tip: 9, nodes: [{ from: 7, to: 9 }] }, { tip: 11, nodes: [{ from: 11, to: 11 }] }], before: 1_700_000_000_000 }),
  new PermissionDecided({ toolUseId: "toolu_2", toolName: "shell", behavior: "allow", decidedBy: "callback", mode: "default", remember: true }),
  new PermissionDecided({
    toolUseId: "toolu_3",
    toolName: "delete_file",
    behavior: "deny",
    decidedBy: "mode",
    mode: "plan",
    message: "plan mode: read-only tools only — «rm» refused",
    interrupt: true
  })
] as const

/**
 * A fork's first event, apart from the others: it is only stored as the first event of a new
 * session, and only when the session it names holds `at` events (the fork tests append it).
 */
export const sampleFork = (from: string, at: number): SessionForked => new SessionForked({ from, at })

// Every kind has a sample: a kind added without one fails to compile here, naming it.
type Unsampled = Exclude<SessionEvent["_tag"], ReturnType<typeof samples>[number]["_tag"] | "SessionForked">
export const everyKindSampled: [Unsampled] extends [never] ? true : { readonly unsampled: Unsampled } = true
