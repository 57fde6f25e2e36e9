/**
 * The runtime's rules: background tasks, the maintenance lock (busy errors), turns queued on
 * one session, the step limit, model failures, bad tool input, interruption, and conflicts with
 * another writer — plus the Effect layer composition (swap the backend or the model).
 */
import { LanguageModel } from "@effect/ai"
import { it as effectIt } from "@effect/vitest"
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { Deferred, Effect, Fiber, Layer, Ref, Stream } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import {
  AgentBusyError,
  AgentClosedError,
  BackgroundCompleted,
  CheckpointConflictError,
  createLiteAgent,
  type LiteAgent,
  memoryCheckpointer,
  ModelError,
  type PromiseCheckpointer,
  RuntimeMessage,
  UserMessage
} from "../src/index.js"
import { Checkpointer, FileCheckpointer, FileTools, LiteAgent as Agent, MemoryCheckpointer, TimeTravel, Workspace } from "../src/core.js"
import * as Session from "../src/core/session.js"
import { scripted, scriptedLayer } from "../src/provider.js"
import { eventually, promptLines, tempDir } from "./support/agent.js"

const opened: Array<{ close(): Promise<void> }> = []
afterEach(async () => {
  for (const thing of opened.splice(0).reverse()) await thing.close()
})

const setup = (turns: Parameters<typeof scripted>[0], options: { readonly maxSteps?: number } = {}) => {
  const workdir = tempDir("runtime-work")
  const checkpointer: PromiseCheckpointer = memoryCheckpointer()
  const model = scripted(turns)
  const agent: LiteAgent = createLiteAgent({ model, workdir, checkpointer, ...options })
  opened.push(checkpointer, agent)
  return { workdir, checkpointer, model, agent }
}

const bash = (command: string, extra: Record<string, unknown> = {}) => ({ name: "shell", input: { command, ...extra } })

describe("background tasks", () => {
  it("return at once; the completion enters the log (not a checkpoint) and the model sees it next turn", async () => {
    const { agent, checkpointer, model } = setup([
      { toolCalls: [bash("sleep 0.3; echo built > out.txt; echo bg-finished", { background: true })] },
      { text: "started it" },
      { text: "saw it" }
    ])
    const first = await agent.send("build in the background")
    expect(first.toolCalls[0]!.output).toMatch(/^started background task bg_[0-9a-f]+/)
    expect((await agent.backgroundTasks()).length).toBe(1)
    await expect(agent.restore(agent.sessionId, 2)).rejects.toMatchObject({ _tag: "AgentBusyError", reason: "background_task" })

    await eventually(async () => (await agent.backgroundTasks()).length === 0)
    const stored = await checkpointer.read(agent.sessionId)
    const completed = stored.at(-1)!.event
    expect(completed).toBeInstanceOf(BackgroundCompleted)
    expect(completed instanceof BackgroundCompleted && [completed.exitCode, completed.output]).toEqual([0, "bg-finished\n"])
    expect((await agent.listCheckpoints(agent.sessionId)).length).toBe(1)

    await agent.send("is it done?")
    const lines = promptLines(model.calls()[2]!.prompt)
    expect(lines.some((line) => line.includes("background task completed") && line.includes("bg-finished"))).toBe(true)
    expect((await agent.listCheckpoints(agent.sessionId)).map((checkpoint) => checkpoint.prompt)).toEqual([
      "build in the background",
      "is it done?"
    ])
  })

  it("a completion during a running turn is logged at the turn's next step, after the tool results", async () => {
    const { agent, checkpointer, model } = setup([
      { toolCalls: [bash("sleep 0.2; echo early", { background: true }), bash("sleep 1.5; echo slow")] },
      { text: "both done" }
    ])
    await agent.send("go")
    const tags = (await checkpointer.read(agent.sessionId)).map((stored) => stored.event._tag)
    expect(tags).toEqual([
      "SessionMetadata",
      "WorkspaceCaptured",
      "UserMessage",
      "AssistantMessage",
      "ToolResult",
      "ToolResult",
      "BackgroundCompleted",
      "AssistantMessage"
    ])
    expect(promptLines(model.calls()[1]!.prompt).at(-1)).toContain("early")
  })

  it("are killed when the agent is closed", async () => {
    const { agent, workdir } = setup([{ toolCalls: [bash("echo $$ > pid; sleep 30", { background: true })] }, { text: "ok" }])
    await agent.send("start it")
    await eventually(() => existsSync(join(workdir, "pid")) && readFileSync(join(workdir, "pid"), "utf8").trim() !== "")
    const pid = Number(readFileSync(join(workdir, "pid"), "utf8").trim())
    await agent.close()
    expect(!existsSync(`/proc/${pid}`) || readFileSync(`/proc/${pid}/stat`, "utf8").split(" ")[2] === "Z").toBe(true)
  })
})

