/**
 * Which session `send` uses when no id is given. Synchronous on purpose: the promise facade
 * reads `agent.sessionId` and calls `agent.resume(id)` without awaiting, so the pointer must be
 * a plain value that the Effect service and the facade share, with one set of rules.
 */
import { randomUUID } from "node:crypto"
import { Either } from "effect"
import { InvalidSessionIdError } from "../core/errors.js"
import { SessionsDisabledError } from "./errors.js"
import { sessionIdProblem } from "../core/sessionId.js"

/** A fresh session id: a UUID, safe as a file name for every backend. */
export const newSessionId = (): string => randomUUID()

export class SessionPointer {
  #current: string

  constructor(
    /** `false` when the agent runs with `sessions: false`: the session methods refuse. */
    readonly sessionsEnabled: boolean,
    initial: string = newSessionId()
  ) {
    const problem = sessionIdProblem(initial)
    if (problem !== undefined) throw new InvalidSessionIdError({ sessionId: String(initial), reason: problem })
    this.#current = initial
  }

  get current(): string {
    return this.#current
  }

  /** Refuse `operation` when sessions are off. */
  requireSessions(operation: string): Either.Either<void, SessionsDisabledError> {
    return this.sessionsEnabled ? Either.void : Either.left(new SessionsDisabledError({ operation }))
  }

  /** Switch to `sessionId` (an unknown id is an empty session). */
  resume(sessionId: string): Either.Either<void, SessionsDisabledError | InvalidSessionIdError> {
    return Either.flatMap(this.requireSessions("resume"), () => {
      const problem = sessionIdProblem(sessionId)
      if (problem !== undefined) return Either.left(new InvalidSessionIdError({ sessionId: String(sessionId), reason: problem }))
      this.#current = sessionId
      return Either.void
    })
  }

  /** Rotate to a new empty session; the old one stays stored. */
  clear(): Either.Either<string, SessionsDisabledError> {
    return Either.map(this.requireSessions("clear"), () => {
      this.#current = newSessionId()
      return this.#current
    })
  }
}
