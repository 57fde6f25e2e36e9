/**
 * The README's code samples are real programs: every ```ts block in README.md is, verbatim, a
 * whole file of examples/readme/, and every such file runs offline, leaves nothing behind in
 * its temporary directory and prints what the README says it does. Type-checking is not
 * repeated here: tsconfig.json includes "examples", so `npm run typecheck` (tsc -p
 * tsconfig.json) checks these files under the strict settings — asserted below, so the
 * samples cannot silently drop out of it.
 *
 * The README's reference tables are held to the code: the Tools table to the tools the model
 * is offered (names, parameters, their types and optionality), the Errors table to every error
 * class the package exports. And the source maps the build emits must point at files the
 * published package contains.
 */
import { execFile } from "node:child_process"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { promisify } from "node:util"
import * as Tool from "@effect/ai/Tool"
import ts from "typescript"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import * as checkpointPostgresEntry from "../src/checkpoint-postgres.js"
import * as checkpointSqliteEntry from "../src/checkpoint-sqlite.js"
import * as coreEntry from "../src/core.js"
import { agentToolkit, TOOL_NAMES } from "../src/core.js"
import * as indexEntry from "../src/index.js"
import * as providerEntry from "../src/provider.js"
import * as testingEntry from "../src/testing.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"

const root = resolve(import.meta.dirname, "..")
const samplesDir = join(root, "examples", "readme")
const readme = readFileSync(join(root, "README.md"), "utf8")
const sampleFiles = readdirSync(samplesDir).filter((name) => name.endsWith(".ts")).sort()
const execFileAsync = promisify(execFile)

/** The body of every ```ts block of the README, without its fences. */
const tsBlocks = [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => match[1] ?? "")

/** The text of a README section: from its heading line to the next heading of the same or a higher level. */
const section = (heading: string): string => {
  const start = readme.indexOf(`\n${heading}\n`)
  if (start < 0) throw new Error(`README.md has no "${heading}" heading`)
  const level = heading.indexOf(" ")
  const rest = readme.slice(start + heading.length + 2)
  const end = rest.search(new RegExp(`^#{1,${level}} `, "m"))
  return end < 0 ? rest : rest.slice(0, end)
}

/** The cells of every body row of the markdown tables in `text` (header and separator rows excluded). */
const tableRows = (text: string): Array<Array<string>> =>
  text.split("\n")
    .filter((line) => line.startsWith("| `"))
    .map((line) => line.slice(1, -1).split(/(?<!\\)\|/).map((cell) => cell.trim()))

// ---------------------------------------------------------------------------
// Running the samples
// ---------------------------------------------------------------------------

interface SampleRun {
  readonly exitCode: number | string | null
  readonly stdout: string
  readonly stderr: string
  /** What the sample left in its own TMPDIR (tsx's compile cache excepted). */
  readonly leftBehind: ReadonlyArray<string>
}

/** Offline: without ANTHROPIC_API_KEY nothing can reach the network by accident. */
const offlineEnv = (tmp: string): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = { ...process.env, TMPDIR: tmp }
  delete env.ANTHROPIC_API_KEY
  return env
}

const runSample = async (file: string, databaseUrl: string): Promise<SampleRun> => {
  // A TMPDIR of its own, so what the sample leaves behind in it can be seen.
  const tmp = mkdtempSync(join(tmpdir(), "readme-test-tmp-"))
  try {
    const outcome = await execFileAsync(process.execPath, ["--import", "tsx", join(samplesDir, file)], {
      cwd: root,
      env: { ...offlineEnv(tmp), DATABASE_URL: databaseUrl },
      timeout: 90_000
    }).then(
      ({ stderr, stdout }) => ({ exitCode: 0, stdout, stderr }),
      (error: { code?: number | string; stdout?: string; stderr?: string }) => ({
        exitCode: error.code ?? null,
        stdout: error.stdout ?? "",
        stderr: error.stderr ?? String(error)
      })
    )
    return { ...outcome, leftBehind: readdirSync(tmp).filter((name) => !name.startsWith("tsx-")) }
  } finally {
    rmSync(tmp, { recursive: true, force: true })
  }
}

