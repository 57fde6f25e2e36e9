/**
 * What the routes of the session server take in their paths, queries and headers (api.ts): each
 * as the server reads it, and as its OpenAPI document describes it to clients.
 */
import { Schema } from "effect"

export const SessionPath = Schema.Struct({ id: Schema.String })
/**
 * A seq in a path or a query: read as text and checked by the handler (anything but an integer
 * in range is a 400 `InvalidSeqError` naming it), described to clients as the integer it must be.
 */
const SeqText = (minimum: number, description: string) =>
  Schema.String.annotations({ jsonSchema: { type: "integer", minimum, description }, description })

export const CheckpointPath = Schema.Struct({ id: Schema.String, seq: SeqText(1, "A checkpoint's seq (a prompt of the session, from its tree or checkpoints)") })

/** `?at=<seq>`: the conversation on a branch through that node (a checkpoint or a branch's tip), up to the end of its turn. */
export const ConversationParams = Schema.Struct({
  at: Schema.optional(SeqText(1, "A node of the session: a checkpoint or a branch's tip (default: the current leaf)"))
})

/** Where a follower of `/events` resumes: its last seq (or `Last-Event-ID`), and the generation it was read in. */
export const EventsParams = Schema.Struct({
  sinceSeq: Schema.optional(SeqText(0, "Resume after this seq (as Last-Event-ID does); default 0, the whole log")),
  generation: Schema.optional(Schema.String.annotations({ description: "The generation the events up to sinceSeq were read in: a log cut since is then a reset, not a gap" }))
})
export const EventsHeaders = Schema.Struct({
  "last-event-id": Schema.optional(SeqText(0, "The last event's id the client saw (its seq): resume after it"))
})

export const PermissionPath = Schema.Struct({ id: Schema.String, requestId: Schema.String })
