/**
 * `@lite-agent/sdk/testing` — the conformance suite every `Checkpointer` backend passes, for
 * third-party backends to run too. It uses `node:assert` and the test runner you hand it.
 */
export { checkpointerConformance } from "./testing/conformance.js"
export type { ConformanceOptions, ConformanceRunner } from "./testing/runner.js"
export { asStored, sampleEvents, storable } from "./testing/samples.js"
