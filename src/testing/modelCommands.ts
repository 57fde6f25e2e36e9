/**
 * The model-based property: random command sequences (fast-check `commands`) run on the backend
 * and on an in-memory model, compared after every command.
 */
import assert from "node:assert/strict"
import { Effect, Exit, FastCheck as fc, type Layer } from "effect"
import type { Checkpointer } from "../core/Checkpointer.js"
import { CheckpointConflictError, InvalidSeqError } from "../core/errors.js"
import type { SessionEventEncoded } from "../core/events.js"
import { encodedEvents, readAll } from "./helpers.js"
import { type ConformanceOptions, type ConformanceSuite, ReopenableBackend } from "./runner.js"

/** The events the model appends: small, of three kinds. */
const simpleEvent: fc.Arbitrary<SessionEventEncoded> = fc.oneof(
  fc.string({ maxLength: 40 }).map((text): SessionEventEncoded => ({ _tag: "UserMessage", content: text, origin: "user" })),
  fc.string({ maxLength: 40 }).map((text): SessionEventEncoded => ({
    _tag: "AssistantMessage",
    content: [{ type: "text", text }]
  })),
  fc.tuple(fc.string({ minLength: 1, maxLength: 8 }), fc.fullUnicodeString({ maxLength: 20 })).map((
    [id, text]
  ): SessionEventEncoded => ({ _tag: "ToolResult", toolUseId: id, toolName: "bash", content: text, isError: false }))
)

interface Model {
  /** Keyed by symbolic name ("a", "b", "c"); the real session id adds a per-run prefix. */
  readonly sessions: Map<string, Array<SessionEventEncoded>>
}

const SESSION_NAMES = ["a", "b", "c"] as const

type Cmd<E> = fc.AsyncCommand<Model, ReopenableBackend<E>>

const valueOf = <A>(exit: Exit.Exit<A, unknown>, what: string): A => {
  if (Exit.isSuccess(exit)) return exit.value
  return assert.fail(`${what} failed unexpectedly: ${String(exit.cause)}`)
}
const errorOf = (exit: Exit.Exit<unknown, unknown>): unknown =>
  Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined

/** After every mutation: each session's head and contents equal the model's. */
const compareAll = async <E>(model: Model, real: ReopenableBackend<E>, after: string) => {
  for (const name of SESSION_NAMES) {
    const id = real.id(name)
    const expected = model.sessions.get(name) ?? []
    const [head, stored] = valueOf(await real.run((c) => Effect.zip(c.head(id), readAll(c, id))), `${after}: read ${name}`)
    assert.equal(head, expected.length, `${after}: head of ${name}`)
    assert.deepEqual(stored.map((s) => s.seq), expected.map((_, i) => i + 1), `${after}: seqs of ${name}`)
    assert.deepEqual(encodedEvents(stored), expected, `${after}: events of ${name}`)
  }
}

type ExpectMode = { readonly kind: "none" } | { readonly kind: "current" } | { readonly kind: "offset"; readonly by: number }

const expectedHeadFor = (mode: ExpectMode, head: number): number | undefined =>
  mode.kind === "none" ? undefined : mode.kind === "current" ? head : Math.max(0, head + mode.by)

const expectModeArb: fc.Arbitrary<ExpectMode> = fc.oneof(
  fc.constant<ExpectMode>({ kind: "none" }),
  fc.constant<ExpectMode>({ kind: "current" }),
  fc.constantFrom(-2, -1, 1, 3).map((by): ExpectMode => ({ kind: "offset", by }))
)

