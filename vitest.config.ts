import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 120_000,
    hookTimeout: 180_000,
    // Child-process tests spawn real Node processes; two cores is the machine's budget.
    maxWorkers: 2,
    minWorkers: 1
  }
})
