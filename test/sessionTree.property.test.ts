/**
 * The session tree against a model (test/support/treeModel.ts) with the real agent, real
 * commands and a real workdir, on the memory, file and SQLite backends.
 */
import { describe, it } from "vitest"
import { BACKENDS } from "./support/agentSim.js"
import { promiseCheckpointer } from "./support/agent.js"
import { runTreeModel } from "./support/treeModel.js"

describe("the session tree, as a model", () => {
  for (const backend of BACKENDS) {
    it(`${backend}: after every send, restore, undo, redo, switch and fork, the conversation, the tree and the workspace are the model's`, async () => {
      await runTreeModel(() => promiseCheckpointer(backend), backend === "memory" ? 30 : 15)
    }, 600_000)
  }
})
