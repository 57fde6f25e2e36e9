/**
 * `@lite-agent/sdk/provider` — model sources for the agent: Anthropic, and the scripted
 * offline model for tests, examples and demos. Both produce an `@effect/ai` `LanguageModel`.
 */
export type { ModelProvider } from "./provider/ModelProvider.js"
export {
  anthropic,
  anthropicLayer,
  type AnthropicOptions,
  DEFAULT_ANTHROPIC_MAX_RETRIES,
  DEFAULT_ANTHROPIC_MAX_TOKENS,
  DEFAULT_ANTHROPIC_MODEL
} from "./provider/anthropic.js"
export { estimateTokens, promptCharacters, TokenCounter, type TokenCounterService } from "./agent/tokens.js"
export {
  SCRIPTED_MODEL_NAME,
  scripted,
  type ScriptedCall,
  scriptedLayer,
  type ScriptedProvider,
  type ScriptedToolCall,
  type ScriptedTurn
} from "./provider/scripted.js"
