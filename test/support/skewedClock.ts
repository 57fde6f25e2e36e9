/**
 * Preload for a worker process whose wall clock is set wrong: `Date.now()` and `new Date()` read
 * the real time plus the milliseconds written in the file named by
 * `LITE_AGENT_TEST_CLOCK_OFFSET_FILE`, read again at every reading of the clock — so a test
 * moves the clock of this one process, even while it waits (`setClockOffset`). Monotonic clocks
 * (`performance.now()`, `process.hrtime`) and the file system's times keep running true, as they
 * do when an administrator or NTP steps one machine's clock.
 *
 *   node --import tsx --import ./test/support/skewedClock.ts <worker>
 */
import { readFileSync, renameSync, writeFileSync } from "node:fs"

export const CLOCK_OFFSET_FILE = "LITE_AGENT_TEST_CLOCK_OFFSET_FILE"

/** Set the offset of every process reading `file`, in one step (a rename: never seen half-written). */
export const setClockOffset = (file: string, offsetMs: number) => {
  writeFileSync(`${file}.next`, String(offsetMs))
  renameSync(`${file}.next`, file)
}

const file = process.env[CLOCK_OFFSET_FILE]
if (file !== undefined) {
  const offsetMs = () => {
    try {
      return Number(readFileSync(file, "utf8"))
    } catch {
      return 0
    }
  }
  const RealDate = Date
  const realNow = RealDate.now.bind(RealDate)
  RealDate.now = () => realNow() + offsetMs()
  // `new Date()` alone reads the clock; `new Date(value)` and `Date()` are left as they are.
  globalThis.Date = new Proxy(RealDate, {
    construct: (target, args, newTarget) => Reflect.construct(target, args.length === 0 ? [RealDate.now()] : args, newTarget)
  })
}
