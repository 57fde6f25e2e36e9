/**
 * The store's routes as StoreGroup declares them (storeApi.ts): the checkpointer's `du()`, whole
 * or one session's row of it. An existing session that references nothing and has no row (an
 * empty log) is all zeros.
 */
import * as HttpApiBuilder from "@effect/platform/HttpApiBuilder"
import { Effect } from "effect"
import { Checkpointer } from "../core/Checkpointer.js"
import { SessionApi } from "./api.js"
import { checkedSessionId, existing } from "./handlers.js"

const NONE = { objects: 0, bytes: 0 }

export const storeHandlers = HttpApiBuilder.group(SessionApi, "store", (handlers) =>
  Effect.gen(function*() {
    const checkpointer = yield* Checkpointer
    return handlers
      .handle("usage", ({ urlParams }) => checkpointer.du({ branches: urlParams.branches === "true" }))
      .handle("sessionUsage", ({ path }) =>
        Effect.gen(function*() {
          const sessionId = yield* checkedSessionId(path.id)
          yield* existing(checkpointer, sessionId)
          const { sessions } = yield* checkpointer.du({ branches: true })
          return sessions.find((session) => session.id === sessionId) ??
            { id: sessionId, logBytes: 0, referenced: NONE, shared: NONE, own: NONE, branches: [] }
        }))
  }))
