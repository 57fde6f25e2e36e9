/**
 * The packages as a user installs them: `npm run build`, `npm pack` of every workspace package,
 * and an outside app that installs the tarballs with npm and compiles against them with strict
 * NodeNext TypeScript and no `skipLibCheck`. In that app:
 *
 * - every code sample of the product spec (docs/spec/checkpoints.md) compiles exactly as written
 *   and runs — the ones that call Anthropic against a fake Anthropic server on loopback;
 * - every sample of the README and docs/ compiles and runs;
 * - a class is the same whichever package it is imported from;
 * - each subpath loads only the native or database modules it needs, and the `lite-agent` bin runs.
 *
 * The app's install skips install scripts: better-sqlite3's native module is the one this
 * repository's install compiled (compiling it again takes minutes), copied into the app.
 */
import { execFile, execFileSync, spawn } from "node:child_process"
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"
import { promisify } from "node:util"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type FakeAnthropic, reply, startFakeAnthropic } from "./support/fakeAnthropic.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"
import { specSamples } from "./support/specSamples.js"
import { offlineEnv } from "./support/offline.js"

const execFileAsync = promisify(execFile)
const root = resolve(import.meta.dirname, "..")
const rootPackage = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as {
  readonly workspaces: ReadonlyArray<string>
  readonly devDependencies: Readonly<Record<string, string>>
}
const packageDirs = readdirSync(join(root, "packages")).sort()
/** The README's and the docs' samples (examples/readme, examples/docs/<page>/), as paths under examples/. */
const docSamples = ["readme", "docs"].flatMap((dir) =>
  (readdirSync(join(root, "examples", dir), { recursive: true }) as Array<string>)
    .filter((file) => file.endsWith(".ts"))
    .map((file) => join(dir, file))
).sort()
const tsc = join(root, "node_modules", "typescript", "bin", "tsc")

interface PackageJson {
  readonly name: string
  readonly version: string
  readonly dependencies?: Readonly<Record<string, string>>
  readonly peerDependencies?: Readonly<Record<string, string>>
  readonly bin?: Readonly<Record<string, string>>
}
const packageJson = (dir: string): PackageJson => JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as PackageJson

let app: string
let tarballs: Map<string, string>
/** The Postgres sample's database. */
let server: PostgresServer
let anthropic: FakeAnthropic

const node = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv = {}) =>
  execFileAsync(process.execPath, args, { cwd: app, encoding: "utf8", env: offlineEnv(env), timeout: 90_000 })

beforeAll(async () => {
  ;[server, anthropic] = await Promise.all([startPostgres(), startFakeAnthropic()])
  // Not execFileSync: a worker held that long misses the test runner's replies (its calls time out).
  await execFileAsync("npm", ["run", "build"], { cwd: root, maxBuffer: 64 * 1024 * 1024 })
  const work = mkdtempSync(join(tmpdir(), "lite-agent-packages-"))
  const packed = join(work, "tarballs")
  mkdirSync(packed)
  const { stdout } = await execFileAsync("npm", ["pack", "--workspaces", "--json", "--pack-destination", packed], { cwd: root })
  tarballs = new Map((JSON.parse(stdout) as Array<{ name: string; filename: string }>).map((p) => [p.name, join(packed, p.filename)]))

  app = join(work, "app")
  mkdirSync(app)
  writeFileSync(
    join(app, "package.json"),
    JSON.stringify({
      name: "app",
      private: true,
      type: "module",
      dependencies: {
        ...Object.fromEntries([...tarballs].map(([name, file]) => [name, `file:${file}`])),
        // What the samples import besides lite-agent: Effect and @effect/ai (the provider's
        // model API), @effect/platform (the server's typed client), at the versions the SDK uses.
        ...Object.fromEntries(["effect", "@effect/ai", "@effect/platform"].map((name) => [name, sdkDependency(name)])),
        "better-sqlite3": rootPackage.devDependencies["better-sqlite3"]!
      },
      devDependencies: { "@types/node": rootPackage.devDependencies["@types/node"]! }
    })
  )
  await execFileAsync(
    "npm",
    ["install", "--prefer-offline", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
    { cwd: app, timeout: 170_000 }
  )
  const nativeModule = join("node_modules", "better-sqlite3", "build", "Release", "better_sqlite3.node")
  mkdirSync(dirname(join(app, nativeModule)), { recursive: true })
  cpSync(join(root, nativeModule), join(app, nativeModule))

  writeFileSync(
    join(app, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        skipLibCheck: false,
        types: ["node"],
        outDir: "out"
      },
      include: ["*.ts", "samples/**/*.ts", "spec/*.ts"]
    })
  )
  cpSync(join(root, "test", "consumer"), app, { recursive: true })
  for (const dir of ["readme", "docs"]) cpSync(join(root, "examples", dir), join(app, "samples", dir), { recursive: true })
  mkdirSync(join(app, "spec"))
  for (const sample of specSamples()) writeFileSync(join(app, "spec", `${sample.name}.ts`), sample.program)
  // Type-checks everything against the packed declarations and emits it for node to run.
  await execFileAsync(process.execPath, [tsc, "-p", app], { cwd: app }).catch((error: { stdout?: string }) => {
    throw new Error(`tsc failed in the app:\n${error.stdout ?? String(error)}`)
  })
}, 300_000)

