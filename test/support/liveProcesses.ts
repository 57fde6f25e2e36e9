/**
 * Processes as /proc shows them, for the tests of what a shell command leaves behind. A zombie
 * counts as gone: an orphan that died is removed only when init reaps it, which some inits
 * (this sandbox's) do lazily.
 */
import { readdirSync, readFileSync } from "node:fs"
import { expect } from "vitest"

interface ProcStat {
  readonly state: string
  readonly pgrp: number
}

const statOf = (pid: number): ProcStat | undefined => {
  let text: string
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8")
  } catch {
    return undefined
  }
  // "pid (comm) state ppid pgrp …"; comm may itself contain spaces and parentheses.
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ")
  return { state: fields[0] ?? "", pgrp: Number(fields[2]) }
}

const alive = (stat: ProcStat | undefined): stat is ProcStat => stat !== undefined && stat.state !== "Z" && stat.state !== "X"

/** Whether `pid` is a live process. */
export const processRunning = (pid: number): boolean => alive(statOf(pid))

/** The live processes of process group `pgid`. */
export const runningInGroup = (pgid: number): Array<number> =>
  readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => {
      const stat = statOf(pid)
      return alive(stat) && stat.pgrp === pgid
    })

/** The pid a command wrote to `file` (`echo $! > file`); the command has finished writing it. */
export const pidIn = (file: string): number => {
  const pid = Number(readFileSync(file, "utf8").trim())
  expect(Number.isInteger(pid) && pid > 0).toBe(true)
  return pid
}

/** Kills whatever a test left running (or a failing test leaked). */
export const killAll = (pids: Array<number>) => {
  for (const pid of pids.splice(0)) {
    try {
      process.kill(pid, "SIGKILL")
    } catch {
      // already gone
    }
  }
}
