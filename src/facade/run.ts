import { Cause, Effect, Exit, type ManagedRuntime } from "effect"

/**
 * Run an effect for a promise caller: resolve with its value, or reject with the very
 * error it failed with (not a `FiberFailure` wrapper), so `instanceof` works.
 */
export const runForPromise = async <A, E, R>(
  runtime: ManagedRuntime.ManagedRuntime<R, unknown>,
  effect: Effect.Effect<A, E, R>
): Promise<A> => {
  const exit = await runtime.runPromiseExit(effect)
  if (Exit.isSuccess(exit)) return exit.value
  throw Cause.squash(exit.cause)
}
