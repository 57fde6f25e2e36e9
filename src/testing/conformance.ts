/**
 * `checkpointerConformance(name, layer)`: the one suite every `Checkpointer` backend runs —
 * example-based contract tests and model-based property tests (fast-check `commands`)
 * that compare the backend with an in-memory model after every command.
 *
 * It registers tests with whatever runner is active: Vitest (with `globals`), Jest, Mocha
 * and `node:test` all work. Without globals, pass your runner's `describe` and `it`:
 *
 * ```ts
 * import { describe, it } from "vitest"
 * checkpointerConformance("my backend", MyBackend.layer, { runner: { describe, it } })
 * ```
 */
import type { Layer } from "effect"
import type { Checkpointer } from "../core/Checkpointer.js"
import { contractTests } from "./contractTests.js"
import { followTests } from "./followTests.js"
import { forkTests } from "./forkTests.js"
import { generationTests } from "./generationTests.js"
import { modelBasedProperties } from "./modelCommands.js"
import { pruneTests } from "./pruneTests.js"
import { type ConformanceOptions, conformanceSuite } from "./runner.js"
import { snapshotStoreTests } from "./snapshotStoreTests.js"

export const checkpointerConformance = <E>(
  name: string,
  layer: Layer.Layer<Checkpointer, E>,
  input: ConformanceOptions = {}
): void => {
  const suite = conformanceSuite(layer, input)
  suite.runner.describe(`Checkpointer conformance: ${name}`, () => {
    contractTests(suite)
    generationTests(suite)
    followTests(suite)
    snapshotStoreTests(suite)
    forkTests(suite)
    pruneTests(suite)
    modelBasedProperties(suite)
  })
}
