/**
 * Options objects are decoded with a Schema where they enter the library (a layer being
 * built, a facade call): an unknown key, a wrong type or a value out of range is a
 * `ConfigurationError` that names the option, says what was expected and quotes what came —
 * so a misspelled `dryRun` can never silently run a real restore. One schema per options type;
 * the layers and the facade decode with the same one.
 */
import { Either, ParseResult, Schema, type SchemaAST } from "effect"
import { ConfigurationError } from "../errors.js"

/** `schema`, whose failures read "expected <expected>, got <value>". */
export const expecting = <A, I, R>(schema: Schema.Schema<A, I, R>, expected: string): Schema.Schema<A, I, R> =>
  schema.annotations({ message: () => ({ message: `Expected ${expected}`, override: true }) })

export const PositiveInteger = expecting(Schema.Number.pipe(Schema.int(), Schema.positive()), "a positive integer")
export const NonNegativeInteger = expecting(Schema.Number.pipe(Schema.int(), Schema.nonNegative()), "a non-negative integer")
export const PositiveMilliseconds = expecting(
  Schema.Number.pipe(Schema.int(), Schema.positive()),
  "a positive integer of milliseconds"
)
export const numberAtLeast = (minimum: number) =>
  expecting(Schema.Number.pipe(Schema.finite(), Schema.greaterThanOrEqualTo(minimum)), `a number >= ${minimum}`)
export const AnyString = expecting(Schema.String, "a string")
export const NonEmptyString = expecting(Schema.String.pipe(Schema.minLength(1)), "a non-empty string")
export const Flag = expecting(Schema.Boolean, "true or false")
export const oneOf = <const Values extends ReadonlyArray<string>>(...values: Values) =>
  expecting(Schema.Literal(...values), `one of ${values.map((value) => JSON.stringify(value)).join(", ")}`)
/** A container (array, struct) whose own failures read "expected <expected>, …"; failures inside it keep their own message. */
export const described = <A, I, R>(schema: Schema.Schema<A, I, R>, expected: string): Schema.Schema<A, I, R> =>
  schema.annotations({ message: () => ({ message: `Expected ${expected}`, override: false }) })

/** A value only a guard can recognise (a provider, a codec, a layer), described for the error. */
export const recognised = <A>(expected: string, guard: (value: unknown) => value is A) =>
  Schema.declare(guard, { message: () => ({ message: `Expected ${expected}`, override: true }) })

/** An `AbortSignal` option (`signal`), for operations a caller can stop part-way. */
export const AbortSignalOption = recognised("an AbortSignal", (value: unknown): value is AbortSignal => value instanceof AbortSignal)

/** A value as the caller gave it, short enough for an error message. */
export const quoteValue = (value: unknown): string => {
  if (typeof value === "string") return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value)
  if (typeof value === "number" || typeof value === "boolean" || value === undefined || value === null) {
    return Object.is(value, -0) ? "-0" : String(value)
  }
  if (typeof value === "bigint") return `${value}n`
  if (typeof value === "function") return "a function"
  if (typeof value === "symbol") return String(value)
  if (Array.isArray(value)) return `an array (${value.length} items)`
  const prototype: unknown = Object.getPrototypeOf(value)
  if (prototype !== Object.prototype && prototype !== null) {
    const name = (value as { constructor?: { name?: unknown } }).constructor?.name
    return typeof name === "string" && name.length > 0 ? `a ${name}` : "an object"
  }
  try {
    const json = JSON.stringify(value)
    return json.length > 80 ? `${json.slice(0, 80)}…` : json
  } catch {
    return "an object"
  }
}

export const isPlainObject = (value: unknown): value is Readonly<Record<string, unknown>> => {
  if (typeof value !== "object" || value === null) return false
  const prototype: unknown = Object.getPrototypeOf(value)
  return prototype === Object.prototype || prototype === null
}

/** Edits (insertions, deletions, substitutions) between two short strings. */
export const editDistance = (a: string, b: string): number => {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length]!
}

/** The known key the caller most likely meant by `given`, if one is close enough. */
export const closestKey = (given: string, known: ReadonlyArray<string>): string | undefined => {
  const lower = given.toLowerCase()
  let best: { readonly key: string; readonly distance: number } | undefined
  for (const key of known) {
    const candidate = key.toLowerCase()
    const prefix = Math.min(lower.length, candidate.length) >= 3 && (lower.startsWith(candidate) || candidate.startsWith(lower))
    const distance = prefix ? 0.5 : editDistance(lower, candidate)
    if (distance <= Math.max(1, Math.floor(key.length / 3)) && (best === undefined || distance < best.distance)) {
      best = { key, distance }
    }
  }
  return best?.key
}

const RenamedOptionsId = Symbol.for("@lite-agent/core/options/RenamedOptions")

/**
 * Annotations for an options schema some of whose options were renamed (old name → new name):
 * an old name is refused with its new one, however far apart the two are spelt.
 * `Schema.Struct({ … }).annotations(renamedOptions({ lockTimeoutMs: "busyTimeoutMs" }))`.
 */
export const renamedOptions = (renamed: Readonly<Record<string, string>>) => ({ [RenamedOptionsId]: renamed })

/** What the option `given` of the schema `ast` was renamed to, if it was. */
const renamedTo = (ast: SchemaAST.AST, given: string): string | undefined => {
  const renamed = ast.annotations[RenamedOptionsId]
  const to = isPlainObject(renamed) && Object.hasOwn(renamed, given) ? renamed[given] : undefined
  return typeof to === "string" ? to : undefined
}

