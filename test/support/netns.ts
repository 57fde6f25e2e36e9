/**
 * Network namespaces joined to the host by a veth pair, so a process started in one reaches
 * the host only over TCP through its own interface — a small stand-in for another machine.
 * Needs root (`ip netns`).
 */
import { execFileSync } from "node:child_process"

export interface NetworkNamespace {
  readonly name: string
  /** The host's address on this namespace's link (the namespace's default route). */
  readonly hostAddress: string
  /** Prefix for a command to run it inside the namespace. */
  readonly launcher: ReadonlyArray<string>
  readonly destroy: () => void
}

const ip = (...args: ReadonlyArray<string>) => execFileSync("ip", args, { stdio: "pipe" })

/** Namespace `index` (1-250) of this process: 10.213.<index>.2 inside, 10.213.<index>.1 on the host. */
export const createNetworkNamespace = (index: number): NetworkNamespace => {
  const name = `la${process.pid}n${index}`
  const hostSide = `lah${process.pid % 100000}n${index}`.slice(0, 15)
  const inside = `lai${process.pid % 100000}n${index}`.slice(0, 15)
  const hostAddress = `10.213.${index}.1`
  try {
    ip("netns", "del", name)
  } catch {
    // Not left over from an earlier run.
  }
  ip("netns", "add", name)
  ip("link", "add", hostSide, "type", "veth", "peer", "name", inside)
  ip("link", "set", inside, "netns", name)
  ip("addr", "add", `${hostAddress}/24`, "dev", hostSide)
  ip("link", "set", hostSide, "up")
  const inNamespace = (...args: ReadonlyArray<string>) => ip("netns", "exec", name, "ip", ...args)
  inNamespace("addr", "add", `10.213.${index}.2/24`, "dev", inside)
  inNamespace("link", "set", inside, "up")
  inNamespace("link", "set", "lo", "up")
  inNamespace("route", "add", "default", "via", hostAddress)
  return {
    name,
    hostAddress,
    launcher: ["ip", "netns", "exec", name],
    destroy: () => {
      try {
        // Deleting the namespace deletes its end of the veth pair, and with it the host's end.
        ip("netns", "del", name)
      } catch {
        // Already gone.
      }
    }
  }
}
