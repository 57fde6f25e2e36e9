/**
 * The agent end to end against a fake Anthropic Messages API on 127.0.0.1: a tool-use round
 * trip (the tool really runs, its result goes back with the matching id) and an API error
 * that surfaces as a typed `ModelError` with the HTTP status, leaving the log resumable.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { afterEach, describe, expect, it } from "vitest"
import { createLiteAgent, memoryCheckpointer, ModelError, UserMessage } from "../src/index.js"
import { anthropic } from "../src/provider.js"
import { tempDir } from "./support/agent.js"
import { type FakeAnthropic, reply, startFakeAnthropic } from "./support/fakeAnthropic.js"

const opened: Array<{ close(): Promise<void> }> = []
afterEach(async () => {
  for (const thing of opened.splice(0).reverse()) await thing.close()
})

const start = async () => {
  const server: FakeAnthropic = await startFakeAnthropic()
  const checkpointer = memoryCheckpointer()
  const workdir = tempDir("anthropic-work")
  const agent = createLiteAgent({
    model: anthropic({ apiKey: "sk-test-key", baseUrl: server.url }),
    modelName: "claude-test-model",
    workdir,
    checkpointer,
    systemPrompt: "You are terse."
  })
  opened.push(server, checkpointer, agent)
  return { server, checkpointer, workdir, agent }
}

interface MessagesBody {
  readonly model: string
  readonly system?: ReadonlyArray<{ readonly text: string }> | string
  readonly messages: ReadonlyArray<{ readonly role: string; readonly content: ReadonlyArray<Record<string, unknown>> | string }>
  readonly tools?: ReadonlyArray<{ readonly name: string; readonly input_schema: { readonly required?: ReadonlyArray<string> } }>
}

describe("the agent on the Anthropic provider (fake server)", () => {
  it("runs a tool-use round trip and persists it", async () => {
    const { agent, checkpointer, server, workdir } = await start()
    server.enqueue(
      reply.message([
        { type: "text", text: "I'll create it." },
        { type: "tool_use", id: "toolu_01ABC", name: "write_file", input: { path: "hello.txt", content: "hi from claude\n" } }
      ], { usage: { input_tokens: 120, output_tokens: 30 } }),
      reply.text("Created hello.txt.", { usage: { input_tokens: 180, output_tokens: 8 } })
    )
    const deltas: Array<string> = []
    agent.subscribe((event) => {
      if (event.type === "text_delta") deltas.push(event.delta)
    })
    const result = await agent.send("Create hello.txt")
    expect(result.text).toBe("Created hello.txt.")
    // Each model call is streamed; its text arrives in pieces as the API sends them.
    expect(server.requests.map((request) => (request.body as { stream?: boolean }).stream)).toEqual([true, true])
    expect(deltas).toEqual(["I'll ", "create ", "it.", "Created ", "hello.txt."])
    expect(result.usage).toEqual({ inputTokens: 300, outputTokens: 38 })
    expect(result.toolCalls).toEqual([
      {
        id: "toolu_01ABC",
        name: "write_file",
        input: { path: "hello.txt", content: "hi from claude\n" },
        output: "wrote hello.txt (15 bytes)",
        isError: false
      }
    ])
    expect(readFileSync(join(workdir, "hello.txt"), "utf8")).toBe("hi from claude\n")

    expect(server.requests.length).toBe(2)
    const [first, second] = server.requests.map((request) => request.body as MessagesBody)
    expect(server.requests[0]!.headers["x-api-key"]).toBe("sk-test-key")
    expect(first!.model).toBe("claude-test-model")
    expect(JSON.stringify(first!.system)).toContain("You are terse.")
    expect(first!.tools?.map((tool) => tool.name).sort()).toEqual(
      ["chmod_file", "delete_file", "edit_file", "list_files", "read_file", "shell", "write_file"]
    )
    expect(first!.tools?.find((tool) => tool.name === "write_file")?.input_schema.required).toEqual(["path", "content"])
    // The second request carries the assistant's tool_use and our tool_result with the same id.
    const roles = second!.messages.map((message) => message.role)
    expect(roles).toEqual(["user", "assistant", "user"])
    const assistantBlocks = second!.messages[1]!.content as ReadonlyArray<Record<string, unknown>>
    expect(assistantBlocks.find((block) => block.type === "tool_use")).toMatchObject({ id: "toolu_01ABC", name: "write_file" })
    const resultBlocks = second!.messages[2]!.content as ReadonlyArray<Record<string, unknown>>
    expect(resultBlocks[0]).toMatchObject({ type: "tool_result", tool_use_id: "toolu_01ABC", is_error: false })
    expect(String(resultBlocks[0]!.content)).toContain("wrote hello.txt")

    const tags = (await checkpointer.read(agent.sessionId)).map((stored) => stored.event._tag)
    expect(tags).toEqual(["SessionMetadata", "WorkspaceCaptured", "UserMessage", "AssistantMessage", "FileSnapshot", "FileChange", "WorkspaceCaptured", "ToolResult", "AssistantMessage"])
  })

  it("an API error rejects with ModelError carrying the status; the next send goes on from the log", async () => {
    const { agent, checkpointer, server } = await start()
    server.enqueue(reply.error(400, "invalid_request_error", "prompt is too long"))
    const error = await agent.send("Hello").catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(ModelError)
    expect(error).toMatchObject({ status: 400, sessionId: agent.sessionId })
    expect((await checkpointer.read(agent.sessionId)).at(-1)?.event).toBeInstanceOf(UserMessage)

    server.enqueue(reply.text("Hi."))
    expect((await agent.send("Hello again")).text).toBe("Hi.")
    const last = server.requests.at(-1)!.body as MessagesBody
    // One user turn: the unanswered prompt, the repair note and the new prompt, merged.
    expect(last.messages.map((message) => message.role)).toEqual(["user"])
    expect(JSON.stringify(last.messages[0]!.content)).toContain("Hello again")
    expect(JSON.stringify(last.messages[0]!.content)).toContain("got no answer")
  })

  it("compaction counts tokens with count_tokens (measured); a failing count falls back to the estimate", async () => {
    const { agent, server } = await start()
    server.enqueue(reply.text(`First answer. ${"words ".repeat(300)}`), reply.text(`Second answer. ${"words ".repeat(300)}`))
    await agent.send("Hello")
    await agent.send("And now?")
    const counted: Array<unknown> = []
    server.countTokensWith((body) => {
      counted.push(body)
      return counted.length === 1 ? 900 : 120
    })
    server.enqueue(reply.text("The user said hello twice."))
    const result = await agent.compact(undefined, { keepRecentTokens: 0 })
    expect(result).toMatchObject({ before: 900, after: 120, method: "measured", compacted: true })
    // The conversation as the Messages API takes it: the system prompt apart, the model's name, user first.
    const first = counted[0] as MessagesBody
    expect(first).toMatchObject({ model: "claude-test-model", system: "You are terse." })
    expect(first.messages.map((message) => message.role)).toEqual(["user", "assistant", "user", "assistant"])
    expect(JSON.stringify(counted[1])).toContain("The user said hello twice.")
    const countRequests = server.requests.filter((request) => request.path === "/v1/messages/count_tokens")
    expect(countRequests).toHaveLength(2)
    expect(countRequests.every((request) => request.headers["x-api-key"] === "sk-test-key" && !request.rawBody.includes("sk-test-key"))).toBe(true)

    server.countTokensWith(() => undefined)
    server.enqueue(reply.text("Hello once more."), reply.text("Summary again."))
    await agent.send("Once more")
    const fallback = await agent.compact(undefined, { keepRecentTokens: 0 })
    expect(fallback.method).toBe("estimated")
  })
})
