/**
 * Is a lock's holder alive, and which kernel does this process run on (the protocol's "Death"
 * paragraph, lockFile.ts): each lock service listens on a Unix socket in the locks directory,
 * which the kernel closes when the process dies, whatever namespace it ran in.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import net from "node:net"
import { hostname, uptime } from "node:os"
import { join } from "node:path"
import { errnoOf as codeOf } from "../internal/causes.js"
import { type LockRecord, type Owner, OWNER_PREFIX } from "./lockRecord.js"

/** Unix socket paths are limited (104 bytes on macOS, 108 on Linux, terminator included). */
const MAX_SOCKET_PATH_BYTES = 103

const readKernelIdentity = (): string => {
  try {
    // Linux's boot id is the kernel's: containers see their host's.
    return `linux:${fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()}`
  } catch {
    // Not Linux, or no /proc (some sandboxes): fall through.
  }
  if (process.platform === "darwin") {
    try {
      const uuid = execFileSync("sysctl", ["-n", "kern.bootsessionuuid"], { encoding: "utf8", timeout: 2_000 }).trim()
      if (uuid.length > 0) return `darwin:${uuid}`
    } catch {
      // Fall through.
    }
  }
  // Host name and boot minute: two processes may disagree (then they use the lease), never
  // two kernels agree by accident.
  return `${process.platform}:${hostname()}:${Math.floor((Date.now() / 1000 - uptime()) / 60)}`
}

let kernel: { readonly pid: number; readonly identity: string } | undefined
/**
 * Which kernel this process runs on (computed once per process: keyed by pid, because a process
 * started from the command's startup snapshot begins with the heap of the one that built it,
 * maybe before a reboot).
 */
export const kernelIdentity = (): string => {
  if (kernel?.pid !== process.pid) kernel = { pid: process.pid, identity: readKernelIdentity() }
  return kernel.identity
}

/**
 * Listen on the liveness socket of the owner `token`. Without one (a directory path too long for
 * a socket address, a file system without sockets) others judge this owner's locks by their
 * lease alone.
 */
export const listenForLiveness = (locksDir: string, token: string) =>
  new Promise<(Owner["socket"] & { readonly id: string }) | undefined>((resolve) => {
    const name = `${OWNER_PREFIX}${token}`
    const path = join(locksDir, name)
    if (Buffer.byteLength(path) > MAX_SOCKET_PATH_BYTES) return resolve(undefined)
    // Connections are only ever probes: close them at once.
    const server = net.createServer((connection) => connection.destroy())
    server.once("error", () => resolve(undefined))
    server.listen({ path, exclusive: true }, () => {
      // Never what keeps a process alive.
      server.unref()
      try {
        const stat = fs.lstatSync(path, { bigint: true })
        resolve({ name, server, id: `${stat.dev}:${stat.ino}` })
      } catch {
        server.close()
        resolve(undefined)
      }
    })
  })

type Connection = "accepted" | "refused" | "unknown"

export const connect = (path: string): Promise<Connection> =>
  new Promise((resolve) => {
    const connection = net.connect({ path })
    connection.once("connect", () => {
      connection.destroy()
      resolve("accepted")
    })
    connection.once("error", (error: NodeJS.ErrnoException) =>
      // EAGAIN: Linux's answer when the accept queue is full, so someone listens.
      resolve(error.code === "ECONNREFUSED" ? "refused" : error.code === "EAGAIN" ? "accepted" : "unknown"))
  })

const socketIdAt = (path: string): string | undefined => {
  try {
    const stat = fs.lstatSync(path, { bigint: true })
    return stat.isSocket() ? `${stat.dev}:${stat.ino}` : undefined
  } catch {
    return undefined
  }
}

const pidGone = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return false
  } catch (error) {
    return codeOf(error) === "ESRCH"
  }
}

/**
 * Is the holder of `record` provably dead? Only for a holder on this kernel whose socket
 * refuses connections, through the socket inode it bound; on macOS, where a full accept queue
 * refuses too, its pid must also be gone (no PID namespaces there).
 */
export const holderIsDead = async (owner: Owner, record: LockRecord): Promise<boolean> => {
  if (record.socket === undefined || record.socketId === undefined || record.kernel !== owner.kernel) return false
  const path = join(owner.locksDir, record.socket)
  if ((await connect(path)) !== "refused") return false
  // Another mount of the directory (FUSE, some NFS set-ups) refuses connections to a live socket.
  if (socketIdAt(path) !== record.socketId) return false
  return process.platform === "linux" || pidGone(record.pid)
}
