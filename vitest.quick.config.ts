import { defineConfig, mergeConfig } from "vitest/config"
import base, { SLOW_FILES } from "./vitest.config.js"

/** `npm run test:quick`: the in-process tests, for the inner loop (the full suite is `npm test`). */
export default mergeConfig(base, defineConfig({ test: { exclude: SLOW_FILES } }))
