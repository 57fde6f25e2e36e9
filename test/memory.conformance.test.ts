import { describe, it } from "vitest"
import { MemoryCheckpointer } from "../src/core.js"
import { checkpointerConformance } from "../src/testing.js"

checkpointerConformance("memory", MemoryCheckpointer.layer, { runner: { describe, it } })