describe("the maintenance lock", () => {
  it("restore and deleteSession fail while a turn runs; a second send to the same session waits its turn", async () => {
    const { agent, checkpointer } = setup([
      { toolCalls: [bash("sleep 1")] },
      { text: "first done" },
      { text: "second done" }
    ])
    const sessionId = agent.sessionId
    const running = agent.send("slow one")
    const queued = agent.send("quick one")
    // Metadata, the checkpoint's capture, the prompt and the model's tool call: the command runs.
    await eventually(async () => (await checkpointer.head(sessionId)) >= 4)
    const busy = await agent.restore(sessionId, 3).catch((error: unknown) => error)
    expect(busy).toBeInstanceOf(AgentBusyError)
    expect(busy).toMatchObject({ operation: "restore", reason: "run_in_flight", sessionId })
    await expect(agent.deleteSession(sessionId)).rejects.toMatchObject({ _tag: "AgentBusyError", reason: "run_in_flight" })

    expect((await running).text).toBe("first done")
    expect((await queued).text).toBe("second done")
    const users = (await checkpointer.read(sessionId)).flatMap((stored) =>
      stored.event instanceof UserMessage ? [[stored.seq, stored.event.content]] : []
    )
    // The queued turn started only after the first one ended.
    expect(users).toEqual([[3, "slow one"], [8, "quick one"]])
    expect((await checkpointer.read(sessionId, { sinceSeq: 5 }))[0]?.event._tag).toBe("AssistantMessage")
    // Idle again: restore goes through.
    await agent.restore(sessionId, 8)
    // Back to just before the second prompt (the capture taken before it); nothing is deleted.
    expect((await checkpointer.read(sessionId)).at(-1)?.event).toMatchObject({ _tag: "LeafMoved", to: 7, reason: "restore" })
  })

  effectIt.live("send fails with AgentBusyError while a restore runs, and works again after", () =>
    Effect.gen(function*() {
      const workdir = tempDir("maintenance-work")
      const slowWrites = yield* Ref.make(false)
      const restoreWriting = yield* Deferred.make<void>()
      const letRestoreFinish = yield* Deferred.make<void>()
      const base = Workspace.make(workdir)
      // A workspace whose writes stall while armed: restore is caught in the middle.
      const stallingWorkspace = Layer.succeed(Workspace.Workspace, {
        ...base,
        write: (path, data, mode) =>
          Effect.zipRight(
            Effect.whenEffect(
              Effect.zipRight(Deferred.succeed(restoreWriting, undefined), Deferred.await(letRestoreFinish)),
              Ref.get(slowWrites)
            ),
            base.write(path, data, mode)
          )
      })
      const agentLayer = Agent.layer({ sessionId: "m1" }).pipe(
        Layer.provide(Layer.mergeAll(FileTools.layer(), TimeTravel.layer)),
        Layer.provideMerge(stallingWorkspace),
        Layer.provideMerge(MemoryCheckpointer.layer),
        Layer.provide(
          scriptedLayer([
            { toolCalls: [{ name: "write_file", input: { path: "f.txt", content: "1" } }] },
            { text: "one" },
            { toolCalls: [{ name: "write_file", input: { path: "f.txt", content: "2" } }] },
            { text: "two" },
            { text: "after" }
          ])
        )
      )
      yield* Effect.gen(function*() {
        const agent = yield* Agent.LiteAgent
        yield* agent.send("one")
        yield* agent.send("two")
        const [, second] = yield* agent.listCheckpoints("m1")
        yield* Ref.set(slowWrites, true)
        const restoring = yield* Effect.fork(agent.restore("m1", second!.seq))
        yield* Deferred.await(restoreWriting)

        const refused = yield* Effect.flip(agent.send("sneaky"))
        expect(refused).toBeInstanceOf(AgentBusyError)
        expect(refused).toMatchObject({ operation: "send", reason: "maintenance" })
        const secondRestore = yield* Effect.flip(agent.restore("m1", 1))
        expect(secondRestore).toMatchObject({ _tag: "AgentBusyError", reason: "maintenance" })

        yield* Deferred.succeed(letRestoreFinish, undefined)
        const result = yield* Fiber.join(restoring)
        expect(result.restoredFiles).toEqual(["f.txt"])
        expect(readFileSync(join(workdir, "f.txt"), "utf8")).toBe("1")
        yield* Ref.set(slowWrites, false)
        expect((yield* agent.send("after")).text).toBe("after")
        const checkpointer = yield* Checkpointer
        const users = yield* Stream.runCollect(checkpointer.read("m1")).pipe(
          Effect.map((chunk) => [...chunk].flatMap((stored) => (stored.event instanceof UserMessage ? [stored.event.content] : [])))
        )
        // Every prompt stays in the log; the conversation goes on from the restored point.
        expect(users).toEqual(["one", "two", "after"])
        expect((yield* agent.listCheckpoints("m1")).map((checkpoint) => checkpoint.prompt)).toEqual(["one", "after"])
      }).pipe(Effect.provide(agentLayer))
    }))
})