const commandArbitraries = <E>(reopen: boolean): Array<fc.Arbitrary<Cmd<E>>> => {
  const nameArb = fc.constantFrom(...SESSION_NAMES)
  const check = () => true
  const commands: Array<fc.Arbitrary<Cmd<E>>> = [
    fc.tuple(nameArb, fc.array(simpleEvent, { maxLength: 4 }), expectModeArb).map(([name, events, mode]) => ({
      check,
      async run(model: Model, real: ReopenableBackend<E>) {
        const stored = model.sessions.get(name)
        const head = stored?.length ?? 0
        const expected = expectedHeadFor(mode, head)
        const exit = await real.run((c) => c.append(real.id(name), events, expected))
        if (expected !== undefined && expected !== head) {
          const error: unknown = errorOf(exit)
          assert.ok(error instanceof CheckpointConflictError, `append expecting ${expected}: got ${String(exit)}`)
          assert.deepEqual([error.sessionId, error.expected, error.actual], [real.id(name), expected, head])
        } else {
          assert.equal(valueOf(exit, "append"), head + events.length)
          if (events.length > 0) model.sessions.set(name, [...(stored ?? []), ...events])
        }
        await compareAll(model, real, this.toString())
      },
      toString: () => `append(${name}, ${events.length} events, ${JSON.stringify(mode)})`
    })),
    fc.tuple(nameArb, fc.nat({ max: 12 })).map(([name, sinceSeq]) => ({
      check,
      async run(model: Model, real: ReopenableBackend<E>) {
        const expected = (model.sessions.get(name) ?? []).slice(sinceSeq)
        const stored = valueOf(await real.run((c) => readAll(c, real.id(name), sinceSeq)), "read")
        assert.deepEqual(stored.map((s) => s.seq), expected.map((_, i) => sinceSeq + i + 1), this.toString())
        assert.deepEqual(encodedEvents(stored), expected, this.toString())
      },
      toString: () => `read(${name}, sinceSeq ${sinceSeq})`
    })),
    fc.constant<Cmd<E>>({
      check,
      async run(model: Model, real: ReopenableBackend<E>) {
        const ids = new Map(SESSION_NAMES.map((name) => [real.id(name), name]))
        const listed = valueOf(await real.run((c) => c.list()), "list").filter((s) => ids.has(s.id))
        assert.deepEqual(listed.map((s) => ids.get(s.id)).sort(), [...model.sessions.keys()].sort(), "listed sessions")
        for (let i = 1; i < listed.length; i++) {
          assert.ok(listed[i - 1]!.mtime.getTime() >= listed[i]!.mtime.getTime(), "most recent first")
        }
      },
      toString: () => "list()"
    }),
    nameArb.map((name) => ({
      check,
      async run(model: Model, real: ReopenableBackend<E>) {
        valueOf(await real.run((c) => c.delete(real.id(name))), "delete")
        model.sessions.delete(name)
        await compareAll(model, real, this.toString())
      },
      toString: () => `delete(${name})`
    })),
    fc.tuple(nameArb, fc.nat({ max: 14 }), expectModeArb).map(([name, toSeq, mode]) => ({
      check,
      async run(model: Model, real: ReopenableBackend<E>) {
        const stored = model.sessions.get(name)
        const head = stored?.length ?? 0
        const expected = expectedHeadFor(mode, head)
        const exit = await real.run((c) => c.truncate(real.id(name), toSeq, expected))
        if (expected !== undefined && expected !== head) {
          const error: unknown = errorOf(exit)
          assert.ok(error instanceof CheckpointConflictError, `truncate expecting ${expected}: got ${String(exit)}`)
          assert.deepEqual([error.expected, error.actual], [expected, head])
        } else if (toSeq > head) {
          assert.ok(errorOf(exit) instanceof InvalidSeqError, `truncate past head: got ${String(exit)}`)
        } else {
          assert.equal(valueOf(exit, "truncate"), toSeq)
          if (stored !== undefined && toSeq < head) model.sessions.set(name, stored.slice(0, toSeq))
        }
        await compareAll(model, real, this.toString())
      },
      toString: () => `truncate(${name}, ${toSeq}, ${JSON.stringify(mode)})`
    }))
  ]
  if (reopen) {
    commands.push(fc.constant<Cmd<E>>({
      check,
      async run(model: Model, real: ReopenableBackend<E>) {
        await real.reopen()
        await compareAll(model, real, "reopen")
      },
      toString: () => "reopen()"
    }))
  }
  return commands
}

const runModelProperty = async <E>(layer: Layer.Layer<Checkpointer, E>, options: ConformanceOptions) => {
  await fc.assert(
    fc.asyncProperty(
      fc.commands(commandArbitraries<E>(options.reopen ?? false), { maxCommands: options.maxCommands ?? 40, size: "max" }),
      async (commands) => {
        const real = new ReopenableBackend(layer)
        try {
          await fc.asyncModelRun(() => ({ model: { sessions: new Map() }, real }), commands)
          await real.deleteSessions()
        } finally {
          await real.dispose()
        }
      }
    ),
    { numRuns: options.propertyRuns ?? 200, ...options.fastCheck }
  )
}

export const modelBasedProperties = <E>({ layer, options, runner, timeoutMs }: ConformanceSuite<E>): void => {
  runner.describe("model-based properties", () => {
    runner.it(
      "random command sequences behave like the model",
      () => runModelProperty(layer, options),
      Math.max(timeoutMs, 600_000)
    )
  })
}
