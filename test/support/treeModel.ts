/**
 * The session tree against a model (run by test/sessionTree.property.test.ts on memory, file and
 * SQLite, and test/sessionTree.postgres.test.ts on PostgreSQL), with the real agent, real commands and a real workdir:
 * random prompts (file-tool and shell writes and deletes, the user's own edits before them),
 * restores, undos, redos, switches to other branches and forks in the same workdir (fast-check
 * commands). After every command the conversation (its checkpoints), the tree's current branch
 * and the covered workspace are the model's, and every event ever appended to any session is
 * still in its log, in place.
 */
import { lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import fc from "fast-check"
import { expect } from "vitest"
import { createLiteAgent, type LiteAgent, type PromiseCheckpointer, RestoreRefusedError, type StoredEvent } from "../../src/index.js"
import { scripted, type ScriptedTurn } from "../../src/provider.js"
import { tempDir } from "./agent.js"

const PATHS = ["a.txt", "b.txt", "d/c.txt"] as const

type Operation =
  | { readonly kind: "tool-write"; readonly path: string; readonly text: string }
  | { readonly kind: "shell-write"; readonly path: string; readonly text: string }
  | { readonly kind: "shell-delete"; readonly path: string }

const operation: fc.Arbitrary<Operation> = fc.oneof(
  fc.record({ kind: fc.constant("tool-write" as const), path: fc.constantFrom(...PATHS), text: fc.constantFrom("one", "two", "") }),
  fc.record({ kind: fc.constant("shell-write" as const), path: fc.constantFrom(...PATHS), text: fc.constantFrom("three", "four") }),
  fc.record({ kind: fc.constant("shell-delete" as const), path: fc.constantFrom(...PATHS) })
)

const parentOf = (file: string) => (file.includes("/") ? file.slice(0, file.lastIndexOf("/")) : ".")

const toolCall = (op: Operation) =>
  op.kind === "tool-write"
    ? { name: "write_file", input: { path: op.path, content: op.text } }
    : op.kind === "shell-write"
    ? { name: "shell", input: { command: `mkdir -p ${parentOf(op.path)} && printf %s '${op.text}' > ${op.path}` } }
    : { name: "shell", input: { command: `rm -f ${op.path}` } }

/** Every file and directory under `dir`: what the covered workspace holds. */
const workspaceOf = (dir: string, base = ""): Record<string, string> => {
  const result: Record<string, string> = {}
  for (const name of readdirSync(join(dir, base)).sort()) {
    const relative = base === "" ? name : `${base}/${name}`
    const stat = lstatSync(join(dir, relative))
    if (stat.isDirectory()) {
      result[relative] = "dir"
      Object.assign(result, workspaceOf(dir, relative))
    } else result[relative] = readFileSync(join(dir, relative), "utf8")
  }
  return result
}

/** Where the session is, as the model knows it: the prompts of the current branch and the workspace there. */
interface Position {
  readonly prompts: ReadonlyArray<string>
  /** The workspace right before each of `prompts`. */
  readonly before: ReadonlyArray<Record<string, string>>
  readonly workspace: Record<string, string>
}

interface Model {
  current: Position
  /** The positions an undo goes back to, the last on top; the same for redo. */
  undo: Array<Position>
  redo: Array<Position>
  /** Each branch's tip as last seen, per session (by its leaf seq): where a switch goes. */
  tips: Map<string, Map<number, Position>>
  prompts: number
}

const tipsOf = (model: Model, sessionId: string) => {
  const known = model.tips.get(sessionId) ?? new Map<number, Position>()
  model.tips.set(sessionId, known)
  return known
}

interface Real {
  readonly agent: LiteAgent
  readonly checkpointer: PromiseCheckpointer
  readonly workdir: string
  /** Each session's log as it was after the last command: never shrinks, never changes in place. */
  readonly logs: Map<string, ReadonlyArray<StoredEvent>>
}

const check = async (model: Model, real: Real) => {
  const { agent } = real
  expect((await agent.listCheckpoints(agent.sessionId)).map((checkpoint) => checkpoint.prompt)).toEqual(model.current.prompts)
  expect(workspaceOf(real.workdir)).toEqual(model.current.workspace)
  const tree = await agent.tree(agent.sessionId)
  expect(tree.checkpoints.filter((checkpoint) => checkpoint.current).map((checkpoint) => checkpoint.prompt)).toEqual(model.current.prompts)
  expect(tree.branches.filter((branch) => branch.current).map((branch) => branch.leaf)).toEqual([tree.leaf])
  for (const sessionId of new Set([...real.logs.keys(), agent.sessionId])) {
    const log = await real.checkpointer.read(sessionId)
    const before = real.logs.get(sessionId) ?? []
    expect(log.slice(0, before.length)).toEqual(before)
    real.logs.set(sessionId, log)
  }
  // What the model knows of this position, by its leaf: where a switch to this branch goes.
  tipsOf(model, agent.sessionId).set(tree.leaf, model.current)
}

const refusalOf = async (attempt: Promise<unknown>) => {
  const error = await attempt.then(() => undefined, (caught: unknown) => caught)
  expect(error).toBeInstanceOf(RestoreRefusedError)
  return (error as RestoreRefusedError).refusals.map((refusal) => refusal.reason)
}

class Send implements fc.AsyncCommand<Model, Real> {
  constructor(readonly operations: ReadonlyArray<Operation>, readonly userEdit: { readonly path: string; readonly text: string } | undefined) {}
  check = () => true
  async run(model: Model, real: Real) {
    if (this.userEdit !== undefined) {
      mkdirSync(join(real.workdir, parentOf(this.userEdit.path)), { recursive: true })
      writeFileSync(join(real.workdir, this.userEdit.path), `user: ${this.userEdit.text}`)
    }
    const before = workspaceOf(real.workdir)
    const prompt = `prompt ${++model.prompts}`
    await real.agent.send(prompt)
    model.current = { prompts: [...model.current.prompts, prompt], before: [...model.current.before, before], workspace: workspaceOf(real.workdir) }
    await check(model, real)
  }
  toString = () => `send(${JSON.stringify(this.operations)}${this.userEdit === undefined ? "" : `, user ${JSON.stringify(this.userEdit)}`})`
}

class Restore implements fc.AsyncCommand<Model, Real> {
  constructor(readonly back: number) {}
  check = (model: Readonly<Model>) => model.current.prompts.length > 0
  async run(model: Model, real: Real) {
    const checkpoints = await real.agent.listCheckpoints(real.agent.sessionId)
    const index = Math.max(0, checkpoints.length - 1 - this.back)
    await real.agent.restore(real.agent.sessionId, checkpoints[index]!.seq, { includeUserEdits: true })
    model.undo.push(model.current)
    model.redo = []
    model.current = { prompts: model.current.prompts.slice(0, index), before: model.current.before.slice(0, index), workspace: model.current.before[index]! }
    await check(model, real)
  }
  toString = () => `restore(back ${this.back})`
}

class Undo implements fc.AsyncCommand<Model, Real> {
  check = () => true
  async run(model: Model, real: Real) {
    const back = model.undo.pop()
    if (back === undefined) {
      expect(await refusalOf(real.agent.undo(real.agent.sessionId))).toEqual(["nothing_to_undo"])
    } else {
      await real.agent.undo(real.agent.sessionId, { includeUserEdits: true })
      model.redo.push(model.current)
      model.current = back
    }
    await check(model, real)
  }
  toString = () => "undo"
}

class Redo implements fc.AsyncCommand<Model, Real> {
  check = () => true
  async run(model: Model, real: Real) {
    const forward = model.redo.pop()
    if (forward === undefined) {
      expect(await refusalOf(real.agent.redo(real.agent.sessionId))).toEqual(["nothing_to_redo"])
    } else {
      await real.agent.redo(real.agent.sessionId, { includeUserEdits: true })
      model.undo.push(model.current)
      model.current = forward
    }
    await check(model, real)
  }
  toString = () => "redo"
}

class Switch implements fc.AsyncCommand<Model, Real> {
  constructor(readonly pick: number) {}
  check = () => true
  async run(model: Model, real: Real) {
    const tree = await real.agent.tree(real.agent.sessionId)
    const tips = tipsOf(model, real.agent.sessionId)
    const others = tree.branches.filter((branch) => !branch.current && tips.has(branch.leaf))
    if (others.length === 0) return
    const target = others[this.pick % others.length]!
    await real.agent.switchBranch(real.agent.sessionId, target.leaf, { includeUserEdits: true })
    model.undo.push(model.current)
    model.redo = []
    model.current = tips.get(target.leaf)!
    await check(model, real)
  }
  toString = () => `switch(${this.pick})`
}

/** Fork the current session in the workdir, from `back` checkpoints before the last (or from its tip): the agent goes on in the fork. */
class Fork implements fc.AsyncCommand<Model, Real> {
  constructor(readonly back: number | undefined) {}
  check = () => true
  async run(model: Model, real: Real) {
    const source = real.agent.sessionId
    if ((real.logs.get(source)?.length ?? 0) === 0) {
      expect(await refusalOf(real.agent.fork(source))).toEqual(["not_a_checkpoint"])
      return
    }
    const checkpoints = await real.agent.listCheckpoints(source)
    const index = this.back === undefined || checkpoints.length === 0 ? undefined : Math.max(0, checkpoints.length - 1 - this.back)
    const forked = await real.agent.fork(source, index === undefined ? undefined : checkpoints[index]!.seq, { includeUserEdits: true })
    expect(real.agent.sessionId).toBe(forked.sessionId)
    expect((await real.agent.tree(forked.sessionId)).forkedFrom).toEqual({ session: source, at: real.logs.get(source)?.length ?? 0 })
    // The fork shares the source's branches up to the fork; what it does next is its own.
    const shared = new Map([...tipsOf(model, source)].filter(([leaf]) => leaf <= forked.forkedFrom.at))
    model.tips.set(forked.sessionId, shared)
    model.redo = []
    if (index === undefined) {
      model.undo = []
    } else {
      model.undo = [model.current]
      model.current = { prompts: model.current.prompts.slice(0, index), before: model.current.before.slice(0, index), workspace: model.current.before[index]! }
    }
    await check(model, real)
  }
  toString = () => `fork(${this.back === undefined ? "tip" : `back ${this.back}`})`
}

const send = fc.tuple(
  fc.array(operation, { minLength: 1, maxLength: 3 }),
  fc.option(fc.record({ path: fc.constantFrom(...PATHS), text: fc.constantFrom("x", "y") }), { nil: undefined })
).map(([operations, userEdit]) => new Send(operations, userEdit))

// Sends three times as often as each other command: a tree needs turns to branch from.
const commands = fc.commands([
  send,
  send,
  send,
  fc.nat({ max: 3 }).map((back) => new Restore(back)),
  fc.constant(new Undo()),
  fc.constant(new Redo()),
  fc.nat().map((pick) => new Switch(pick)),
  fc.option(fc.nat({ max: 3 }), { nil: undefined }).map((back) => new Fork(back))
], { maxCommands: 16, size: "max" })

/** Run the model against an agent on checkpointers made by `open`, `numRuns` times. */
export const runTreeModel = (open: () => PromiseCheckpointer, numRuns: number) =>
  fc.assert(
    fc.asyncProperty(commands, async (generated) => {
      // The model's replies, in order: one turn of tool calls and an answer per send (fast-check
      // hands the commands over wrapped).
      const unwrapped = (command: unknown) => (typeof command === "object" && command !== null && "cmd" in command ? command.cmd : command)
      const turns: Array<ScriptedTurn> = [...generated].flatMap((wrapped) => {
        const command = unwrapped(wrapped)
        return command instanceof Send ? [{ toolCalls: command.operations.map(toolCall) }, { text: "ok" }] : []
      })
      const workdir = tempDir("tree-model")
      writeFileSync(join(workdir, "a.txt"), "at the start")
      const checkpointer = open()
      const agent = createLiteAgent({ model: scripted(turns), workdir, checkpointer })
      try {
        const start = workspaceOf(workdir)
        const model: Model = { current: { prompts: [], before: [], workspace: start }, undo: [], redo: [], tips: new Map(), prompts: 0 }
        await fc.asyncModelRun(() => ({ model, real: { agent, checkpointer, workdir, logs: new Map() } }), generated)
      } finally {
        await agent.close()
        await checkpointer.close()
      }
    }),
    { numRuns }
  )
