/**
 * The session server's routes about the store as a whole (part of SessionApi, api.ts): what the
 * store holds (`GET /store/usage`, the checkpointer's `du()`) and one session's share of it
 * (`GET /sessions/:id/usage`). Both read every log of the store: a session's shared and own bytes
 * depend on what every other session references. Implemented in storeHandlers.ts.
 */
import * as HttpApiEndpoint from "@effect/platform/HttpApiEndpoint"
import * as HttpApiGroup from "@effect/platform/HttpApiGroup"
import * as OpenApi from "@effect/platform/OpenApi"
import { Schema } from "effect"
import { Wire } from "./wireErrors.js"

/** A number of objects and the bytes they take as stored. */
const ObjectBytesJson = Schema.Struct({ objects: Schema.Number, bytes: Schema.Number })

/** One live branch of a session: the path from the root to its tip. */
const BranchUsageJson = Schema.Struct({
  tip: Schema.Number,
  current: Schema.Boolean,
  label: Schema.optional(Schema.String),
  /** The objects its nodes reference. */
  referenced: ObjectBytesJson,
  /** Of those, the ones nothing else in the store references: what pruning it frees. */
  own: ObjectBytesJson
})

/** What one session holds in the store. */
export const SessionUsageJson = Schema.Struct({
  id: Schema.String,
  /** Bytes its log takes as stored. */
  logBytes: Schema.Number,
  /** The objects its own events reference (a fork's shared events count for its source). */
  referenced: ObjectBytesJson,
  /** Of those, the ones other sessions reference too. */
  shared: ObjectBytesJson,
  /** Of those, the ones no other session references: what deleting it frees (with its log), at the next gc past the grace period. */
  own: ObjectBytesJson,
  /** Its live branches, when asked for (`?branches=true`; always for one session's usage). */
  branches: Schema.optional(Schema.Array(BranchUsageJson))
})

/** `?branches=true`: each session's usage broken down by its live branches. */
export const StoreUsageParams = Schema.Struct({ branches: Schema.optional(Schema.Literal("true", "false")) })

/** What the store holds: every session's share, and what no session references. */
export const StoreUsageJson = Schema.Struct({
  /** Most bytes of their own (own objects and log) first. */
  sessions: Schema.Array(SessionUsageJson),
  /** Bytes every log takes. */
  logBytes: Schema.Number,
  /** Every stored object. */
  objects: ObjectBytesJson,
  /** The objects some session references. */
  referenced: ObjectBytesJson,
  /** The objects no session references: what gc deletes once they are past the grace period. */
  unreferenced: ObjectBytesJson,
  /** The store's quota (`--max-store-bytes`), when the server has one: past it captures store no new content. */
  quota: Schema.optional(Schema.Struct({ maxStoreBytes: Schema.Number, storeBytes: Schema.Number, reached: Schema.Boolean }))
})

/** The store's usage, and a session's share of it: served with or without an agent. */
export class StoreGroup extends HttpApiGroup.make("store")
  .add(
    HttpApiEndpoint.get("usage", "/store/usage").setUrlParams(StoreUsageParams).addSuccess(StoreUsageJson)
      .annotate(
        OpenApi.Description,
        "What the store holds: its objects (referenced by some session, or by none: what gc deletes past the grace period), " +
          "its logs, and each session's share — the objects it references, those it shares with other sessions, its own; with " +
          "`branches=true`, each session's live branches too. Reads every log."
      )
  )
  .add(
    HttpApiEndpoint.get("sessionUsage", "/sessions/:id/usage").setPath(Schema.Struct({ id: Schema.String })).addSuccess(SessionUsageJson)
      .addError(Wire.SessionNotFound, { status: 404 })
      .annotate(
        OpenApi.Description,
        "The session's share of the store: its log, the objects it references, those other sessions reference too, those only it " +
          "holds (what deleting it frees), and its live branches with what each references and holds alone (what pruning it frees). " +
          "Reads every log of the store."
      )
  )
{}
