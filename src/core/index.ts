/**
 * `@lite-agent/sdk/core` — the Effect API: events, the pure fold, the `Checkpointer`
 * contract and its errors, the memory backend and the conformance suite.
 */
export * from "./errors.js"
export * from "./events.js"
export * from "./encoding.js"
export * from "./sessionId.js"
export * from "./userCheckpoint.js"
export { AppendOnly } from "./appendOnly.js"
export * as Session from "./session.js"
export type {
  Checkpoint,
  CheckpointAnchor,
  Conversation,
  ConversationEntry,
  FileHistoryEntry,
  PendingToolCall,
  SessionState
} from "./session.js"
export {
  Checkpointer,
  type CheckpointerDriver,
  type CheckpointerService,
  type LockedSession,
  make as makeCheckpointer,
  type ReadOptions,
  type SessionInfo
} from "./Checkpointer.js"
export * as MemoryCheckpointer from "../backends/memory.js"
export * from "../backends/file/index.js"
export { CheckpointerIntegrity, type IntegrityReport } from "./integrity.js"
export * from "./restore.js"
export * as Workspace from "../tools/Workspace.js"
export type { PathState, WorkspaceService } from "../tools/Workspace.js"
export * as FileTools from "../tools/FileTools.js"
export type { FileChangeResult, FileToolError, FileToolsService, ToolCallContext } from "../tools/FileTools.js"
export * as TimeTravel from "../tools/TimeTravel.js"
export type {
  PlannedFile,
  RestoreError,
  RestoreOptions,
  RestoreProgress,
  RestoreResult,
  TimeTravelService
} from "../tools/TimeTravel.js"
export {
  checkpointerConformance,
  type ConformanceOptions,
  type ConformanceRunner,
  sampleEvents
} from "./conformance.js"
export * as LiteAgent from "../agent/LiteAgent.js"
export type {
  AgentEvent,
  BackgroundTaskInfo,
  LiteAgentResult,
  LiteAgentService,
  SendError,
  SendOptions,
  ToolCallRecord
} from "../agent/LiteAgent.js"
export { newSessionId, SessionPointer } from "../agent/SessionPointer.js"
export * as Shell from "../agent/Shell.js"
export { agentToolkit, runToolCall, TOOL_NAMES, type ToolCall, type ToolOutcome } from "../agent/tools.js"
export { promptFromSession } from "../agent/prompt.js"
