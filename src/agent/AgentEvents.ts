/**
 * What the agent reports while it works, and the channel that delivers it: a PubSub for Effect
 * streams plus synchronous listeners for the promise facade (whose `subscribe` must see an
 * event before the `send` that caused it resolves).
 */
import { Effect, PubSub, Stream } from "effect"
import type { CaptureCause, JsonValue, PermissionMode, SessionEvent, TokenUsage } from "../core/events.js"
import type { RestoreProgress } from "../tools/TimeTravel.js"
import type { CompactionEvent } from "./compaction.js"

export interface ToolCallRecord {
  readonly id: string
  readonly name: string
  readonly input: JsonValue
  readonly output: string
  readonly isError: boolean
}

export interface LiteAgentResult {
  readonly sessionId: string
  /** The text of the model's last message. */
  readonly text: string
  /** Every tool call of the turn, in order, with its result. */
  readonly toolCalls: ReadonlyArray<ToolCallRecord>
  /** Tokens of every model call of the turn, as the provider reported them. */
  readonly usage: TokenUsage
  /** The session's head after the turn. */
  readonly head: number
  /** Model calls made. */
  readonly steps: number
  /** The model's finish reason for its last message ("stop", "length", …), or "step_limit". */
  readonly stopReason: string
  /**
   * What the turn's workspace captures could not see: paths they could not read (recorded
   * `unavailable`, left alone by a restore and reported) or, at path ".", a capture that failed
   * as a whole (a restore refuses with `capture_failed` until the next capture). Empty when
   * every capture saw everything.
   */
  readonly captureProblems: ReadonlyArray<CaptureProblem>
}

/** A path a workspace capture could not read ("." for the whole workdir) or store (past the store's quota), and whose capture it was. */
export interface CaptureProblem {
  readonly cause: CaptureCause
  readonly path: string
  readonly detail: string
}

/** What `subscribe` and `query` deliver. */
export type AgentEvent =
  | {
    /** An event persisted in a session's log (user, assistant, tool, file and background records). */
    readonly type: "session_event"
    readonly sessionId: string
    readonly seq: number
    readonly ts: number
    readonly event: SessionEvent
  }
  | { readonly type: "tool_start"; readonly sessionId: string; readonly toolUseId: string; readonly name: string; readonly input: JsonValue }
  | {
    readonly type: "tool_end"
    readonly sessionId: string
    readonly toolUseId: string
    readonly name: string
    readonly isError: boolean
    readonly output: string
  }
  | {
    /**
     * A piece of the model's text as it streams. Not stored: the log gets the whole message when
     * the model call ends (a call that fails part-way leaves the log as if it was never made).
     */
    readonly type: "text_delta"
    readonly sessionId: string
    readonly delta: string
  }
  | {
    /** A tool call waits for `canUseTool`'s answer (the decision follows as a `PermissionDecided` session event). */
    readonly type: "permission_request"
    /** What answers it (the server's `POST /sessions/:id/permissions/:requestId`): the tool call's id. */
    readonly requestId: string
    readonly sessionId: string
    readonly toolUseId: string
    readonly name: string
    readonly input: JsonValue
    /** The permission mode in force. */
    readonly mode: PermissionMode
    /** For a file tool that writes: the unified diff it would make, as lines (a UI shows it, as the terminal does). */
    readonly diff?: ReadonlyArray<string> | undefined
  }
  | { readonly type: "background_started"; readonly sessionId: string; readonly taskId: string; readonly command: string }
  | RestoreProgress
  | CompactionEvent
  | { readonly type: "result"; readonly result: LiteAgentResult }

/** Where a part of the agent sends what it reports. */
export type Emit = (event: AgentEvent) => Effect.Effect<void>

export interface AgentEventHub {
  readonly publish: Emit
  /** Every event from now on, as a stream. */
  readonly events: Stream.Stream<AgentEvent>
  /** Call `listener` synchronously for every event from now on; returns the unsubscribe function. */
  readonly addListener: (listener: (event: AgentEvent) => void) => Effect.Effect<() => void>
}

export const makeAgentEventHub: Effect.Effect<AgentEventHub> = Effect.gen(function*() {
  const hub = yield* PubSub.unbounded<AgentEvent>()
  const listeners = new Set<(event: AgentEvent) => void>()
  return {
    publish: (event) =>
      Effect.zipRight(
        Effect.sync(() => {
          for (const listener of listeners) {
            try {
              listener(event)
            } catch {
              // A listener's own failure must not break the run that published.
            }
          }
        }),
        PubSub.publish(hub, event)
      ),
    events: Stream.fromPubSub(hub),
    addListener: (listener) =>
      Effect.sync(() => {
        listeners.add(listener)
        return () => {
          listeners.delete(listener)
        }
      })
  }
})