describe("a turn", () => {
  it("stops at the step limit, with every tool result recorded", async () => {
    const { agent, checkpointer } = setup(
      [
        { toolCalls: [bash("echo 1")] },
        { toolCalls: [bash("echo 2")] },
        { toolCalls: [bash("echo 3")] }
      ],
      { maxSteps: 2 }
    )
    const result = await agent.send("loop")
    expect(result.stopReason).toBe("step_limit")
    expect(result.steps).toBe(2)
    expect(result.toolCalls.map((call) => call.output)).toEqual(["1\n[exit code 0]", "2\n[exit code 0]"])
    expect((await checkpointer.read(agent.sessionId)).at(-1)?.event._tag).toBe("ToolResult")
    // A per-send limit overrides the agent's.
    expect((await agent.send("once more", { maxSteps: 1 })).steps).toBe(1)
  })

  it("hands bad tool input and failing commands back to the model as error results", async () => {
    const { agent, workdir } = setup([
      {
        toolCalls: [
          { name: "write_file", input: { path: "x.txt" } },
          { name: "write_file", input: { path: "../outside.txt", content: "no" } },
          { name: "edit_file", input: { path: "missing.txt", old_string: "a", new_string: "b" } },
          bash("echo oops >&2; exit 3")
        ]
      },
      { text: "I will fix that" }
    ])
    const result = await agent.send("try things")
    expect(result.toolCalls.map((call) => call.isError)).toEqual([true, true, true, true])
    expect(result.toolCalls[0]!.output).toContain("content")
    expect(result.toolCalls[1]!.output).toContain("outside.txt")
    expect(result.toolCalls[2]!.output).toContain("no such file")
    expect(result.toolCalls[3]!.output).toBe("oops\n[exit code 3]")
    expect(result.text).toBe("I will fix that")
    expect(existsSync(join(workdir, "x.txt"))).toBe(false)
  })

  it("fails with ModelError when the model fails; the next turn notes the unanswered prompt", async () => {
    const { agent, checkpointer, model } = setup([{ text: "only one turn" }])
    await agent.send("first")
    const error = await agent.send("second").catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(ModelError)
    expect((error as ModelError).message).toContain("all 1 turns were used")
    expect((await checkpointer.read(agent.sessionId)).at(-1)?.event).toBeInstanceOf(UserMessage)
    await expect(agent.send("third")).rejects.toBeInstanceOf(ModelError)
    const events = (await checkpointer.read(agent.sessionId)).map((stored) => stored.event)
    expect(events.slice(-4).map((event) => event instanceof RuntimeMessage ? `repair: ${event.kind}` : event._tag)).toEqual([
      "UserMessage",
      "repair: repair",
      "WorkspaceCaptured",
      "UserMessage"
    ])
    expect(model.calls().length).toBe(3)
  })

  it("leaving query's loop early interrupts the turn and kills its command; the next turn repairs", async () => {
    const { agent, checkpointer, workdir } = setup([{ toolCalls: [bash("echo $$ > pid; sleep 30")] }, { text: "fine" }])
    for await (const event of agent.run("long")) {
      if (event.type === "tool_start") {
        await eventually(() => existsSync(join(workdir, "pid")) && readFileSync(join(workdir, "pid"), "utf8").trim() !== "")
        break
      }
    }
    const pid = Number(readFileSync(join(workdir, "pid"), "utf8").trim())
    await eventually(() => !existsSync(`/proc/${pid}`) || readFileSync(`/proc/${pid}/stat`, "utf8").split(" ")[2] === "Z")
    expect(Session.pendingToolCalls(Session.fold(await checkpointer.read(agent.sessionId))).length).toBe(1)
    expect((await agent.send("again")).text).toBe("fine")
    expect(Session.pendingToolCalls(Session.fold(await checkpointer.read(agent.sessionId)))).toEqual([])
  })

  effectIt.live("a write by another writer during the model call fails the turn with CheckpointConflictError", () =>
    Effect.gen(function*() {
      const workdir = tempDir("conflict-work")
      // A model that, while "thinking", lets someone else append to the same session.
      const interferingModel = Layer.effect(
        LanguageModel.LanguageModel,
        Effect.gen(function*() {
          const checkpointer = yield* Checkpointer
          return yield* LanguageModel.make({
            generateText: () => Effect.dieMessage("a turn streams its model calls"),
            streamText: () =>
              Stream.unwrap(Effect.as(
                Effect.orDie(checkpointer.append("c1", [new UserMessage({ content: "from elsewhere", origin: "user" })])),
                Stream.make(
                  { type: "text-delta" as const, id: "0", delta: "too late" },
                  { type: "finish" as const, reason: "stop" as const, usage: { inputTokens: 1, outputTokens: 1, totalTokens: 2 } }
                )
              ))
          })
        })
      )
      const layer = Agent.layerWithWorkdir(workdir, { sessionId: "c1" }).pipe(
        Layer.provide(interferingModel),
        Layer.provideMerge(MemoryCheckpointer.layer)
      )
      yield* Effect.gen(function*() {
        const agent = yield* Agent.LiteAgent
        for (const prompt of ["mine", "mine again"]) {
          const error = yield* Effect.flip(agent.send(prompt))
          expect(error).toBeInstanceOf(CheckpointConflictError)
          expect(error).toMatchObject({ sessionId: "c1" })
        }
        const checkpointer = yield* Checkpointer
        const tags = yield* Effect.map(Stream.runCollect(checkpointer.read("c1")), (chunk) => [...chunk].map((s) => s.event._tag))
        // Nothing of the model's answer was written over the other writer's event.
        expect(tags.filter((tag) => tag === "AssistantMessage")).toEqual([])
      }).pipe(Effect.provide(layer))
    }))
})

