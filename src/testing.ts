/**
 * `@lite-agent/sdk/testing` — the conformance suite every `Checkpointer` backend passes, for
 * third-party backends to run too. It uses `node:assert` and the test runner you hand it.
 */
export {
  asStored,
  checkpointerConformance,
  type ConformanceOptions,
  type ConformanceRunner,
  sampleEvents,
  storable
} from "./testing/conformance.js"
