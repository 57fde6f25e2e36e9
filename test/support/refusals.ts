/** Helpers for tests of refused input: what a call threw, and the shape of a ConfigurationError. */
import { expect } from "vitest"
import { ConfigurationError } from "../../src/index.js"

/** What a call threw synchronously (undefined when it returned). */
export const thrownBy = (call: () => unknown): unknown => {
  try {
    call()
  } catch (error) {
    return error
  }
  return undefined
}

export const expectConfigurationError = (error: unknown, option: string, detail: string | RegExp) => {
  expect(error).toBeInstanceOf(ConfigurationError)
  if (!(error instanceof ConfigurationError)) return
  expect(error.option).toBe(option)
  if (typeof detail === "string") expect(error.detail).toContain(detail)
  else expect(error.detail).toMatch(detail)
}
