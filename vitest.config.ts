import { relative } from "node:path"
import { defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"

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

/**
 * The files that take longest, longest first: started first, they do not leave one worker running
 * a long file alone at the end. Without this a fresh clone (no timings cached) starts the largest
 * files first, and the conformance files, a few lines each, last.
 */
const LONGEST_FIRST = [
  "test/file.codecs.conformance.test.ts",
  "test/postgres.conformance.test.ts",
  "test/package.test.ts",
  "test/file.conformance.test.ts",
  "test/tree.processes.test.ts",
  "test/objects.gc.processes.test.ts",
  "test/restore.processes.test.ts",
  "test/cli.test.ts",
  "test/postgres.processes.test.ts",
  "test/sqlite.conformance.test.ts"
]

class LongestFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const rank = (file: TestSpecification) => {
      const index = LONGEST_FIRST.indexOf(relative(import.meta.dirname, file.moduleId))
      return index === -1 ? LONGEST_FIRST.length : index
    }
    // Stable: the rest keep the order vitest gives them.
    return (await super.sort(files)).map((file, order) => ({ file, order, rank: rank(file) }))
      .sort((a, b) => a.rank - b.rank || a.order - b.order)
      .map(({ file }) => file)
  }
}

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
    minWorkers: 1,
    sequence: { sequencer: LongestFirst }
  }
})
