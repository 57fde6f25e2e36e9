/**
 * What time travel takes and gives: the options of a restore and of an undo or redo, the result
 * (every file considered, its action and any refusal), and the progress it publishes.
 */
import { Schema } from "effect"
import type { CheckpointerError, ConfigurationError, Refusal } from "../core/errors.js"
import type { RestoreFailedError, RestoreRefusedError, SessionWorkdirError, WorkspaceIOError } from "./errors.js"
import { AbortSignalOption, Flag } from "../core/internal/options.js"
import type { CommandAfterCheckpoint, FilesPlan } from "../core/restore.js"
import type { NotCovered } from "../core/session.js"

export type RestoreError =
  | RestoreRefusedError
  | RestoreFailedError
  | CheckpointerError
  | WorkspaceIOError
  | ConfigurationError
  | SessionWorkdirError

export const RestoreOptions = Schema.Struct({
  /** Put back the files the agent changed after the checkpoint. Default true. */
  files: Schema.optional(Flag),
  /** Cut the conversation back to just before the checkpoint. Default true. */
  conversation: Schema.optional(Flag),
  /** Only plan: return every file, its action and any refusal; change nothing. Default false. */
  dryRun: Schema.optional(Flag),
  /**
   * Undo the user's own edits made between turns too (changes a capture saw before a prompt,
   * made by nobody in the session). Default false: such a file is refused as `modified_externally`.
   */
  includeUserEdits: Schema.optional(Flag),
  /**
   * The session's log names another workdir: make this agent's workdir the session's (recorded as
   * an event) rather than refuse with \`SessionWorkdirError\`. What differs here from what the
   * session knows is then refused (or, at the next turn, taken for the user's edits). Default false.
   */
  rehome: Schema.optional(Flag),
  /** Abort part-way: every file already changed is put back. */
  signal: Schema.optional(AbortSignalOption)
})
export interface RestoreOptions extends Schema.Schema.Type<typeof RestoreOptions> {}

export const MoveOptions = Schema.Struct({
  /** Only plan: return every file, its action and any refusal; change nothing. Default false. */
  dryRun: Schema.optional(Flag),
  /** Overwrite the user's own edits made between turns since (seen by a capture before a prompt) too. Default false. */
  includeUserEdits: Schema.optional(Flag),
  /**
   * The session's log names another workdir: make this agent's workdir the session's (recorded as
   * an event) rather than refuse with \`SessionWorkdirError\`. What differs here from what the
   * session knows is then refused (or, at the next turn, taken for the user's edits). Default false.
   */
  rehome: Schema.optional(Flag),
  /** Abort part-way: every file already changed is put back. */
  signal: Schema.optional(AbortSignalOption)
})
export interface MoveOptions extends Schema.Schema.Type<typeof MoveOptions> {}

export const ForkOptions = Schema.Struct({
  /**
   * The new session's id. Default: a new random id. Given, a fork cut short (a crash) is finished
   * by the same call again.
   */
  id: Schema.optional(Schema.String),
  /**
   * Put the fork's files in this directory (one that does not exist yet, or is empty) rather than
   * in the session's workdir, for running two branches side by side; the session's workdir is
   * then left as it is. Default: the session's workdir, whose files move to the fork's point
   * (as a restore moves them).
   */
  workdir: Schema.optional(Schema.String),
  /** Only plan: create nothing and change nothing; the result says what the fork would do. Default false. */
  dryRun: Schema.optional(Flag),
  /** In the session's workdir: overwrite the user's own edits made between turns too. Default false. */
  includeUserEdits: Schema.optional(Flag),
  /**
   * In this workdir, of a session whose log names another: fork it here anyway (the fork's log
   * names this workdir) rather than refuse with \`SessionWorkdirError\`. Default false.
   */
  rehome: Schema.optional(Flag),
  /** Abort part-way: every file already changed is put back. */
  signal: Schema.optional(AbortSignalOption)
})
export interface ForkOptions extends Schema.Schema.Type<typeof ForkOptions> {}

