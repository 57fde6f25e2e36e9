import { defineConfig } from "vitest/config"

/** Files left out of `npm run test:quick`: they start processes or servers of their own, build and install the packages, or repeat a suite over variants. */
export const SLOW_FILES = [
  "test/*.processes.test.ts",
  "test/file.namespaces.test.ts",
  "test/file.codecs.conformance.test.ts",
  "test/sqlite.availability.test.ts",
  "test/follow.keyed.test.ts",
  "test/postgres.*.test.ts",
  "test/package.test.ts",
  "test/readme.test.ts",
  "test/examples.test.ts",
  "test/cli*.test.ts",
  "test/viewer.browser.test.ts"
]

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The processes tests start run the sources transpiled once, not tsx at each start.
    globalSetup: ["test/support/compiledForProcesses.ts"],
    // Generous: a test waits on events, and a loaded machine only makes them come later.
    testTimeout: 180_000,
    hookTimeout: 300_000,
    // Two files at a time on two cores. Each file starts its own servers (PostgreSQL, HTTP) and
    // processes once; none depends on another's, nor on the machine being fast.
    maxWorkers: 2,
    minWorkers: 1
  }
})