const pathText = (path: ReadonlyArray<PropertyKey>) =>
  path.reduce<string>(
    (text, key) => (typeof key === "number" ? `${text}[${key}]` : text === "" ? String(key) : `${text}.${String(key)}`),
    ""
  )

const valueAt = (input: unknown, path: ReadonlyArray<PropertyKey>): unknown =>
  path.reduce<unknown>(
    (value, key) => (typeof value === "object" && value !== null ? (value as Record<PropertyKey, unknown>)[key] : undefined),
    input
  )

export interface DecodeSettings {
  /** What the argument is ("restore options"): the option named when the problem is the whole value. */
  readonly name: string
  /** Where the argument sits inside a larger one ("options" of `query`), prefixed to every option named. */
  readonly prefix?: string
  /** Options whose values must never be quoted (keys, passwords). */
  readonly secrets?: ReadonlyArray<string>
}

/** The first thing wrong, as a `ConfigurationError`. */
const configurationErrorOf = (error: ParseResult.ParseError, ast: SchemaAST.AST, input: unknown, settings: DecodeSettings) => {
  // Of a union's members, the one the value went furthest into says what is wrong with it
  // (`{ threshold: 10 }` for `false | { thresholdTokens }`: the unknown key, not "expected false").
  const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
  const deepest = Math.max(...issues.map((candidate) => candidate.path.length))
  const inUnion = issues.some((candidate) => candidate.path.length < deepest && /^Expected /.test(candidate.message))
  const ordered = inUnion ? [...issues].sort((a, b) => b.path.length - a.path.length) : issues
  // An optional field also "expects undefined"; that alternative says nothing useful.
  const issue = ordered.find((candidate) => !candidate.message.startsWith("Expected undefined")) ?? ordered[0]
  const prefix = settings.prefix ?? ""
  if (issue === undefined) return new ConfigurationError({ option: prefix || settings.name, detail: error.message })
  const option = pathText([...(prefix === "" ? [] : [prefix]), ...issue.path]) || settings.name
  switch (issue._tag) {
    case "Unexpected": {
      const given = String(issue.path[issue.path.length - 1])
      const known = [...issue.message.matchAll(/"([^"]+)"/g)].map((match) => match[1]!)
      const renamed = issue.path.length === 1 ? renamedTo(ast, given) : undefined
      const suggestion = closestKey(given, known)
      const hint = renamed !== undefined
        ? ` (renamed: it is now "${renamed}")`
        : suggestion === undefined ? "" : ` (did you mean "${suggestion}"?)`
      const knownText = known.length === 0 ? "there are none" : `the known ones are ${known.join(", ")}`
      return new ConfigurationError({ option, detail: `unknown option${hint}; ${knownText}` })
    }
    case "Missing":
      return new ConfigurationError({ option, detail: "is required" })
    default: {
      const expected = /^Expected ([\s\S]*?)(?:, actual [\s\S]*)?$/.exec(issue.message)?.[1]
      // A filter's own message says the whole problem.
      if (expected === undefined) return new ConfigurationError({ option, detail: issue.message })
      const secret = typeof issue.path[0] === "string" && (settings.secrets ?? []).includes(issue.path[0])
      const got = secret ? "a value not shown here" : quoteValue(valueAt(input, issue.path))
      return new ConfigurationError({ option, detail: `expected ${expected}, got ${got}` })
    }
  }
}

/** Decode `input` with `schema`, refusing unknown keys, wrong types and values out of range. */
export const decodeArgument = <A, I>(
  schema: Schema.Schema<A, I, never>,
  input: unknown,
  settings: DecodeSettings
): Either.Either<A, ConfigurationError> =>
  Either.mapLeft(
    Schema.decodeUnknownEither(schema, { onExcessProperty: "error", errors: "all" })(input),
    (error) => configurationErrorOf(error, schema.ast, input, settings)
  )

/** Decode the options object `input` (`undefined` is `{}`); a value that is not a plain object is refused. */
export const decodeOptions = <A, I>(
  schema: Schema.Schema<A, I, never>,
  input: unknown,
  settings: DecodeSettings | string
): Either.Either<A, ConfigurationError> => {
  const resolved = typeof settings === "string" ? { name: settings } : settings
  const value = input === undefined ? {} : input
  if (!isPlainObject(value)) {
    return Either.left(
      new ConfigurationError({
        option: resolved.prefix || resolved.name,
        detail: `expected an object of options, got ${quoteValue(value)}`
      })
    )
  }
  // Schema treats an empty struct as "any object"; options that take no keys must still refuse one.
  const { ast } = schema
  const first = Object.keys(value)[0]
  if (first !== undefined && ast._tag === "TypeLiteral" && ast.propertySignatures.length === 0 && ast.indexSignatures.length === 0) {
    return Either.left(
      new ConfigurationError({ option: pathText([...(resolved.prefix ? [resolved.prefix] : []), first]), detail: "unknown option; there are none" })
    )
  }
  return decodeArgument(schema, value, resolved)
}

/** `decodeOptions` for promise callers: the options, or the `ConfigurationError` thrown at once. */
export const decodeOptionsOrThrow = <A, I>(schema: Schema.Schema<A, I, never>, input: unknown, settings: DecodeSettings | string): A =>
  Either.getOrThrowWith(decodeOptions(schema, input, settings), (error) => error)
