import { describe, it } from "vitest"
import { checkpointerConformance, MemoryCheckpointer } from "../src/core/index.js"

checkpointerConformance("memory", MemoryCheckpointer.layer, { runner: { describe, it } })
