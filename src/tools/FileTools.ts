/**
 * The file tools the agent calls (and that can be used directly). Mutating tools record, in
 * the session log and before touching the disk, a snapshot of what the path held — on the
 * first change to it after each checkpoint — and after every change the sha-256 and mode of
 * what they left. Those records are ordinary session events, so they go through the same
 * checkpointer (and codec) as the conversation.
 */
import { Context, Effect, Layer, Schema } from "effect"
import { Checkpointer, quotaReason } from "../core/Checkpointer.js"
import { type CheckpointerError } from "../core/errors.js"
import { ToolInputError, type UnsafePathError, type WorkspaceIOError } from "./errors.js"
import { FileChange, FileSnapshot, type FileSnapshotState } from "../core/events.js"
import * as Session from "../core/session.js"
import { ConfigurationError } from "../core/errors.js"
import { decodeOptions, NonNegativeInteger } from "../core/internal/options.js"
import { sha256Hex } from "../core/internal/sha256.js"
import * as SessionStates from "./SessionStates.js"
import { type FileState, normalizeRelative, type PathState, Workspace } from "./Workspace.js"

export interface ToolCallContext {
  readonly sessionId: string
  /** The id of the model's tool_use block; ties snapshot and change records to the call. */
  readonly toolUseId: string
  /**
   * The session folded up to its head, when the caller already has it (the agent does): saves
   * reading the whole log again. If it is stale, the snapshot's append fails with
   * `CheckpointConflictError` instead of deciding on old facts.
   */
  readonly state?: Session.SessionState
}

export type FileToolError = ToolInputError | UnsafePathError | WorkspaceIOError | CheckpointerError

export interface FileChangeResult {
  readonly path: string
  /** sha-256 of what the tool left, or null when the file is gone. */
  readonly sha256: string | null
}

export interface FileToolsService {
  readonly readFile: (input: { readonly path: string }) => Effect.Effect<string, FileToolError>
  readonly listFiles: (input: { readonly path?: string }) => Effect.Effect<ReadonlyArray<string>, FileToolError>
  readonly writeFile: (
    context: ToolCallContext,
    input: { readonly path: string; readonly content: string | Uint8Array; readonly mode?: number }
  ) => Effect.Effect<FileChangeResult, FileToolError>
  readonly editFile: (
    context: ToolCallContext,
    input: { readonly path: string; readonly old_string: string; readonly new_string: string }
  ) => Effect.Effect<FileChangeResult, FileToolError>
  readonly deleteFile: (context: ToolCallContext, input: { readonly path: string }) => Effect.Effect<FileChangeResult, FileToolError>
  readonly chmodFile: (
    context: ToolCallContext,
    input: { readonly path: string; readonly mode: number }
  ) => Effect.Effect<FileChangeResult, FileToolError>
}

export class FileTools extends Context.Tag("@lite-agent/tools/FileTools")<FileTools, FileToolsService>() {}

export const fileToolsOptionFields = {
  /** Files larger than this are recorded as "unavailable" rather than snapshotted. Default 10 MiB. */
  snapshotMaxBytes: Schema.optional(NonNegativeInteger)
}
export const FileToolsOptions = Schema.Struct(fileToolsOptionFields)
export interface FileToolsOptions extends Schema.Schema.Type<typeof FileToolsOptions> {}

export const DEFAULT_SNAPSHOT_MAX_BYTES = 10 * 1024 * 1024

