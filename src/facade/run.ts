import { Cause, Effect, Exit, Fiber, type ManagedRuntime, Stream } from "effect"

/** The value of an exit, or the very error it failed with (not a `FiberFailure` wrapper), so `instanceof` works. */
export const valueOrThrow = <A, E>(exit: Exit.Exit<A, E>): A => {
  if (Exit.isSuccess(exit)) return exit.value
  throw Cause.squash(exit.cause)
}

/** Run an effect for a promise caller: resolve with its value, or reject with its own error. */
export const runForPromise = async <A, E, R>(
  runtime: ManagedRuntime.ManagedRuntime<R, unknown>,
  effect: Effect.Effect<A, E, R>
): Promise<A> => valueOrThrow(await runtime.runPromiseExit(effect))

/**
 * A stream as an async iterable for a promise caller: errors are the stream's own error
 * instances, and leaving the loop early (break, return, throw) interrupts the stream.
 *
 * Items are handed over one at a time: the stream is suspended on each until the consumer asks
 * for the next, so a slow consumer holds the producer back instead of letting items pile up.
 * (Not `Stream.toAsyncIterableRuntime`: it hides the fiber, which `onFiber` hands out so the
 * agent's close() can interrupt it, and reports an interruption as an `InterruptedException`.)
 */
export async function* iterateStream<A, E, R>(
  runtime: ManagedRuntime.ManagedRuntime<R, unknown>,
  stream: Stream.Stream<A, E, R>,
  options: {
    /** Told of the fiber running the stream, e.g. to interrupt it from outside. */
    readonly onFiber?: (fiber: Fiber.RuntimeFiber<void, unknown>) => void
    /** What to throw when the stream was interrupted from outside (default: the interruption). */
    readonly interrupted?: () => unknown
  } = {}
): AsyncGenerator<A, void, undefined> {
  let offered: { readonly item: A; readonly take: () => void } | undefined
  let wake: (() => void) | undefined
  let finished: Exit.Exit<void, unknown> | undefined
  const fiber = runtime.runFork(
    Stream.runForEach(stream, (item) =>
      Effect.async<void>((resume) => {
        offered = { item, take: () => resume(Effect.void) }
        wake?.()
      }))
  )
  options.onFiber?.(fiber)
  fiber.addObserver((exit) => {
    finished = exit
    wake?.()
  })
  try {
    for (;;) {
      if (offered !== undefined) {
        const { item, take } = offered
        offered = undefined
        yield item
        take()
        continue
      }
      if (finished !== undefined) {
        if (Exit.isInterrupted(finished) && options.interrupted !== undefined) throw options.interrupted()
        return valueOrThrow(finished)
      }
      await new Promise<void>((resolve) => {
        wake = resolve
      })
      wake = undefined
    }
  } finally {
    if (finished === undefined) await Effect.runPromise(Fiber.interrupt(fiber))
  }
}
