/**
 * A worker's line to its parent, in the pipe before the call returns. `process.stdout.write` to
 * a pipe writes at once only while the pipe has room: once the parent falls behind (a loaded
 * machine), libuv queues the rest in the process, and a SIGKILL then loses lines the worker
 * believed said — a crash test would see appends that no line announced.
 */
import { writeSync } from "node:fs"

export const sayNow = (line: string): void => {
  const bytes = Buffer.from(`${line}\n`)
  let written = 0
  while (written < bytes.length) {
    try {
      written += writeSync(1, bytes, written)
    } catch (error) {
      // The pipe is full (stdout is non-blocking): wait for the parent to read, then go on.
      if ((error as NodeJS.ErrnoException).code !== "EAGAIN") throw error
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1)
    }
  }
}
