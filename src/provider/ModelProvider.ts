/**
 * What the agent needs from a model source: a way to build the `@effect/ai` `LanguageModel`
 * layer for a model name. The agent runtime only ever talks to `LanguageModel`, so a real
 * provider and the offline scripted model go through exactly the same code path.
 */
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type { Layer } from "effect"
import type { ConfigurationError } from "../core/errors.js"

/** A model source the agent can use: builds the @effect/ai LanguageModel layer for a model name. */
export interface ModelProvider {
  /** `"anthropic"` or `"scripted"`; recorded with the session so a resume can say what ran it. */
  readonly name: string
  /** The model used when the caller names none. */
  readonly defaultModelName: string
  /**
   * The model's context window in tokens, when known: `createLiteAgent` then compacts
   * automatically before a model call would pass 80% of it (unless `autoCompact` says otherwise).
   */
  readonly contextTokens?: number
  /**
   * The `LanguageModel` layer for `modelName` (default `defaultModelName`). Options are
   * checked when the layer is built, so a misconfiguration is a typed `ConfigurationError`
   * from the program that uses it rather than an exception at import time.
   */
  readonly layer: (modelName?: string) => Layer.Layer<LanguageModel.LanguageModel, ConfigurationError>
}
