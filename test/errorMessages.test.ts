/**
 * What a user who gets an argument wrong is told: the option they meant, the argument that was
 * wrong (not an event of the log), and what was refused (an undo, not "a restore to checkpoint 0").
 */
import { describe, expect, it } from "vitest"
import { ConfigurationError, createLiteAgent, type LiteAgentOptions, memoryCheckpointer, RestoreRefusedError } from "../src/index.js"
import { scripted } from "../src/provider.js"
import { tempDir } from "./support/agent.js"

const thrown = async (run: () => unknown): Promise<unknown> => {
  try {
    await run()
  } catch (error) {
    return error
  }
  throw new Error("expected it to throw")
}

describe("messages for a wrong argument", () => {
  it("autoCompact with a key misspelt names the key and the one meant, not the union's first member", async () => {
    const error = await thrown(() =>
      createLiteAgent({ model: scripted([]), checkpointer: memoryCheckpointer(), autoCompact: { threshold: 10 } } as unknown as LiteAgentOptions)
    )
    expect(error).toBeInstanceOf(ConfigurationError)
    expect(error).toMatchObject({ option: "autoCompact.threshold" })
    expect((error as ConfigurationError).detail).toContain('unknown option (did you mean "thresholdTokens"?)')
    // The other member's own problem still reads as itself.
    const wrongType = await thrown(() =>
      createLiteAgent({ model: scripted([]), checkpointer: memoryCheckpointer(), autoCompact: { thresholdTokens: "lots" } } as unknown as LiteAgentOptions)
    )
    expect(wrongType).toMatchObject({ option: "autoCompact.thresholdTokens" })
  })

  it("send with a prompt that is not one is a ConfigurationError about the prompt; nothing is logged", async () => {
    const checkpointer = memoryCheckpointer()
    const agent = createLiteAgent({ model: scripted([{ text: "never" }]), checkpointer, workdir: tempDir("messages") })
    try {
      for (const prompt of [42, { text: "no type" }, "   "]) {
        const error = await thrown(() => agent.send(prompt as never))
        expect(error, JSON.stringify(prompt)).toBeInstanceOf(ConfigurationError)
        expect(error).toMatchObject({ option: "prompt" })
      }
      expect((await thrown(() => agent.send(42 as never)) as ConfigurationError).detail).toBe(
        `expected a string or an array of text blocks ({ type: "text", text }), got 42`
      )
      expect(await checkpointer.list()).toEqual([])
    } finally {
      await agent.close()
      await checkpointer.close()
    }
  })

  it("an undo or a redo with nothing to reverse, and a switch to no branch, say which was refused", async () => {
    const checkpointer = memoryCheckpointer()
    const agent = createLiteAgent({ model: scripted([{ text: "one" }]), checkpointer, workdir: tempDir("messages") })
    try {
      await agent.send("a prompt")
      const undo = await thrown(() => agent.undo(agent.sessionId))
      expect(undo).toBeInstanceOf(RestoreRefusedError)
      expect((undo as Error).message).toMatch(/^undo of session "[^"]+" refused; nothing was changed:\n- nothing_to_undo/)
      expect((await thrown(() => agent.redo(agent.sessionId)) as Error).message).toMatch(/^redo of session "[^"]+" refused/)
      expect((await thrown(() => agent.switchBranch(agent.sessionId, 999)) as Error).message).toMatch(/^switch of session "[^"]+" to seq 999 refused/)
      expect((await thrown(() => agent.restore(agent.sessionId, 999)) as Error).message).toMatch(/^restore of session "[^"]+" to checkpoint 999 refused/)
    } finally {
      await agent.close()
      await checkpointer.close()
    }
  })
})
