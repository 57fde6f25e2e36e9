import { Context, type Effect } from "effect"
import type { CheckpointerError } from "./errors.js"

export interface IntegrityReport {
  /** `false` when stored data is damaged. */
  readonly ok: boolean
  /** What was checked and what was found, one finding per line. */
  readonly detail: string
}

/** Backends that can verify their storage provide this beside the `Checkpointer`. */
export class CheckpointerIntegrity extends Context.Tag("@lite-agent/core/CheckpointerIntegrity")<
  CheckpointerIntegrity,
  { readonly checkIntegrity: Effect.Effect<IntegrityReport, CheckpointerError> }
>() {}