export const make = (input: FileToolsOptions = {}) =>
  Effect.gen(function*() {
    const options = yield* decodeOptions(FileToolsOptions, input, "file tools options")
    const workspace = yield* Workspace
    const checkpointer = yield* Checkpointer
    const snapshotMaxBytes = options.snapshotMaxBytes ?? DEFAULT_SNAPSHOT_MAX_BYTES
    // One mutation at a time, so snapshot decisions see every earlier record.
    const lock = yield* Effect.makeSemaphore(1)

    const states = yield* SessionStates.fromContextOrNew
    /** The session folded up to its current head (incrementally, from the shared cache). */
    const stateOf = (sessionId: string) => Effect.map(states.get(sessionId), (folded) => folded.state)

    const snapshotOf = (current: PathState): Effect.Effect<FileSnapshotState, FileToolError> =>
      Effect.gen(function*() {
        if (current.kind === "absent") return { _tag: "missing" as const }
        if (current.kind === "other") return { _tag: "unavailable" as const, reason: current.description }
        if (current.data.length > snapshotMaxBytes) {
          return {
            _tag: "unavailable" as const,
            reason: `${current.data.length} bytes is larger than the snapshot cap of ${snapshotMaxBytes} bytes`,
            size: current.data.length
          }
        }
        const sha256 = sha256Hex(current.data)
        // Past the store's quota only content the store holds already is kept (see captureQuota.ts).
        const room = yield* Effect.orElseSucceed(checkpointer.storeRoom([sha256]), () => undefined)
        if (room !== undefined && !room.stored.has(sha256) && current.data.length > room.roomBytes) {
          return { _tag: "unavailable" as const, reason: quotaReason(room), size: current.data.length }
        }
        return { _tag: "content" as const, data: current.data, mode: current.mode, size: current.data.length, sha256 }
      })

    /**
     * The shared path of every mutating tool: check the path, compute the new state from
     * the current one (failing before anything is recorded), snapshot if needed, apply,
     * record what was left.
     */
    const leftAt = (path: string) =>
      Effect.map(workspace.inspect(path), (state) =>
        state.kind === "file"
          ? { _tag: "file" as const, sha256: sha256Hex(state.data), size: state.data.length, mode: state.mode }
          : { _tag: "absent" as const })

    const mutate = (
      tool: string,
      operation: FileChange["operation"],
      context: ToolCallContext,
      rawPath: string,
      next: (current: PathState) => Effect.Effect<FileState | { readonly kind: "absent" }, ToolInputError>
    ): Effect.Effect<FileChangeResult, FileToolError> =>
      lock.withPermits(1)(Effect.gen(function*() {
        yield* workspace.resolve(rawPath)
        const path = normalizeRelative(rawPath)
        // An oversized file that is replaced or deleted is never read whole: it cannot be snapshotted anyway.
        const found = yield* workspace.stat(path)
        const oversized = found !== undefined && found.size > snapshotMaxBytes
        const current: PathState = oversized && (operation === "write" || operation === "delete")
          ? { kind: "file", data: new Uint8Array(0), mode: found.mode }
          : yield* workspace.inspect(path)
        if (current.kind === "other") {
          return yield* new ToolInputError({ tool, path, detail: `the path is ${current.description}` })
        }
        // Invalid input fails here, before anything is recorded or changed.
        const target = yield* next(current)
        const state = context.state ?? (yield* stateOf(context.sessionId))
        const snapshot = Session.needsSnapshot(state, path)
          ? oversized
            ? new FileSnapshot({
              toolUseId: context.toolUseId,
              path,
              state: {
                _tag: "unavailable",
                reason: `${found.size} bytes is larger than the snapshot cap of ${snapshotMaxBytes} bytes`,
                size: found.size
              }
            })
            : new FileSnapshot({ toolUseId: context.toolUseId, path, state: yield* snapshotOf(current) })
          : undefined
        const apply = target.kind === "absent"
          ? workspace.remove(path)
          : operation === "chmod"
          ? workspace.chmod(path, target.mode)
          : workspace.write(path, target.data, target.mode)
        // From the snapshot to the change record nothing may stop half-way: a snapshot without its
        // change record makes every earlier checkpoint refuse to restore this path.
        return yield* Effect.uninterruptible(Effect.gen(function*() {
          if (snapshot !== undefined) yield* checkpointer.append(context.sessionId, [snapshot], state.head)
          const applied = yield* Effect.either(apply)
          // Whatever happened, record what is on disk now; a failed change usually left the old file.
          const after = yield* leftAt(path)
          yield* checkpointer.append(context.sessionId, [
            new FileChange({ toolUseId: context.toolUseId, path, operation, after })
          ])
          if (applied._tag === "Left") return yield* Effect.fail(applied.left)
          return { path, sha256: after._tag === "file" ? after.sha256 : null }
        }))
      }))

    const encode = (content: string | Uint8Array) =>
      typeof content === "string" ? new TextEncoder().encode(content) : content
    const validMode = (tool: string, path: string, mode: number) =>
      Number.isInteger(mode) && mode >= 0 && mode <= 0o7777
        ? Effect.succeed(mode)
        : Effect.fail(new ToolInputError({ tool, path, detail: `mode must be an integer from 0 to 0o7777, got ${mode}` }))

    const service: FileToolsService = {
      readFile: ({ path }) =>
        Effect.flatMap(workspace.inspect(path), (state) =>
          state.kind === "file"
            ? Effect.succeed(new TextDecoder().decode(state.data))
            : Effect.fail(
              new ToolInputError({
                tool: "read_file",
                path,
                detail: state.kind === "absent" ? "no such file" : `the path is ${state.description}`
              })
            )),
      listFiles: ({ path }) => workspace.list(path ?? "."),
      writeFile: (context, { content, mode, path }) =>
        mutate("write_file", "write", context, path, (current) =>
          Effect.map(
            mode === undefined ? Effect.succeed(current.kind === "file" ? current.mode : 0o644) : validMode("write_file", path, mode),
            (resolvedMode) => ({ kind: "file" as const, data: encode(content), mode: resolvedMode })
          )),
      editFile: (context, { new_string, old_string, path }) =>
        mutate("edit_file", "edit", context, path, (current) => {
          if (current.kind !== "file") {
            return Effect.fail(new ToolInputError({ tool: "edit_file", path, detail: "no such file" }))
          }
          if (old_string.length === 0) {
            return Effect.fail(new ToolInputError({ tool: "edit_file", path, detail: "old_string is empty" }))
          }
          // Match and splice bytes, so everything outside the match (a BOM, other encodings) stays as it was.
          const bytes = Buffer.from(current.data.buffer, current.data.byteOffset, current.data.byteLength)
          const needle = Buffer.from(old_string, "utf8")
          const first = bytes.indexOf(needle)
          if (first < 0) return Effect.fail(new ToolInputError({ tool: "edit_file", path, detail: "old_string was not found" }))
          if (bytes.indexOf(needle, first + 1) >= 0) {
            return Effect.fail(
              new ToolInputError({ tool: "edit_file", path, detail: "old_string occurs more than once; give more context" })
            )
          }
          const edited = Buffer.concat([bytes.subarray(0, first), Buffer.from(new_string, "utf8"), bytes.subarray(first + needle.length)])
          return Effect.succeed({ kind: "file" as const, data: new Uint8Array(edited), mode: current.mode })
        }),
      deleteFile: (context, { path }) =>
        mutate("delete_file", "delete", context, path, (current) =>
          current.kind === "absent"
            ? Effect.fail(new ToolInputError({ tool: "delete_file", path, detail: "no such file" }))
            : Effect.succeed({ kind: "absent" as const })),
      chmodFile: (context, { mode, path }) =>
        mutate("chmod_file", "chmod", context, path, (current) =>
          current.kind !== "file"
            ? Effect.fail(new ToolInputError({ tool: "chmod_file", path, detail: "no such file" }))
            : Effect.map(validMode("chmod_file", path, mode), (resolved) => ({ ...current, mode: resolved })))
    }
    return service
  })

export const layer = (options: FileToolsOptions = {}): Layer.Layer<FileTools, ConfigurationError, Workspace | Checkpointer> =>
  Layer.effect(FileTools, make(options))
