/** The session itself: compactions, background tasks that ended, facts about the session. */
import { Schema } from "effect"
import {
  isCount,
  isFields,
  isIntOrNull,
  isNonEmptyString,
  isPositiveInt,
  isString,
  isStringRecord,
  optional
} from "../internal/eventChecks.js"
import { EventClass } from "../internal/eventKind.js"
import { Count, PositiveInt } from "./parts.js"

/**
 * The conversation before this record was summarised. The model then sees the summary
 * followed by the messages from `keptFromSeq` on (default: the ones after this record).
 */
export class Compaction extends EventClass<Compaction>()("Compaction", {
  summary: Schema.String,
  keptFromSeq: Schema.optionalWith(PositiveInt, { exact: true }),
  tokensBefore: Count,
  tokensAfter: Count,
  instructions: Schema.optionalWith(Schema.String, { exact: true })
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { instructions, keptFromSeq, summary, tokensAfter, tokensBefore } = json
    if (!isString(summary) || !isCount(tokensBefore) || !isCount(tokensAfter)) return undefined
    if (!optional(keptFromSeq, isPositiveInt) || !optional(instructions, isString)) return undefined
    return {
      summary,
      ...(keptFromSeq === undefined ? {} : { keptFromSeq }),
      tokensBefore,
      tokensAfter,
      ...(instructions === undefined ? {} : { instructions })
    }
  }
}) {}

/** A background task ended. The model hears about it on its next turn; not a checkpoint. */
export class BackgroundCompleted extends EventClass<BackgroundCompleted>()("BackgroundCompleted", {
  taskId: Schema.NonEmptyString,
  command: Schema.String,
  exitCode: Schema.NullOr(Schema.Int),
  signal: Schema.optionalWith(Schema.String, { exact: true }),
  output: Schema.String,
  outputTruncated: Schema.Boolean
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { command, exitCode, output, outputTruncated, signal, taskId } = json
    if (!isNonEmptyString(taskId) || !isString(command) || !isString(output) || typeof outputTruncated !== "boolean") return undefined
    if (!isIntOrNull(exitCode) || !optional(signal, isString)) return undefined
    return { taskId, command, exitCode, ...(signal === undefined ? {} : { signal }), output, outputTruncated }
  }
}) {}

/** Facts about the session itself. Later values for a key replace earlier ones. */
export class SessionMetadata extends EventClass<SessionMetadata>()("SessionMetadata", {
  formatVersion: PositiveInt,
  title: Schema.optionalWith(Schema.String, { exact: true }),
  workdir: Schema.optionalWith(Schema.String, { exact: true }),
  model: Schema.optionalWith(Schema.String, { exact: true }),
  labels: Schema.optionalWith(Schema.Record({ key: Schema.String, value: Schema.String }), { exact: true })
}, {
  check: (json) => {
    if (!isFields(json)) return undefined
    const { formatVersion, labels, model, title, workdir } = json
    if (!isPositiveInt(formatVersion) || !optional(title, isString) || !optional(workdir, isString)) return undefined
    if (!optional(model, isString) || !optional(labels, isStringRecord)) return undefined
    return {
      formatVersion,
      ...(title === undefined ? {} : { title }),
      ...(workdir === undefined ? {} : { workdir }),
      ...(model === undefined ? {} : { model }),
      ...(labels === undefined ? {} : { labels: { ...labels } })
    }
  }
}) {}
