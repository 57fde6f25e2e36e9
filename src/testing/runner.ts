/**
 * The conformance suite's plumbing: its options, the test runner it registers with, and how a
 * test opens the backend under test.
 */
import { Effect, type Exit, type FastCheck as fc, type Layer, ManagedRuntime, Schema, type Scope } from "effect"
import { Checkpointer, type CheckpointerService } from "../core/Checkpointer.js"
import { decodeOptionsOrThrow, Flag, isPlainObject, PositiveInteger, PositiveMilliseconds, recognised } from "../core/internal/options.js"

export interface ConformanceRunner {
  readonly describe: (name: string, body: () => void) => unknown
  readonly it: (name: string, body: () => Promise<void>, timeoutMs?: number) => unknown
}

const isRunner = (value: unknown): value is ConformanceRunner =>
  typeof value === "object" && value !== null && "describe" in value && typeof value.describe === "function" &&
  "it" in value && typeof value.it === "function"

export const ConformanceOptions = Schema.Struct({
  /**
   * The backend is persistent: building `layer` again sees what earlier builds stored
   * (a file directory, a database file). Property sequences then mix close-and-reopen
   * steps in, and the example tests check that data survives a reopen.
   */
  reopen: Schema.optional(Flag),
  /** Random command sequences in the property test. Default 200. */
  propertyRuns: Schema.optional(PositiveInteger),
  /** Longest random command sequence. Default 40. */
  maxCommands: Schema.optional(PositiveInteger),
  /** Extra fast-check parameters, e.g. `{ seed, path }` to replay a reported failure (passed to fast-check as given). */
  fastCheck: Schema.optional(
    recognised("an object of fast-check parameters", (value): value is fc.Parameters<unknown> => isPlainObject(value))
  ),
  /** Per-test timeout in ms. Default 120000. */
  timeoutMs: Schema.optional(PositiveMilliseconds),
  /** Defaults to the runner's global `describe`/`it`. */
  runner: Schema.optional(recognised("a runner { describe, it }", isRunner))
})
export interface ConformanceOptions extends Schema.Schema.Type<typeof ConformanceOptions> {}

const globalRunner = (): ConformanceRunner => {
  const globals = globalThis as { describe?: ConformanceRunner["describe"]; it?: ConformanceRunner["it"] }
  if (typeof globals.describe !== "function" || typeof globals.it !== "function") {
    throw new Error(
      "checkpointerConformance: no global describe/it found; pass { runner: { describe, it } } from your test runner"
    )
  }
  return { describe: globals.describe, it: globals.it }
}

let uniqueCounter = 0
/** A session-id prefix no other test (or earlier run on a persistent store) uses. */
export const uniquePrefix = (label: string): string =>
  `c${Date.now().toString(36)}${process.pid.toString(36)}${(uniqueCounter++).toString(36)}-${label}-`

export type ConformanceTestBody = (c: CheckpointerService, prefix: string) => Effect.Effect<void, unknown, Scope.Scope>

/** What each group of conformance tests registers its tests with. */
export interface ConformanceSuite<E> {
  readonly runner: ConformanceRunner
  readonly layer: Layer.Layer<Checkpointer, E>
  readonly options: ConformanceOptions
  readonly timeoutMs: number
  /** Registers a test that runs `body` on a fresh build of `layer`, under a session-id prefix of its own. */
  readonly test: (title: string, body: ConformanceTestBody) => unknown
}

/** Decodes `input` first, so a misspelt option throws before anything is registered. */
export const conformanceSuite = <E>(layer: Layer.Layer<Checkpointer, E>, input: ConformanceOptions): ConformanceSuite<E> => {
  const options = decodeOptionsOrThrow(ConformanceOptions, input, "conformance options")
  const runner = options.runner ?? globalRunner()
  const timeoutMs = options.timeoutMs ?? 120_000
  const test = (title: string, body: ConformanceTestBody) =>
    runner.it(
      title,
      () =>
        Effect.runPromise(
          Effect.scoped(Effect.flatMap(Checkpointer, (c) => body(c, uniquePrefix("t")))).pipe(Effect.provide(layer))
        ),
      timeoutMs
    )
  return { runner, layer, options, timeoutMs, test }
}

/** A backend kept open across calls, which a reopen closes and builds again from the same layer. */
export class ReopenableBackend<E> {
  private runtime: ManagedRuntime.ManagedRuntime<Checkpointer, E>
  /** A fresh id space per run keeps runs independent on persistent stores. */
  private readonly prefix = uniquePrefix("m")
  constructor(private readonly layer: Layer.Layer<Checkpointer, E>) {
    this.runtime = ManagedRuntime.make(layer)
  }
  id(name: string): string {
    return this.prefix + name
  }
  run<A>(use: (c: CheckpointerService) => Effect.Effect<A, unknown>): Promise<Exit.Exit<A, unknown>> {
    return this.runtime.runPromiseExit(Effect.flatMap(Checkpointer, use))
  }
  async reopen(): Promise<void> {
    await this.runtime.dispose()
    this.runtime = ManagedRuntime.make(this.layer)
  }
  /**
   * Delete the sessions of this run: a persistent store the suite shares would otherwise grow by
   * every run's sessions, and what reads the whole store (`list`, `gc`, `du`) with it.
   */
  async deleteSessions(): Promise<void> {
    await this.runtime.runPromise(Effect.flatMap(Checkpointer, (c) =>
      Effect.flatMap(c.list(), (sessions) =>
        Effect.forEach(sessions.filter((session) => session.id.startsWith(this.prefix)), (session) => c.delete(session.id), { discard: true }))))
  }
  dispose(): Promise<void> {
    return this.runtime.dispose()
  }
}
