import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    // One test file at a time: the process tests start up to six Node processes of their own,
    // and the machines have two cores. Starving vitest's own workers made its RPC time out.
    maxWorkers: 1,
    minWorkers: 1
  }
})
