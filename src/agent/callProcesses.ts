/**
 * The processes of one `shell` call and how they are stopped: its process group and session,
 * what left them but carries the call's environment mark, and their children — found through
 * /proc and remembered by pid and start time — SIGTERM, then SIGKILL after a grace. Without
 * /proc (not Linux), the process group only.
 */
import { readdirSync, readFileSync } from "node:fs"
import { errnoOf as errorCode } from "../backends/internal/causes.js"

/** Between SIGTERM and SIGKILL: long enough for a well-behaved command to clean up. */
export const KILL_GRACE_MS = 2_000
/** After SIGKILL, how long to wait for the call's processes to disappear before giving up on them. */
const POST_KILL_WAIT_MS = 1_000
const POLL_MS = 25

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Signal one process or (a negative id) a whole group; one already gone is not an error. */
export const sendSignal = (id: number, signal: NodeJS.Signals): void => {
  try {
    process.kill(id, signal)
  } catch {
    // ESRCH: nothing left to signal.
  }
}

/**
 * Whether any process of the group exists, for where /proc cannot be read. `kill(-pgid, 0)`
 * also counts zombies, so it may say yes for a group that is only waiting to be reaped.
 */
const groupExists = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0)
    return true
  } catch (error) {
    return errorCode(error) === "EPERM"
  }
}

interface ProcessInfo {
  readonly pid: number
  readonly ppid: number
  readonly pgrp: number
  readonly session: number
  /** Clock ticks since boot: with the pid, it tells a process from a later one given the same pid. */
  readonly startTicks: number
}

/** A process from its /proc stat line; undefined when it is gone, a zombie, or unreadable. */
const processInfo = (pid: number): ProcessInfo | undefined => {
  let stat: string
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  } catch {
    return undefined // exited while we looked
  }
  // "pid (comm) state ppid pgrp session … starttime (field 22) …"; comm may contain spaces and parentheses.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  // A zombie has finished; it only waits to be reaped (by an init that may do so lazily, or never).
  if (fields[0] === "Z" || fields[0] === "X") return undefined
  return { pid, ppid: Number(fields[1]), pgrp: Number(fields[2]), session: Number(fields[3]), startTicks: Number(fields[19]) }
}

/** Every running process but this one; undefined where /proc cannot be listed. */
const runningProcesses = (): Array<ProcessInfo> | undefined => {
  let entries: Array<string>
  try {
    entries = readdirSync("/proc")
  } catch {
    return undefined
  }
  const processes: Array<ProcessInfo> = []
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    const info = processInfo(Number(entry))
    if (info !== undefined) processes.push(info)
  }
  return processes
}

/** Whether the process's environment (as it was when it started) has a variable named `name`. */
const environmentHas = (pid: number, name: string): boolean => {
  try {
    return readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").some((entry) => entry.startsWith(`${name}=`))
  } catch {
    return false // gone, or not ours to read (another user's, or set-uid)
  }
}

/**
 * The environment variable that marks one call's processes. Its name, not only its value, is
 * the call's own, so the processes of a call made from inside a call carry both marks.
 */
export const CALL_MARK_PREFIX = "LITE_AGENT_SHELL_CALL_"

export interface CallProcesses {
  /** The call's processes still running; undefined where /proc cannot be listed. */
  readonly running: () => Array<ProcessInfo> | undefined
  /** How many distinct processes `running` has found so far. */
  readonly found: () => number
}

/**
 * Finds the processes of one call: those in its process group or session (the shell leads
 * both, and a plain `cmd &` stays in them), those that left them (`setsid`, a double fork)
 * but carry the call's environment mark, and children of any of these (one that also cleared
 * its environment). Each found process is remembered by pid and start time, so it is still
 * known once orphaned. Out of reach: a process that leaves the session, clears or overwrites
 * its environment, and whose parent of the call is gone by the time it is looked for.
 */
export const makeCallProcesses = (shellPid: number, markName: string): CallProcesses => {
  // Every process of the call started no earlier than its shell: only those need their environment read.
  const shellStartTicks = processInfo(shellPid)?.startTicks ?? 0
  const known = new Map<number, number>()
  const running = (): Array<ProcessInfo> | undefined => {
    const processes = runningProcesses()
    if (processes === undefined) return undefined
    const ofCall = new Map<number, ProcessInfo>()
    for (const candidate of processes) {
      if (
        candidate.pgrp === shellPid || candidate.session === shellPid || known.get(candidate.pid) === candidate.startTicks ||
        (candidate.startTicks >= shellStartTicks && environmentHas(candidate.pid, markName))
      ) ofCall.set(candidate.pid, candidate)
    }
    for (let grew = true; grew;) {
      grew = false
      for (const candidate of processes) {
        if (!ofCall.has(candidate.pid) && ofCall.has(candidate.ppid) && candidate.startTicks >= shellStartTicks) {
          ofCall.set(candidate.pid, candidate)
          grew = true
        }
      }
    }
    for (const found of ofCall.values()) known.set(found.pid, found.startTicks)
    return [...ofCall.values()]
  }
  return { running, found: () => known.size }
}

export interface Stopped {
  /** Processes found running and signalled (where /proc cannot be read: 1 for a group that existed, else 0). */
  readonly stopped: number
  /** Of those, still running when the wait after SIGKILL gave up. */
  readonly notStopped: number
}

/**
 * Stops every process of the call: SIGTERM once to the group and to each process found outside
 * it, then, after `KILL_GRACE_MS`, SIGKILL to all, polling /proc until none is left (a process
 * forked in the meantime — by a cleanup handler, say — is left its grace and killed with the
 * rest). Returns at once when there is none.
 */
export const stopCallProcesses = async (pgid: number, call: CallProcesses): Promise<Stopped> => {
  // A monotonic clock: setting the wall clock back must not stretch the wait.
  const termDeadline = performance.now() + KILL_GRACE_MS
  let killDeadline: number | undefined
  for (let first = true;; first = false) {
    const running = call.running()
    if (running === undefined) return stopGroupBlindly(pgid)
    if (running.length === 0) return { stopped: call.found(), notStopped: 0 }
    const now = performance.now()
    if (killDeadline === undefined && now >= termDeadline) killDeadline = now + POST_KILL_WAIT_MS
    if (killDeadline !== undefined && now >= killDeadline) return { stopped: call.found(), notStopped: running.length }
    if (first) {
      // The group as a whole: it also reaches a member forked after this scan.
      sendSignal(-pgid, "SIGTERM")
      for (const target of running) if (target.pgrp !== pgid) sendSignal(target.pid, "SIGTERM")
    } else if (killDeadline !== undefined) {
      sendSignal(-pgid, "SIGKILL")
      for (const target of running) sendSignal(target.pid, "SIGKILL")
    }
    await delay(POLL_MS)
  }
}

/** Without /proc: the process group only, and zombies count as running (see `groupExists`). */
const stopGroupBlindly = async (pgid: number): Promise<Stopped> => {
  if (!groupExists(pgid)) return { stopped: 0, notStopped: 0 }
  const goneWithin = async (ms: number) => {
    const deadline = performance.now() + ms
    while (groupExists(pgid)) {
      if (performance.now() >= deadline) return false
      await delay(POLL_MS)
    }
    return true
  }
  sendSignal(-pgid, "SIGTERM")
  if (await goneWithin(KILL_GRACE_MS)) return { stopped: 1, notStopped: 0 }
  sendSignal(-pgid, "SIGKILL")
  return { stopped: 1, notStopped: (await goneWithin(POST_KILL_WAIT_MS)) ? 0 : 1 }
}