/** What each sample must print: the README's claims about it, checked. */
const expectedOutput: Record<string, (stdout: string) => void> = {
  "agent.ts": (stdout) => {
    expect(stdout).toContain("Added src/auth.test.ts.")
    expect(stdout).toContain("output: 'wrote src/auth.test.ts (19 bytes)'")
    expect(stdout).toMatch(/\{ inputTokens: \d+, outputTokens: \d+ \}/)
    // The second prompt continued the first one's session: its head is past both turns.
    expect(stdout).toMatch(/[0-9a-f-]{36} 13\n$/)
  },
  "agent-layers.ts": (stdout) => {
    expect(stdout).toContain("Wrote hello.txt. head 7, tools: wrote hello.txt (6 bytes)")
  },
  "file-checkpointer.ts": (stdout) => {
    expect(stdout).toContain("{ ok: true, detail: '1 sessions checked, no damage' }")
    expect(stdout).toContain('wrong key: codec "aes-256-gcm" failed to decode')
  },
  "postgres-checkpointer.ts": (stdout) => {
    expect(stdout).toContain("conflict: expected 1, actual 2")
    expect(stdout).toContain("head 3: [ 'Refactor src/auth.ts', 'Fix the login test', 'Now add tests' ]")
  },
  "sqlite-checkpointer.ts": (stdout) => {
    expect(stdout).toContain("conflict: expected 1, actual 2")
    expect(stdout).toContain("head 3")
  },
  "time-travel.ts": (stdout) => {
    expect(stdout).toContain("path: 'greeting.txt',\n    action: 'write',\n    unverified: false,\n    alreadyRestored: false\n  }\n] []")
    expect(stdout).toContain("[ 'greeting.txt' ] true")
    expect(stdout).toContain("tool: 'shell', input: { command: 'date > built.txt' }")
    expect(stdout).toContain('greeting.txt: "hello\\n"')
  },
  "typed-client.ts": (stdout) => {
    expect(stdout).toContain("1 session, head 1, checkpoint: Refactor src/auth.ts")
  },
  "promise-checkpointer.ts": (stdout) => {
    expect(stdout).toContain("conflict in demo: expected 0, actual 1")
    expect(stdout).toContain("1 UserMessage")
    expect(stdout).not.toContain("2 UserMessage") // the stale append stored nothing
  },
  "effect-checkpointer.ts": (stdout) => {
    expect(stdout).toContain("checkpoint 1: Fix the answer")
  },
  "compaction.ts": (stdout) => {
    expect(stdout).toContain("start measure")
    expect(stdout).toContain("progress measure   { tokens: 655, method: 'measured' }")
    expect(stdout).toContain("progress archive 6 6")
    expect(stdout).toContain("progress summarize 1 1")
    expect(stdout).toContain("progress project   { tokens: 78, method: 'measured' }")
    expect(stdout).toContain("{ before: 655, after: 78, method: 'measured', compacted: true }")
  },
  "conformance.ts": (stdout) => {
    // node:test's summary (TAP "# pass 23", or the spec reporter's "ℹ pass 23").
    expect(stdout).toMatch(/^\S+ pass [1-9]\d*$/m)
    expect(stdout).toMatch(/^\S+ fail 0$/m)
    expect(stdout).toContain("Checkpointer conformance: file backend")
  }
}

const runs = new Map<string, SampleRun>()

