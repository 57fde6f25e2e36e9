/**
 * The checks every layer applies to the options it is given, and the facade reuses: each
 * returns the `ConfigurationError` naming the option, or `undefined` when the value is fine
 * (`undefined` itself is fine: the layer's default applies).
 */
import { ConfigurationError } from "./errors.js"

const problem = (option: string, detail: string) => new ConfigurationError({ option, detail })

export const checkPositiveInteger = (option: string, value: unknown, unit = ""): ConfigurationError | undefined =>
  value === undefined || (typeof value === "number" && Number.isInteger(value) && value >= 1)
    ? undefined
    : problem(option, `must be a positive integer${unit}, got ${String(value)}`)

export const checkNonNegativeInteger = (option: string, value: unknown): ConfigurationError | undefined =>
  value === undefined || (typeof value === "number" && Number.isInteger(value) && value >= 0)
    ? undefined
    : problem(option, `must be a non-negative integer, got ${String(value)}`)

export const checkNumberAtLeast = (option: string, value: unknown, minimum: number): ConfigurationError | undefined =>
  value === undefined || (typeof value === "number" && Number.isFinite(value) && value >= minimum)
    ? undefined
    : problem(option, `must be a number >= ${minimum}, got ${String(value)}`)

export const checkString = (option: string, value: unknown, options: { readonly nonEmpty?: boolean } = {}) =>
  value === undefined || (typeof value === "string" && (options.nonEmpty !== true || value.length > 0))
    ? undefined
    : problem(option, options.nonEmpty === true ? "must be a non-empty string" : `must be a string, got ${typeof value}`)

/** The first problem among `checks`, if any. */
export const firstProblem = (...checks: ReadonlyArray<ConfigurationError | undefined>): ConfigurationError | undefined =>
  checks.find((check) => check !== undefined)