describe("the facade's edges", () => {
  it("a write by another writer during a tool call stops the turn with CheckpointConflictError", async () => {
    const { agent, checkpointer } = setup([{ toolCalls: [bash("sleep 0.5; echo done")] }, { text: "fine" }, { text: "after" }])
    const sessionId = agent.sessionId
    agent.subscribe((event) => {
      if (event.type === "tool_start") void checkpointer.append(sessionId, [new UserMessage({ content: "from elsewhere", origin: "user" })])
    })
    const error = await agent.send("run it").catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(CheckpointConflictError)
    const tags = (await checkpointer.read(sessionId)).map((stored) => stored.event._tag)
    // Nothing of ours was written after the other writer's message.
    expect(tags).toEqual(["SessionMetadata", "WorkspaceCaptured", "UserMessage", "AssistantMessage", "UserMessage"])
    // The next turn reads the log again, closes the open call and goes on.
    expect((await agent.send("again")).text).toBe("fine")
  })

  it("close() stops a turn in flight: it rejects with AgentClosedError and its command is killed", async () => {
    const { agent, workdir } = setup([{ toolCalls: [bash("echo $$ > pid; sleep 2; touch marker")] }, { text: "never" }])
    const pending = agent.send("slow")
    await eventually(() => existsSync(join(workdir, "pid")) && readFileSync(join(workdir, "pid"), "utf8").trim() !== "")
    await agent.close()
    await expect(pending).rejects.toBeInstanceOf(AgentClosedError)
    await new Promise((resolve) => setTimeout(resolve, 2500))
    expect(existsSync(join(workdir, "marker"))).toBe(false)
    await expect(agent.send("more")).rejects.toBeInstanceOf(AgentClosedError)
  })

  it("a throwing listener does not hide events from the others", async () => {
    const { agent } = setup([{ text: "hi" }])
    agent.subscribe(() => {
      throw new Error("listener bug")
    })
    const seen: Array<string> = []
    agent.subscribe((event) => seen.push(event.type))
    expect((await agent.send("hello")).text).toBe("hi")
    expect(seen.at(-1)).toBe("result")
  })

  it("a bad per-send step limit is a ConfigurationError and writes nothing", async () => {
    const { agent, checkpointer } = setup([{ text: "hi" }])
    await expect(agent.send("hello", { maxSteps: 0 })).rejects.toMatchObject({ _tag: "ConfigurationError", option: "maxSteps" })
    expect(await checkpointer.head(agent.sessionId)).toBe(0)
  })

  it("a background task past its timeout is killed and reported as such", async () => {
    const { agent, checkpointer } = setup([{ toolCalls: [bash("sleep 5", { background: true, timeout_ms: 200 })] }, { text: "ok" }])
    await agent.send("start")
    await eventually(async () => (await agent.backgroundTasks()).length === 0)
    const completed = (await checkpointer.read(agent.sessionId)).at(-1)!.event
    expect(completed instanceof BackgroundCompleted && [completed.exitCode, completed.signal, completed.output]).toEqual([
      null,
      "SIGTERM",
      "\n[killed after the 200 ms timeout]"
    ])
  })
})

