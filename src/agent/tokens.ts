/**
 * How many tokens a prompt takes: counted by the provider when it can (a `TokenCounter` in the
 * context), estimated otherwise — and every figure says which. The estimate is the usual
 * 4 characters per token over the prompt's text and tool parts.
 */
import type * as AiError from "@effect/ai/AiError"
import type * as Prompt from "@effect/ai/Prompt"
import { Context, Effect, Option } from "effect"

export interface TokenCounterService {
  /** The tokens `prompt` takes as the provider counts them. */
  readonly count: (prompt: Prompt.Prompt) => Effect.Effect<number, AiError.AiError>
}

/** A provider's token counting, when it has one (provide it beside the `LanguageModel`). */
export class TokenCounter extends Context.Tag("@lite-agent/agent/TokenCounter")<TokenCounter, TokenCounterService>() {}

export type TokenMethod = "measured" | "estimated"

export interface TokenFigure {
  readonly tokens: number
  readonly method: TokenMethod
}

/** JSON text of a value, for counting characters (undefined counts as nothing). */
export const jsonLength = (value: unknown): number => JSON.stringify(value)?.length ?? 0

/** Counts by message, remembered: the agent hands the same message objects to every call of a session. */
const counted = new WeakMap<Prompt.Message, number>()

const messageCharacters = (message: Prompt.Message): number => {
  const remembered = counted.get(message)
  if (remembered !== undefined) return remembered
  let total = 0
  if (message.role === "system") total = message.content.length
  else {
    for (const part of message.content) {
      switch (part.type) {
        case "text":
        case "reasoning":
          total += part.text.length
          break
        case "tool-call":
          total += jsonLength(part.params)
          break
        case "tool-result":
          total += jsonLength(part.result)
          break
        case "file":
          break
      }
    }
  }
  counted.set(message, total)
  return total
}

/**
 * Characters of the prompt's text and tool parts: message text, reasoning text, tool-call
 * parameters and tool results as JSON. Files are not counted.
 */
export const promptCharacters = (prompt: Prompt.Prompt): number => {
  let total = 0
  for (const message of prompt.content) total += messageCharacters(message)
  return total
}

/** The 4-characters-per-token estimate. */
export const estimateTokens = (characters: number): number => Math.ceil(characters / 4)

/** The prompt's tokens: the provider's count when there is a counter and it answers, the estimate otherwise. */
export const measurePrompt = (prompt: Prompt.Prompt): Effect.Effect<TokenFigure> =>
  Effect.flatMap(Effect.serviceOption(TokenCounter), (counter) => {
    const estimated: TokenFigure = { tokens: estimateTokens(promptCharacters(prompt)), method: "estimated" }
    return Option.match(counter, {
      onNone: () => Effect.succeed(estimated),
      // A counter that fails (network, rate limit) must not fail the work that asked: estimate instead.
      onSome: (service) =>
        service.count(prompt).pipe(
          Effect.map((tokens): TokenFigure => ({ tokens, method: "measured" })),
          Effect.orElseSucceed(() => estimated)
        )
    })
  })