describe("README samples (examples/readme)", () => {
  let server: PostgresServer | undefined
  beforeAll(async () => {
    // The Postgres sample's database (DATABASE_URL): a throwaway server of this file's own.
    server = await startPostgres()
    const url = server.url
    // In parallel: each is a Node process of its own, mostly waiting on tsx and the disk.
    const results = await Promise.all(sampleFiles.map(async (file) => [file, await runSample(file, url)] as const))
    for (const [file, run] of results) runs.set(file, run)
  }, 180_000)
  afterAll(() => server?.destroy())

  it("exist, and each has its output checked here", () => {
    expect(sampleFiles.length).toBeGreaterThan(0)
    expect(Object.keys(expectedOutput).sort()).toEqual(sampleFiles)
  })

  it("are type-checked by `npm run typecheck`: tsconfig.json includes every one of them", () => {
    const parsed = ts.getParsedCommandLineOfConfigFile(join(root, "tsconfig.json"), {}, {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"))
      }
    })
    const included = new Set(parsed?.fileNames.map((file) => resolve(file)))
    for (const file of sampleFiles) expect(included, file).toContain(join(samplesDir, file))
    expect(parsed?.options.strict).toBe(true)
  })

  it("every ```ts block of the README is one of them, verbatim", () => {
    const files = new Set(sampleFiles.map((file) => readFileSync(join(samplesDir, file), "utf8")))
    expect(tsBlocks.length).toBeGreaterThan(0)
    for (const block of tsBlocks) {
      expect(files.has(block), `README block not in examples/readme:\n${block.slice(0, 300)}`).toBe(true)
    }
  })

  for (const file of sampleFiles) {
    it(`${file} is quoted whole in the README, runs offline, cleans up and prints what it should`, () => {
      expect(tsBlocks).toContain(readFileSync(join(samplesDir, file), "utf8"))
      const run = runs.get(file)
      expect(run, `${file} did not run`).toBeDefined()
      if (run === undefined) return
      expect(run.exitCode, `${file} failed:\n${run.stderr}`).toBe(0)
      expect(run.leftBehind, `${file} left temporary files behind`).toEqual([])
      expectedOutput[file]?.(run.stdout)
    })
  }
})

// ---------------------------------------------------------------------------
// The reference tables
// ---------------------------------------------------------------------------

describe("README tables", () => {
  it("the Tools table lists exactly the tools the model is offered, with their parameters", () => {
    const rows = tableRows(section("### Tools"))
    // "`name?: type`" for every parameter in the input cell.
    const documented = Object.fromEntries(rows.map(([name = "", input = ""]) => [
      name.replaceAll("`", ""),
      [...input.matchAll(/`(\w+\??: \w+)`/g)].map((match) => match[1]).sort()
    ]))
    const declared = Object.fromEntries(Object.entries(agentToolkit.tools).map(([name, tool]) => {
      // What the model is shown: the JSON Schema of the tool's parameters (as Tool.getJsonSchema builds it).
      const schema = Tool.getJsonSchemaFromSchemaAst(tool.parametersSchema.ast)
      if (!("properties" in schema)) throw new Error(`${name}: its parameters are not an object schema`)
      const parameters = Object.entries(schema.properties).map(([parameter, property]) =>
        `${parameter}${schema.required.includes(parameter) ? "" : "?"}: ${"type" in property ? String(property.type) : "unknown"}`
      )
      return [name, parameters.sort()]
    }))
    expect(Object.keys(declared).sort()).toEqual([...TOOL_NAMES].sort())
    expect(documented).toEqual(declared)
  })

  it("the Errors table lists exactly the error classes the package exports", () => {
    const isErrorClass = (value: unknown) => typeof value === "function" && value.prototype instanceof Error
    const entryPoints = [indexEntry, coreEntry, checkpointSqliteEntry, checkpointPostgresEntry, providerEntry, testingEntry]
    const exported = new Set(
      entryPoints.flatMap((entry) => Object.entries(entry).filter(([, value]) => isErrorClass(value)).map(([name]) => name))
    )
    const documented = tableRows(section("### Errors")).map(([name = ""]) => name.replaceAll("`", ""))
    expect(documented.length).toBe(new Set(documented).size) // no row twice
    expect([...documented].sort()).toEqual([...exported].sort())
  })
})
