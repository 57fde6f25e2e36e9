/**
 * `@lite-agent/sdk/core` — the Effect API: events, the pure fold, the `Checkpointer`
 * contract and its errors (src/core), the memory and file backends with their codecs, file
 * primitives and session lock (src/backends), the file tools and time travel (src/tools), and
 * the agent runtime (src/agent). The conformance suite is `@lite-agent/sdk/testing`; it is
 * re-exported here too.
 */
export * from "./core/errors.js"
export * from "./tools/errors.js"
export * from "./agent/errors.js"
export * from "./core/events.js"
export * from "./core/encoding.js"
export * from "./core/sessionId.js"
export * from "./core/userCheckpoint.js"
export { bytesOfPath, displayPath, pathOfBytes } from "./core/pathNames.js"
export * as Session from "./core/session.js"
export type { FollowItem, SessionStats, SessionVersion, SnapshotBlob, SnapshotInfo, BranchUsage, DuOptions, GcOptions, GcReport, ObjectBytes, PruneBranchesOptions, PruneBranchesReport, SessionPruning, SessionUsage, StoreUsage } from "./core/Checkpointer.js"
export type {
  Checkpoint,
  CheckpointAnchor,
  Conversation,
  ConversationEntry,
  FileHistoryEntry,
  PendingToolCall,
  SessionState,
  SessionTree,
  TreeBranch,
  TreeCheckpoint
} from "./core/session.js"
export {
  Checkpointer,
  type CheckpointerDriver,
  type CheckpointerService,
  type FollowOptions,
  type LockedSession,
  make as makeCheckpointer,
  NO_GENERATION,
  type ReadOptions,
  type RecordPage,
  type SessionInfo
} from "./core/Checkpointer.js"
export { fullToolInput } from "./core/fullToolInput.js"
export * as MemoryCheckpointer from "./backends/memory.js"
export * as FileCheckpointer from "./backends/file/FileCheckpointer.js"
export type { FileCheckpointerOptions } from "./backends/file/FileCheckpointer.js"
export * as LogCodec from "./backends/file/codec.js"
export { aes256gcmCodec, type CodecRecord, gzipCodec, jsonCodec, type LogCodecService } from "./backends/file/codec.js"
export * as LogFiles from "./backends/file/LogFiles.js"
export type { LogFilesService, LogHandle } from "./backends/file/LogFiles.js"
export * as SessionLock from "./backends/file/SessionLock.js"
export type {
  HeldSessionLock,
  NodeSessionLockOptions,
  SessionLockService,
  SessionLockTarget
} from "./backends/file/SessionLock.js"
export { CheckpointerIntegrity, type IntegrityReport } from "./core/integrity.js"
export * from "./core/restore.js"
export { type BranchToPrune, type KeptBranch, type KeptReason, planPruning, type PruningPlan } from "./core/branchPruning.js"
export { type PrunableStore, pruneBranches, type SkipReason } from "./core/pruneBranches.js"
export * as Workspace from "./tools/Workspace.js"
export type { PathState, WorkspaceService } from "./tools/Workspace.js"
export * as FileTools from "./tools/FileTools.js"
export type { FileChangeResult, FileToolError, FileToolsService, ToolCallContext } from "./tools/FileTools.js"
export * as TimeTravel from "./tools/TimeTravel.js"
export * as SessionStates from "./tools/SessionStates.js"
export type { FoldedSession, SessionStatesService } from "./tools/SessionStates.js"
export type {
  ForkOptions,
  ForkResult,
  MoveOptions,
  PlannedFile,
  RestoreError,
  RestoreOptions,
  RestoreProgress,
  RestoreResult,
  TimeTravelService
} from "./tools/TimeTravel.js"
export { checkpointerConformance, type ConformanceOptions, type ConformanceRunner, sampleEvents } from "./testing.js"
export * as LiteAgent from "./agent/LiteAgent.js"
export type { LiteAgentLayerOptions, LiteAgentService } from "./agent/LiteAgent.js"
export type { AgentEvent, LiteAgentResult, ToolCallRecord } from "./agent/AgentEvents.js"
export { type CanUseTool, type PermissionContext, PermissionResult } from "./agent/permissions.js"
export * as MaintenanceLock from "./agent/MaintenanceLock.js"
export type { BackgroundTaskInfo, MaintenanceLockService } from "./agent/MaintenanceLock.js"
export type { SendError, SendOptions } from "./agent/turn.js"
export { INTERRUPTED_TOOL_RESULT, repairs } from "./agent/repairs.js"
export { newSessionId, SessionPointer } from "./agent/SessionPointer.js"
export * as Shell from "./agent/Shell.js"
export { agentToolkit, runToolCall, TOOL_NAMES, type ToolCall, type ToolOutcome } from "./agent/tools.js"
export { promptFromSession } from "./agent/prompt.js"
export {
  COMPACTION_STAGES,
  type CompactError,
  type CompactionEvent,
  type CompactionPhase,
  type CompactionResult,
  type CompactionStage,
  CompactOptions,
  DEFAULT_KEEP_RECENT_TOKENS
} from "./agent/compaction.js"
export * as CompactionPlan from "./agent/compactionPlan.js"
export { estimateTokens, measurePrompt, promptCharacters, TokenCounter, type TokenCounterService, type TokenFigure, type TokenMethod } from "./agent/tokens.js"
