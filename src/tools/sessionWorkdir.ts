/**
 * A session's files live in one workdir, the one its log names (`SessionMetadata.workdir`,
 * written by its first turn and by a fork). What changes files for the session — a turn, a
 * restore, a move, a fork in place — runs there only: elsewhere the disk is not what the session
 * knows, so a restore would write its files into another tree and a capture would take every
 * difference for the user's edit. Re-homing is explicit: it records the new workdir as an event.
 */
import * as fs from "node:fs"
import { Effect } from "effect"
import type { CheckpointerService } from "../core/Checkpointer.js"
import type { CheckpointerError } from "../core/errors.js"
import { EVENT_FORMAT_VERSION, SessionMetadata } from "../core/events.js"
import type * as Session from "../core/session.js"
import { SessionWorkdirError } from "./errors.js"
import type { SessionStatesService } from "./SessionStates.js"

/**
 * The workdir the session's log names when it is not `workdir` (a real path, as a workspace's
 * root); a session that names none runs anywhere. A name that reaches `workdir` through a link
 * (a log written before fork directories were recorded as real paths) is the same directory.
 */
export const otherWorkdir = (state: Session.SessionState, workdir: string): string | undefined => {
  const recorded = state.metadata.workdir
  if (recorded === undefined || recorded === workdir) return undefined
  try {
    return fs.realpathSync(recorded) === workdir ? undefined : recorded
  } catch {
    return recorded
  }
}

/** The event that makes `workdir` the session's. */
export const rehomed = (workdir: string) => new SessionMetadata({ formatVersion: EVENT_FORMAT_VERSION, workdir })

export interface HomeCheck {
  readonly sessionId: string
  readonly state: Session.SessionState
  /** This agent's workdir (a real path, as the workspace's root). */
  readonly workdir: string
  readonly operation: string
  /** Make `workdir` the session's when it is not. */
  readonly rehome: boolean
  /** A dry run records nothing: it plans as if re-homed. */
  readonly dryRun: boolean
}

/** What changing files in `workdir` takes: nothing (its home), logging `workdir` first (re-homing), or the refusal. */
export const homeFor = (check: Omit<HomeCheck, "dryRun">): "home" | "rehome" | SessionWorkdirError => {
  const elsewhere = otherWorkdir(check.state, check.workdir)
  if (elsewhere === undefined) return "home"
  return check.rehome
    ? "rehome"
    : new SessionWorkdirError({ sessionId: check.sessionId, operation: check.operation, sessionWorkdir: elsewhere, workdir: check.workdir })
}

/**
 * The session's state once it may change files in `workdir`: refused with `SessionWorkdirError`
 * when its log names another, unless re-homing — then the new workdir is logged (at the state's
 * head, so a concurrent writer makes it a conflict) and the state read again.
 */
export const homedState = (
  checkpointer: CheckpointerService,
  states: SessionStatesService,
  check: HomeCheck
): Effect.Effect<Session.SessionState, SessionWorkdirError | CheckpointerError> => {
  const home = homeFor(check)
  if (home instanceof SessionWorkdirError) return Effect.fail(home)
  if (home === "home" || check.dryRun) return Effect.succeed(check.state)
  return checkpointer.append(check.sessionId, [rehomed(check.workdir)], check.state.head).pipe(
    Effect.zipRight(states.get(check.sessionId)),
    Effect.map((folded) => folded.state)
  )
}
