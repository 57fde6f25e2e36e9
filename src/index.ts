/**
 * `@lite-agent/sdk` — the promise facade for plain TypeScript callers: the agent
 * (`createLiteAgent`, `query`) and the checkpointers it persists through.
 */
import * as FileCheckpointer from "./backends/file/FileCheckpointer.js"
import { decodeOptionsOrThrow } from "./core/internal/options.js"
import * as MemoryCheckpointer from "./backends/memory.js"
import { StoreQuotaOptions } from "./core/Checkpointer.js"
import {
  type PromiseCheckpointer,
  type PromiseCheckpointerWithIntegrity,
  toPromiseCheckpointer,
  toPromiseCheckpointerWithIntegrity
} from "./facade/checkpointer.js"

export * from "./core/errors.js"
export * from "./tools/errors.js"
export * from "./agent/errors.js"
export * from "./core/events.js"
export type { SessionEventInput } from "./core/encoding.js"
export type { FollowItem, FollowOptions, ReadOptions, SessionInfo, SessionStats, SnapshotInfo, BranchUsage, DuOptions, GcOptions, GcReport, ObjectBytes, PruneBranchesOptions, PruneBranchesReport, SessionPruning, SessionUsage, StoreUsage } from "./core/Checkpointer.js"
export type { PromiseCheckpointer, PromiseCheckpointerWithIntegrity } from "./facade/checkpointer.js"
export type { IntegrityReport } from "./core/integrity.js"
export { aes256gcmCodec, gzipCodec, jsonCodec, type LogCodecService } from "./backends/file/codec.js"
export type { FileCheckpointerLayerOptions, FileCheckpointerOptions } from "./backends/file/FileCheckpointer.js"
export { type CompactionRun, createLiteAgent, type LiteAgent, type LiteAgentOptions, query, type QueryParams } from "./facade/agent.js"
export type {
  CompactionEvent,
  CompactionPhase,
  CompactionResult,
  CompactionStage,
  CompactOptions
} from "./agent/compaction.js"
export type { TokenFigure, TokenMethod } from "./agent/tokens.js"
export type { AgentEvent, CaptureProblem, LiteAgentResult, ToolCallRecord } from "./agent/AgentEvents.js"
export { bytesOfPath, displayPath, pathOfBytes } from "./core/pathNames.js"
export { type CanUseTool, type PermissionContext, PermissionResult } from "./agent/permissions.js"
export type { BackgroundTaskInfo } from "./agent/MaintenanceLock.js"
export type { SendOptions } from "./agent/turn.js"
export type { PruneOptions } from "./agent/LiteAgent.js"
export type { Checkpoint, SessionTree, TreeBranch, TreeCheckpoint } from "./core/session.js"
export type { BranchToPrune, KeptBranch, KeptReason } from "./core/branchPruning.js"
export type { SkipReason } from "./core/pruneBranches.js"
export type {
  ForkOptions,
  ForkResult,
  InterruptedRestore,
  MoveOptions,
  RestoreOptions,
  RestoreProgress,
  RestoreResult
} from "./tools/TimeTravel.js"

/** A process-local checkpointer that keeps everything in memory (tests, ephemeral agents); `maxStoreBytes`: a quota. */
export const memoryCheckpointer = (options?: StoreQuotaOptions): PromiseCheckpointer => {
  const valid = decodeOptionsOrThrow(StoreQuotaOptions, options ?? {}, "memory checkpointer options")
  return toPromiseCheckpointer(valid.maxStoreBytes === undefined ? MemoryCheckpointer.layer : MemoryCheckpointer.layerWith(valid))
}

/**
 * The default checkpointer: one durable append-only log per session under `options.dir`
 * (default `~/.lite-agent/sessions`, or `$LITE_AGENT_HOME/sessions`). Bad options throw
 * `ConfigurationError` at once; an unusable directory surfaces as one on the first call.
 */
export const fileCheckpointer = (
  options: FileCheckpointer.FileCheckpointerLayerOptions = {}
): PromiseCheckpointerWithIntegrity =>
  toPromiseCheckpointerWithIntegrity(
    FileCheckpointer.layer(decodeOptionsOrThrow(FileCheckpointer.FileCheckpointerLayerOptions, options, "file checkpointer options"))
  )
