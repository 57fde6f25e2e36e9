/**
 * The built package works for an outside consumer: `npm run build` emits dist/, and a
 * project that depends on `@lite-agent/sdk` resolves every documented subpath by name,
 * both at run time (node) and for types (tsc with NodeNext resolution).
 */
import { execFile, execFileSync } from "node:child_process"
import { promisify } from "node:util"
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type PostgresServer, startPostgres } from "./support/postgres.js"

const execFileAsync = promisify(execFile)
const root = resolve(import.meta.dirname, "..")
const readmeSamples = readdirSync(join(root, "examples", "readme")).filter((file) => file.endsWith(".ts")).sort()
let consumerDir: string
/** The Postgres sample's database. */
let server: PostgresServer

beforeAll(async () => {
  server = await startPostgres()
  execFileSync("npm", ["run", "build"], { cwd: root, stdio: "pipe" })
  consumerDir = mkdtempSync(join(tmpdir(), "lite-agent-consumer-"))
  mkdirSync(join(consumerDir, "node_modules", "@lite-agent"), { recursive: true })
  symlinkSync(root, join(consumerDir, "node_modules", "@lite-agent", "sdk"), "dir")
  // A consumer of the provider subpath drives the model with Effect and @effect/ai, which it
  // installs itself; link the very copies the package resolves, as a deduplicating install would.
  mkdirSync(join(consumerDir, "node_modules", "@effect"), { recursive: true })
  symlinkSync(join(root, "node_modules", "effect"), join(consumerDir, "node_modules", "effect"), "dir")
  symlinkSync(join(root, "node_modules", "@effect", "ai"), join(consumerDir, "node_modules", "@effect", "ai"), "dir")
  // The typed client of the server's API (a README sample) is built with @effect/platform's HttpApiClient.
  symlinkSync(join(root, "node_modules", "@effect", "platform"), join(consumerDir, "node_modules", "@effect", "platform"), "dir")
  writeFileSync(join(consumerDir, "package.json"), JSON.stringify({ name: "consumer", type: "module", private: true }))
  writeFileSync(
    join(consumerDir, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        exactOptionalPropertyTypes: true,
        skipLibCheck: false,
        types: [],
        outDir: "out"
      },
      files: ["consumer.ts"]
    })
  )
  cpSync(join(root, "test", "consumer", "consumer.ts"), join(consumerDir, "consumer.ts"))
  // Type-checks the consumer against the emitted declarations and emits it for node to run.
  execFileSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", consumerDir], {
    cwd: consumerDir,
    stdio: "pipe"
  })
  // The README's samples, copied into the outside project as a user would, checked the same way.
  cpSync(join(root, "examples", "readme"), join(consumerDir, "readme"), { recursive: true })
  symlinkSync(join(root, "node_modules", "@types"), join(consumerDir, "node_modules", "@types"), "dir")
  writeFileSync(
    join(consumerDir, "tsconfig.readme.json"),
    JSON.stringify({
      extends: "./tsconfig.json",
      compilerOptions: { types: ["node"], outDir: "out-readme", rootDir: "readme" },
      files: readmeSamples.map((file) => join("readme", file))
    })
  )
  execFileSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.readme.json"], {
    cwd: consumerDir,
    stdio: "pipe"
  })
}, 180_000)

afterAll(() => {
  if (consumerDir) rmSync(consumerDir, { recursive: true, force: true })
  server?.destroy()
})