afterAll(async () => {
  if (app) rmSync(dirname(app), { recursive: true, force: true })
  server?.destroy()
  await anthropic?.close()
})

const sdkDependency = (name: string): string => {
  const version = packageJson(join(root, "packages", "sdk")).dependencies?.[name]
  if (version === undefined) throw new Error(`@lite-agent/sdk does not depend on ${name}`)
  return version
}

describe("the workspace packages", () => {
  it("are the spec's names, versioned together, each thin package depending on this very @lite-agent/sdk", () => {
    expect(rootPackage.workspaces).toEqual(["packages/*"])
    const packages = packageDirs.map((dir) => packageJson(join(root, "packages", dir)))
    expect(packages.map((p) => p.name).sort()).toEqual([
      "@lite-agent/checkpoint-postgres",
      "@lite-agent/checkpoint-sqlite",
      "@lite-agent/core",
      "@lite-agent/provider",
      "@lite-agent/sdk",
      "@lite-agent/server"
    ])
    const [version] = packages.map((p) => p.version)
    for (const p of packages) {
      expect(p.version).toBe(version)
      if (p.name !== "@lite-agent/sdk") expect(p.dependencies?.["@lite-agent/sdk"]).toBe(version)
    }
    // better-sqlite3 is a peer of the SQLite package only (an optional one of the SDK).
    for (const p of packages) {
      expect(p.peerDependencies?.["better-sqlite3"] !== undefined).toBe(["@lite-agent/checkpoint-sqlite", "@lite-agent/sdk"].includes(p.name))
    }
    expect([...tarballs.keys()].sort()).toEqual(packages.map((p) => p.name).sort())
  })

  it("one class identity whichever package a name is imported from", async () => {
    const { stdout } = await node([join(app, "out", "packages.js")])
    expect(JSON.parse(stdout)).toEqual({
      conflictIsCoreClass: true,
      conflictIsSdkClass: true,
      conflictIsSdkCoreClass: true,
      sameCheckpointerTag: true,
      sameSqliteLayer: true,
      samePostgresLayer: true,
      sameProvider: true,
      sameServer: true
    })
  })

  it("the SDK's tarball holds every file its source maps point at", () => {
    const sdkTarball = tarballs.get("@lite-agent/sdk")!
    const listing = execFileSync("tar", ["-tzf", sdkTarball], { encoding: "utf8" }).split("\n").filter((line) => line !== "")
    const files = new Set(listing.map((path) => path.replace(/^package\//, "")))
    const maps = [...files].filter((path) => path.endsWith(".map"))
    expect(maps.length).toBeGreaterThan(0)
    const installed = join(app, "node_modules", "@lite-agent", "sdk")
    const unresolved: Array<string> = []
    for (const mapPath of maps) {
      const map = JSON.parse(readFileSync(join(installed, mapPath), "utf8")) as { sources: Array<string>; sourceRoot?: string }
      for (const source of map.sources) {
        const sourcePath = join(dirname(mapPath), map.sourceRoot ?? "", source)
        if (!files.has(sourcePath)) unresolved.push(`${mapPath} -> ${sourcePath}`)
      }
    }
    expect(unresolved).toEqual([])
    // The CLI's scripted examples ship with it (its docs run them).
    expect(files.has("examples/cli/hello.json")).toBe(true)
    // So does the viewer, built: the page the server serves (no TypeScript of it to compile, no CDN).
    for (const file of ["dist/viewer/index.html", "dist/viewer/app.js", "dist/viewer/viewer.css"]) expect(files.has(file)).toBe(true)
    expect([...files].filter((path) => path.startsWith("dist/viewer/"))).toHaveLength(3)
  })
})

describe("the product spec's samples, exactly as written", () => {
  const samples = specSamples()

  it("are all found: four code samples", () => {
    expect(samples.map((sample) => sample.name)).toEqual(["usage", "time-travel", "sqlite", "conflict"])
  })

  for (const sample of specSamples()) {
    it(`${sample.name} runs in the app`, async () => {
      const home = mkdtempSync(join(tmpdir(), "lite-agent-spec-home-"))
      const requestsBefore = anthropic.requests.length
      anthropic.enqueue(...sample.anthropicReplies.map((text) => reply.text(text)))
      try {
        const { stdout } = await execFileAsync(process.execPath, [join(app, "out", "spec", `${sample.name}.js`)], {
          cwd: home,
          encoding: "utf8",
          timeout: 90_000,
          env: offlineEnv({ HOME: home, ANTHROPIC_API_KEY: "sk-ant-test", ANTHROPIC_BASE_URL: anthropic.url })
        })
        expect(anthropic.pending()).toBe(0)
        expect(anthropic.requests.length - requestsBefore).toBe(sample.anthropicReplies.length)
        await sample.check(JSON.parse(stdout.trim().split("\n").at(-1) ?? "null") as unknown, home)
      } finally {
        rmSync(home, { recursive: true, force: true })
      }
    })
  }
})

describe("the README's and the docs' samples", () => {
  it("compile against the packed declarations and run in the app", async () => {
    expect(docSamples.length).toBeGreaterThan(0)
    const runs = await Promise.all(docSamples.map(async (file) => {
      const { stdout } = await node([join(app, "out", "samples", file.replace(/\.ts$/, ".js"))], { DATABASE_URL: server.url })
      return [file, stdout.trim().length > 0] as const
    }))
    expect(runs).toEqual(docSamples.map((file) => [file, true]))
  })

  it("an outside consumer of the SDK's subpaths runs", async () => {
    const { stdout } = await node([join(app, "out", "consumer.js")])
    expect(JSON.parse(stdout)).toEqual({
      agent: { text: "wrote it", tool: ["wrote out.txt (17 bytes)"], checkpointFiles: [["out.txt"]] },
      provider: {
        scriptedText: "scripted hello",
        remaining: 0,
        anthropicDefault: "claude-sonnet-4-6",
        missingKey: "apiKey"
      },
      sqliteHead: 1,
      sqliteConflict: true,
      sqliteSchemaVersion: 3,
      head: 1,
      expected: 0,
      actual: 1,
      checkpoints: ["hello"],
      tag: "@lite-agent/core/Checkpointer",
      conformance: "function",
      memoryLayer: "object"
    })
    // The agent worked in its default workdir, the app's directory.
    expect(readFileSync(join(app, "out.txt"), "utf8")).toBe("from the consumer")
  })
})

describe("what each entry point loads", () => {
  // Asynchronous: fourteen node starts in a row, synchronous, held the worker past its runner's replies.
  const modulesAfter = async (specifier: string, fragment: string) =>
    (await execFileAsync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import { createRequire } from "node:module"
         await import(${JSON.stringify(specifier)})
         const cache = createRequire(import.meta.url).cache
         console.log(Object.keys(cache).filter((path) => path.includes(${JSON.stringify(fragment)})).length)`
      ],
      { cwd: app, encoding: "utf8" }
    )).stdout.trim()

  it("the native SQLite module only through the SQLite entry points, and pg only through the Postgres ones", async () => {
    for (const fragment of ["/better-sqlite3/", "/node_modules/pg/"]) {
      for (const specifier of ["@lite-agent/sdk", "@lite-agent/sdk/core", "@lite-agent/core", "@lite-agent/provider", "@lite-agent/sdk/testing"]) {
        expect(await modulesAfter(specifier, fragment)).toBe("0")
      }
    }
    for (const specifier of ["@lite-agent/sdk/checkpoint-sqlite", "@lite-agent/checkpoint-sqlite"]) {
      expect(Number(await modulesAfter(specifier, "/better-sqlite3/"))).toBeGreaterThan(0)
      expect(await modulesAfter(specifier, "/node_modules/pg/")).toBe("0")
    }
    for (const specifier of ["@lite-agent/sdk/checkpoint-postgres", "@lite-agent/checkpoint-postgres"]) {
      expect(Number(await modulesAfter(specifier, "/node_modules/pg/"))).toBeGreaterThan(0)
      expect(await modulesAfter(specifier, "/better-sqlite3/")).toBe("0")
    }
  })

  it("does not resolve undocumented internals", () => {
    const attempt = () =>
      execFileSync(process.execPath, ["--input-type=module", "-e", "await import('@lite-agent/sdk/backends/memory')"], {
        cwd: app,
        stdio: "pipe"
      })
    expect(attempt).toThrow(/ERR_PACKAGE_PATH_NOT_EXPORTED|not defined by "exports"/)
  })

  it("ships the lite-agent bin: the installed command runs a turn offline; its first start builds a snapshot the next ones start from", async () => {
    const bin = join(app, "node_modules", ".bin", "lite-agent")
    expect(existsSync(bin)).toBe(true)
    const home = mkdtempSync(join(tmpdir(), "lite-agent-bin-home-"))
    const sessions = mkdtempSync(join(tmpdir(), "lite-agent-bin-sessions-"))
    const workdirs: Array<string> = []
    const scriptedTurns = join(app, "node_modules", "@lite-agent", "sdk", "examples", "cli", "hello.json")
    const createHello = async (checkpointer: string, run: (args: ReadonlyArray<string>) => Promise<{ stdout: string }>) => {
      const workdir = mkdtempSync(join(tmpdir(), "lite-agent-bin-work-"))
      workdirs.push(workdir)
      const { stdout } = await run([
        "-p",
        "Create hello.ts",
        "--model",
        `scripted:${scriptedTurns}`,
        "--workdir",
        workdir,
        "--checkpointer",
        checkpointer,
        "--permission-mode",
        "acceptEdits"
      ])
      expect(stdout).toBe("Created hello.ts with hello(name).\n")
      expect(readFileSync(join(workdir, "hello.ts"), "utf8")).toContain("export const hello")
    }
    const viaBin = (args: ReadonlyArray<string>) =>
      execFileAsync(bin, args, { cwd: app, encoding: "utf8", env: offlineEnv({ LITE_AGENT_HOME: home }) })
    try {
      await createHello(`file:${sessions}`, viaBin)
      // The first start (without a snapshot) built one in the background, for this node binary.
      const cache = join(home, "cache")
      const blobs = () => (existsSync(cache) ? readdirSync(cache).filter((name) => name.endsWith(".blob")) : [])
      for (let waited = 0; blobs().length === 0; waited++) {
        if (waited > 600) throw new Error("no snapshot was built within a minute")
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      expect(blobs()).toEqual([expect.stringMatching(/^cli-[0-9a-f]{12}-\d+-\d+\.blob$/)])
      // Started from it: the same answer, and packages loaded on demand (better-sqlite3) still load.
      await createHello(`file:${sessions}`, viaBin)
      await createHello(`file:${sessions}`, viaBin)
      // Nothing random or timed was frozen into the snapshot: every start makes a session of its own…
      expect(readdirSync(sessions).filter((name) => !name.startsWith("."))).toHaveLength(3)
      // …and a model that answers late is waited for, in a workdir (the app) large enough that its capture outlasts
      // the build's timers (a snapshot that carried the build's next timer due time never woke a later one up).
      const late = join(sessions, "late.json")
      writeFileSync(late, JSON.stringify([{ text: "late but here", delayMs: 300 }]))
      const waited = await viaBin(["-p", "hi", "--model", `scripted:${late}`, "--checkpointer", `file:${sessions}`, "--permission-mode", "plan"])
      expect(waited.stdout).toBe("late but here\n")
      // `serve` from the snapshot finds the installed viewer's files (the bundle's import.meta.url is the package's).
      const serving = spawn(bin, ["serve", "--port", "0", "--checkpointer", `file:${sessions}`], { cwd: app, env: offlineEnv({ LITE_AGENT_HOME: home }) })
      try {
        const listening = await new Promise<string>((resolveUrl, reject) => {
          let output = ""
          serving.stdout.setEncoding("utf8").on("data", (chunk: string) => {
            output += chunk
            const found = /listening on (\S+)/.exec(output)
            if (found !== null) resolveUrl(found[1]!)
          })
          serving.on("close", (code) => reject(new Error(`serve ended (${code}) before listening: ${output}`)))
        })
        const page = await fetch(listening)
        expect(page.status).toBe(200)
        expect(await page.text()).toContain("/viewer/app.js")
        expect((await fetch(`${listening}/viewer/app.js`)).status).toBe(200)
      } finally {
        serving.kill("SIGKILL")
      }
      const blob = join(cache, blobs()[0]!)
      const main = join(app, "node_modules", "@lite-agent", "sdk", "dist", "cli", "main.js")
      await createHello(`sqlite:${join(sessions, "sessions.db")}`, (args) => node(["--snapshot-blob", blob, main, ...args], { LITE_AGENT_HOME: home }))
    } finally {
      for (const dir of [home, sessions, ...workdirs]) rmSync(dir, { recursive: true, force: true })
    }
  })
})
