/**
 * `@lite-agent/sdk` — the promise facade for plain TypeScript callers.
 */
import * as MemoryCheckpointer from "./backends/memory.js"
import { type PromiseCheckpointer, toPromiseCheckpointer } from "./facade/checkpointer.js"

export * from "./core/errors.js"
export * from "./core/events.js"
export type { SessionEventInput } from "./core/encoding.js"
export type { ReadOptions, SessionInfo } from "./core/Checkpointer.js"
export type { PromiseCheckpointer } from "./facade/checkpointer.js"

/** A process-local checkpointer that keeps everything in memory (tests, ephemeral agents). */
export const memoryCheckpointer = (): PromiseCheckpointer => toPromiseCheckpointer(MemoryCheckpointer.layer)