describe("the built package", () => {
  it("runs an outside consumer that imports it by name (type-checked against the .d.ts files)", () => {
    const output = execFileSync(process.execPath, [join(consumerDir, "out", "consumer.js")], {
      cwd: consumerDir,
      encoding: "utf8"
    })
    expect(JSON.parse(output)).toEqual({
      agent: { text: "wrote it", tool: ["wrote out.txt (17 bytes)"], checkpointFiles: [["out.txt"]] },
      provider: {
        scriptedText: "scripted hello",
        remaining: 0,
        anthropicDefault: "claude-sonnet-4-6",
        missingKey: "apiKey"
      },
      sqliteHead: 1,
      sqliteConflict: true,
      sqliteSchemaVersion: 2,
      head: 1,
      expected: 0,
      actual: 1,
      checkpoints: ["hello"],
      tag: "@lite-agent/core/Checkpointer",
      conformance: "function",
      memoryLayer: "object"
    })
    // The agent worked in its default workdir, the consumer's cwd.
    expect(readFileSync(join(consumerDir, "out.txt"), "utf8")).toBe("from the consumer")
  })

  it("runs every README sample copied into the outside project (type-checked against the .d.ts files)", async () => {
    expect(readmeSamples.length).toBeGreaterThan(0)
    const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: server.url }
    delete env["ANTHROPIC_API_KEY"]
    const runs = await Promise.all(readmeSamples.map(async (file) => {
      const compiled = join(consumerDir, "out-readme", file.replace(/\.ts$/, ".js"))
      const { stdout } = await execFileAsync(process.execPath, [compiled], { cwd: consumerDir, encoding: "utf8", env })
      return [file, stdout.trim().length > 0] as const
    }))
    expect(runs).toEqual(readmeSamples.map((file) => [file, true]))
  }, 120_000)

  it("loads the native SQLite module only through the checkpoint-sqlite subpath, and pg only through checkpoint-postgres", () => {
    const modulesAfter = (specifier: string, fragment: string) =>
      execFileSync(
        process.execPath,
        [
          "--input-type=module",
          "-e",
          `import { createRequire } from "node:module"
           await import(${JSON.stringify(specifier)})
           const cache = createRequire(import.meta.url).cache
           console.log(Object.keys(cache).filter((path) => path.includes(${JSON.stringify(fragment)})).length)`
        ],
        { cwd: consumerDir, encoding: "utf8" }
      ).trim()
    for (const fragment of ["/better-sqlite3/", "/node_modules/pg/"]) {
      expect(modulesAfter("@lite-agent/sdk", fragment)).toBe("0")
      expect(modulesAfter("@lite-agent/sdk/core", fragment)).toBe("0")
      expect(modulesAfter("@lite-agent/sdk/provider", fragment)).toBe("0")
      expect(modulesAfter("@lite-agent/sdk/testing", fragment)).toBe("0")
    }
    expect(Number(modulesAfter("@lite-agent/sdk/checkpoint-sqlite", "/better-sqlite3/"))).toBeGreaterThan(0)
    expect(modulesAfter("@lite-agent/sdk/checkpoint-sqlite", "/node_modules/pg/")).toBe("0")
    expect(Number(modulesAfter("@lite-agent/sdk/checkpoint-postgres", "/node_modules/pg/"))).toBeGreaterThan(0)
    expect(modulesAfter("@lite-agent/sdk/checkpoint-postgres", "/better-sqlite3/")).toBe("0")
  })

  it("ships the lite-agent bin: the built command runs a turn offline", () => {
    const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { bin: Record<string, string> }
    const bin = join(consumerDir, "node_modules", "@lite-agent", "sdk", pkg.bin["lite-agent"]!)
    expect(readFileSync(bin, "utf8").startsWith("#!/usr/bin/env node\n")).toBe(true)
    const workdir = mkdtempSync(join(tmpdir(), "lite-agent-bin-work-"))
    const output = execFileSync(process.execPath, [
      bin,
      "-p",
      "Create hello.ts",
      "--model",
      `scripted:${join(root, "examples", "cli", "hello.json")}`,
      "--workdir",
      workdir,
      "--checkpointer",
      `file:${mkdtempSync(join(tmpdir(), "lite-agent-bin-sessions-"))}`
    ], { cwd: consumerDir, encoding: "utf8" })
    expect(output).toBe("Created hello.ts with hello(name).\n")
    expect(readFileSync(join(workdir, "hello.ts"), "utf8")).toContain("export const hello")
  })

  it("does not resolve undocumented internals", () => {
    const attempt = () =>
      execFileSync(process.execPath, ["--input-type=module", "-e", "await import('@lite-agent/sdk/backends/memory')"], {
        cwd: consumerDir,
        stdio: "pipe"
      })
    expect(attempt).toThrow(/ERR_PACKAGE_PATH_NOT_EXPORTED|not defined by "exports"/)
  })
})
