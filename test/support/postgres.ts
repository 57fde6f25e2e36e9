/**
 * A throwaway PostgreSQL server for the tests: a fresh cluster from the machine's own binaries
 * (Debian's `postgresql` package: `/usr/lib/postgresql/<version>/bin`, or `PG_BIN`) in a
 * temporary directory, on a free loopback port. PostgreSQL refuses to run as root, so when the
 * tests do, the cluster belongs to (and runs as) the `postgres` user. Start one per test file.
 */
import { execFileSync } from "node:child_process"
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { tmpdir, userInfo } from "node:os"
import { join } from "node:path"

export interface PostgresServer {
  /** `postgres://postgres@127.0.0.1:<port>/postgres` (trust authentication: no password). */
  readonly url: string
  readonly host: string
  readonly port: number
  /** A role that must give its password (scram-sha-256); every other role is trusted. */
  readonly passwordRole: { readonly user: string; readonly password: string }
  /** Run SQL as the superuser through psql; returns its unaligned, tuples-only output. */
  readonly psql: (sql: string) => string
  /** Stop as a crash would (`pg_ctl stop -m immediate`): no shutdown checkpoint, recovery on the next start. */
  readonly crash: () => void
  /** Start it again after a stop or a crash (same data, same port). */
  readonly start: () => void
  /** Stop it and remove its files. */
  readonly destroy: () => void
}

/** The directory holding `initdb` and `pg_ctl`: `PG_BIN`, or the newest `/usr/lib/postgresql/<version>/bin`. */
export const postgresBin = (): string => {
  const fromEnv = process.env.PG_BIN
  if (fromEnv !== undefined && existsSync(join(fromEnv, "initdb"))) return fromEnv
  const root = "/usr/lib/postgresql"
  const versions = existsSync(root)
    ? readdirSync(root).filter((version) => existsSync(join(root, version, "bin", "initdb"))).sort((a, b) => Number(b) - Number(a))
    : []
  if (versions[0] === undefined) {
    throw new Error("no PostgreSQL binaries: install Debian's postgresql package (.ci/run does), or set PG_BIN to the directory holding initdb")
  }
  return join(root, versions[0], "bin")
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))))
    })
  })

export interface StartOptions {
  /** Addresses to listen on besides 127.0.0.1 (e.g. a veth toward a network namespace); clients from anywhere are trusted. */
  readonly listenAddresses?: ReadonlyArray<string>
  /** Server settings passed as `-c name=value` (e.g. shared_preload_libraries). */
  readonly settings?: Readonly<Record<string, string>>
}

export const startPostgres = async (startOptions: StartOptions = {}): Promise<PostgresServer> => {
  const bin = postgresBin()
  const asRoot = userInfo().uid === 0
  const base = mkdtempSync(join(tmpdir(), "lite-agent-pg-"))
  const data = join(base, "data")
  if (asRoot) {
    // The server's own user must own its directory; the path up to it must be traversable.
    const owner = execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim()
    const group = execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim()
    chownSync(base, Number(owner), Number(group))
    chmodSync(base, 0o700)
  }
  const run = (command: string, args: ReadonlyArray<string>) =>
    execFileSync(asRoot ? "runuser" : join(bin, command), asRoot ? ["-u", "postgres", "--", join(bin, command), ...args] : args, {
      stdio: "pipe",
      encoding: "utf8"
    })
  run("initdb", ["-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-instructions"])
  const passwordRole = { user: "lite_agent_password", password: "correct-horse-battery" }
  writeFileSync(
    join(data, "pg_hba.conf"),
    `local all all trust\nhost all ${passwordRole.user} 127.0.0.1/32 scram-sha-256\nhost all all 127.0.0.1/32 trust\n` +
      (startOptions.listenAddresses === undefined ? "" : "host all all 0.0.0.0/0 trust\n")
  )
  const port = await freePort()
  const listen = ["127.0.0.1", ...(startOptions.listenAddresses ?? [])].join(",")
  const settings = Object.entries(startOptions.settings ?? {}).map(([name, value]) => ` -c ${name}=${value}`).join("")
  const options = `-p ${port} -c listen_addresses=${listen} -k ${base} -c max_connections=100${settings}`
  const start = () => run("pg_ctl", ["-D", data, "-l", join(base, "server.log"), "-o", options, "-w", "-t", "60", "start"])
  start()
  const psql = (sql: string) =>
    execFileSync(join(bin, "psql"), ["-h", "127.0.0.1", "-p", String(port), "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-At", "-c", sql], {
      stdio: "pipe",
      encoding: "utf8"
    }).trim()
  psql(`CREATE ROLE ${passwordRole.user} LOGIN SUPERUSER PASSWORD '${passwordRole.password}'`)
  return {
    passwordRole,
    psql,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    host: "127.0.0.1",
    port,
    crash: () => run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"]),
    start,
    destroy: () => {
      try {
        run("pg_ctl", ["-D", data, "-m", "fast", "-w", "stop"])
      } catch {
        // Already stopped.
      }
      rmSync(base, { recursive: true, force: true })
    }
  }
}
