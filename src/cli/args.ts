/**
 * The command line read against the option table (help.ts): `--flag value`, `--flag=value`,
 * switches, choices and integers, each given at most once, nothing else. Pure: what was wrong
 * comes back as a message, which the command prints before it exits with code 2.
 */
import { Either } from "effect"
import { type OptionKey, OPTIONS, type OptionSpec, type Takes } from "./help.js"

type ValueOf<T extends Takes> = T extends "switch" ? boolean
  : T extends "integer" ? number | undefined
  // Given without its text: "".
  : T extends "optional-text" ? string | undefined
  : T extends ReadonlyArray<infer Choice> ? Choice | undefined
  : string | undefined

/** The values given for `keys`: undefined (false for a switch) when not given. */
export type ParsedOptions<K extends OptionKey> = { readonly [Key in K]: ValueOf<(typeof OPTIONS)[Key]["takes"]> }

const INTEGER = /^-?\d+$/

/** A flag's value as its option takes it, or what is wrong with it. */
const valueFor = (flag: string, spec: OptionSpec, text: string): Either.Either<string | number, string> => {
  if (spec.takes === "integer") {
    return INTEGER.test(text) && Number.isSafeInteger(Number(text))
      ? Either.right(Number(text))
      : Either.left(`${flag} takes an integer, got ${JSON.stringify(text)}`)
  }
  if (typeof spec.takes !== "string" && !spec.takes.includes(text)) {
    return Either.left(`${flag} takes one of ${spec.takes.join(", ")}, got ${JSON.stringify(text)}`)
  }
  return Either.right(text)
}

/** Read `args` as the options `keys` (of one command); `command` names it in messages. */
export const parseOptions = <const K extends OptionKey>(
  command: string,
  keys: ReadonlyArray<K>,
  args: ReadonlyArray<string>
): Either.Either<ParsedOptions<K>, string> => {
  const byFlag = new Map<string, K>(keys.flatMap((key) => OPTIONS[key].flags.map((flag) => [flag, key] as const)))
  const values: Partial<Record<K, string | number | boolean>> = {}
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!
    const equals = arg.startsWith("--") ? arg.indexOf("=") : -1
    const flag = equals === -1 ? arg : arg.slice(0, equals)
    const key = byFlag.get(flag)
    if (key === undefined) {
      return Either.left(
        flag.startsWith("-") && flag !== "-"
          ? `${command} has no option ${flag} (${command} --help lists them)`
          : `${command} takes no argument ${JSON.stringify(arg)}: options only${keys.some((key) => key === "print") ? " (a prompt goes after -p)" : ""}`
      )
    }
    if (key in values) return Either.left(`${flag} is given twice`)
    const spec: OptionSpec = OPTIONS[key]
    if (spec.takes === "switch") {
      if (equals !== -1) return Either.left(`${flag} takes no value`)
      values[key] = true
      continue
    }
    if (spec.takes === "optional-text" && equals === -1) {
      // Its text, unless what follows is another option (or nothing).
      const next = args[index + 1]
      values[key] = next === undefined || next.startsWith("-") ? "" : args[++index]!
      continue
    }
    const text = equals !== -1 ? arg.slice(equals + 1) : args[++index]
    // `--model --session x` forgot the model; but a prompt is anything (`-p --help` asks "--help").
    if (text === undefined || (equals === -1 && spec.anyValue !== true && byFlag.has(text))) return Either.left(`${flag} needs a value`)
    const value = valueFor(flag, spec, text)
    if (Either.isLeft(value)) return Either.left(value.left)
    values[key] = value.right
  }
  const parsed: Record<string, string | number | boolean | undefined> = {}
  for (const key of keys) parsed[key] = values[key] ?? (OPTIONS[key].takes === "switch" ? false : undefined)
  return Either.right(parsed as ParsedOptions<K>)
}