describe("Effect layers", () => {
  effectIt.live("file tools given a stale fold refuse with CheckpointConflictError and leave the disk alone", () =>
    Effect.gen(function*() {
      const workdir = tempDir("stale-work")
      yield* Effect.gen(function*() {
        const checkpointer = yield* Checkpointer
        const tools = yield* FileTools.FileTools
        yield* checkpointer.append("s", [new UserMessage({ content: "go", origin: "user" })])
        const stale = Session.fold(yield* Stream.runCollect(checkpointer.read("s")))
        yield* checkpointer.append("s", [new UserMessage({ content: "someone else", origin: "user" })])
        const error = yield* Effect.flip(tools.writeFile({ sessionId: "s", toolUseId: "t1", state: stale }, { path: "f.txt", content: "x" }))
        expect(error).toBeInstanceOf(CheckpointConflictError)
        expect(existsSync(join(workdir, "f.txt"))).toBe(false)
        expect(yield* checkpointer.head("s")).toBe(2)
        // With the current fold (or none) it goes through.
        const fresh = Session.fold(yield* Stream.runCollect(checkpointer.read("s")))
        yield* tools.writeFile({ sessionId: "s", toolUseId: "t2", state: fresh }, { path: "f.txt", content: "x" })
        expect(readFileSync(join(workdir, "f.txt"), "utf8")).toBe("x")
      }).pipe(Effect.provide(FileTools.layer().pipe(Layer.provideMerge(Layer.merge(Workspace.layer(workdir), MemoryCheckpointer.layer)))))
    }))


  const turns = [{ toolCalls: [{ name: "write_file", input: { path: "layer.txt", content: "via layers" } }] }, { text: "done" }]
  const program = Effect.gen(function*() {
    const agent = yield* Agent.LiteAgent
    const result = yield* agent.send("write via layers")
    const checkpoints = yield* agent.listCheckpoints(result.sessionId)
    return { result, checkpoints }
  })

  effectIt.live("the same program runs on the memory and the file backend by swapping the Checkpointer layer", () =>
    Effect.gen(function*() {
      for (const checkpointer of [MemoryCheckpointer.layer, FileCheckpointer.layer({ dir: tempDir("layer-log") })]) {
        const workdir = tempDir("layer-work")
        const { checkpoints, result } = yield* program.pipe(
          Effect.provide(
            Agent.layerWithWorkdir(workdir, { modelName: "scripted" }).pipe(
              Layer.provide(Layer.merge(checkpointer, scriptedLayer(turns)))
            )
          )
        )
        expect(result.text).toBe("done")
        expect(checkpoints.map((checkpoint) => checkpoint.files)).toEqual([["layer.txt"]])
        expect(readFileSync(join(workdir, "layer.txt"), "utf8")).toBe("via layers")
      }
    }))
})