export interface PlannedFile {
  readonly path: string
  readonly action: "write" | "link" | "directory" | "delete" | "none"
  readonly refusal?: Refusal
  /** True when the agent recorded no hash for this path, so outside edits cannot be detected. */
  readonly unverified: boolean
  /** True when the disk already holds what the restore puts there (a retried restore): nothing to do for it. */
  readonly alreadyRestored: boolean
}

export interface RestoreResult {
  /** Paths put back (for a dry run: none). */
  readonly restoredFiles: ReadonlyArray<string>
  readonly conversationRestored: boolean
  /** Paths restored without an outside-edit check (written before change hashes were recorded). */
  readonly unverifiedFiles: ReadonlyArray<string>
  /** Shell commands run after the checkpoint in turns the workspace capture did not cover: their effects are not undone. */
  readonly commandsNotUndone: ReadonlyArray<CommandAfterCheckpoint>
  /**
   * Paths changed after the checkpoint that the restore leaves as they are, with why: not covered
   * by the workspace capture (ignored, over a cap, first captured later), or a directory that
   * still holds something uncovered.
   */
  readonly notCovered: ReadonlyArray<NotCovered>
  readonly dryRun: boolean
  /** Every file considered, with its action and any refusal. */
  readonly plan: ReadonlyArray<PlannedFile>
  /** Every reason to refuse (a dry run reports them instead of failing). */
  readonly refusals: ReadonlyArray<Refusal>
  /** True when this finished (or undid) a restore that had been cut short. */
  readonly resumed: boolean
}

/** What a fork made: the new session, where it came from and where its files are, and what it did to them. */
export interface ForkResult extends RestoreResult {
  /** The new session (for a dry run: the id it would have). */
  readonly sessionId: string
  /** The session forked, and how many of its events the fork shares. */
  readonly forkedFrom: { readonly session: string; readonly at: number }
  /** The fork's leaf: the node its next events continue. */
  readonly leaf: number
  /** The directory that holds the fork's files. */
  readonly workdir: string
}

/** A result that changed nothing (the base of the results that change only some of it). */
export const nothingRestored: RestoreResult = {
  restoredFiles: [],
  conversationRestored: false,
  unverifiedFiles: [],
  commandsNotUndone: [],
  notCovered: [],
  dryRun: false,
  plan: [],
  refusals: [],
  resumed: false
}

export type RestoreProgress =
  | {
    readonly type: "checkpoint_restore"
    readonly phase: "start"
    readonly sessionId: string
    readonly seq: number
    readonly total: number
    /**
     * `restore`: a new restore; `move`: an undo or a redo (`seq` is the leaf it moves to);
     * `finish`: finishing one cut short; `undo`: putting one cut short back.
     */
    readonly mode: "restore" | "move" | "finish" | "undo"
  }
  | {
    readonly type: "checkpoint_restore"
    readonly phase: "progress"
    readonly sessionId: string
    readonly seq: number
    readonly completed: number
    readonly total: number
    readonly path: string
  }
  | { readonly type: "checkpoint_restore"; readonly phase: "done"; readonly sessionId: string; readonly seq: number; readonly result: RestoreResult }
  | { readonly type: "checkpoint_restore"; readonly phase: "error"; readonly sessionId: string; readonly seq: number; readonly error: unknown }

/** Every file a restore considered, with its action and any refusal, by path. */
export const plannedFiles = (
  plan: FilesPlan,
  refusals: ReadonlyArray<Refusal>,
  alreadyRestored: ReadonlySet<string>
): Array<PlannedFile> =>
  [
    ...plan.files.map((file) => {
      const refusal = refusals.find((candidate) => candidate.path === file.path)
      return {
        path: file.path,
        action: file.action.kind,
        ...(refusal === undefined ? {} : { refusal }),
        unverified: file.expected === undefined,
        alreadyRestored: alreadyRestored.has(file.path)
      }
    }),
    ...plan.refusals.flatMap((refusal) =>
      refusal.path === undefined ? [] : [{ path: refusal.path, action: "none" as const, refusal, unverified: false, alreadyRestored: false }]
    )
  ].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))

