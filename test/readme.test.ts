/**
 * The documentation's code samples are real programs: every ```ts block of README.md,
 * CONTRIBUTING.md and docs/**.md (the product spec in docs/spec/ aside: its samples are checked
 * by the package test) is, verbatim, a whole file of that page's samples folder — examples/readme/
 * for the README, examples/contributing/ for CONTRIBUTING.md, examples/docs/<page>/ for
 * docs/<page>.md — and every such file runs offline, leaves nothing behind in its temporary
 * directory and prints what its page says it does. Type-checking is not repeated here:
 * tsconfig.json includes "examples", so `npm run typecheck` checks these files under the strict
 * settings — asserted below, so the samples cannot silently drop out of it.
 *
 * The reference tables are held to the code: the Tools table (docs/agent.md) to the tools the
 * model is offered (names, parameters, their types and optionality), the Errors tables
 * (docs/errors.md) to every error class the packages export. And every relative link of the
 * pages leads to a file, and to a heading of it when it names one.
 */
import { execFile } from "node:child_process"
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { availableParallelism, tmpdir } from "node:os"
import { dirname, join, relative, resolve } from "node:path"
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
import * as serverEntry from "../src/server.js"
import * as testingEntry from "../src/testing.js"
import { type PostgresServer, startPostgres } from "./support/postgres.js"
import { offlineEnv } from "./support/offline.js"

const root = resolve(import.meta.dirname, "..")
const execFileAsync = promisify(execFile)

/** Every markdown file under `dir`, relative to the root. */
const markdownUnder = (dir: string): Array<string> =>
  readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name)
    return entry.isDirectory() ? (path === join("docs", "spec") ? [] : markdownUnder(path)) : entry.name.endsWith(".md") ? [path] : []
  })

/** A page and the folder its samples live in. */
interface Page {
  readonly path: string
  readonly text: string
  readonly samplesDir: string
}

const samplesDirOf = (page: string): string =>
  page === "README.md"
    ? join("examples", "readme")
    : page === "CONTRIBUTING.md"
    ? join("examples", "contributing")
    : join("examples", page.replace(/\.md$/, ""))

const pages: ReadonlyArray<Page> = ["README.md", "CONTRIBUTING.md", ...markdownUnder("docs")].sort().map((path) => ({
  path,
  text: readFileSync(join(root, path), "utf8"),
  samplesDir: samplesDirOf(path)
}))
const pageAt = (path: string): Page => {
  const page = pages.find((candidate) => candidate.path === path)
  if (page === undefined) throw new Error(`no page ${path}`)
  return page
}

/** The .ts files directly in a page's samples folder (its subfolders are other pages'). */
const samplesOf = (page: Page): Array<string> => {
  const dir = join(root, page.samplesDir)
  if (!existsSync(dir)) return []
  return readdirSync(dir).filter((name) => name.endsWith(".ts") && statSync(join(dir, name)).isFile()).sort()
    .map((name) => join(page.samplesDir, name))
}

/** Every .ts file under the sample folders, relative to the root. */
const tsFilesUnder = (dir: string): Array<string> =>
  existsSync(join(root, dir))
    ? readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? tsFilesUnder(join(dir, entry.name)) : entry.name.endsWith(".ts") ? [join(dir, entry.name)] : []
    )
    : []
const sampleFiles = pages.flatMap(samplesOf).sort()

/** The body of every ```ts block of a page, without its fences. */
const tsBlocks = (text: string): Array<string> => [...text.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => match[1] ?? "")

/** A page without its fenced blocks (links and headings in code are not links and headings). */
const prose = (text: string): string => text.replace(/^```[\s\S]*?^```$/gm, "")

/** The text of a section: from its heading line to the next heading of the same or a higher level. */
const section = (page: Page, heading: string): string => {
  const start = page.text.indexOf(`\n${heading}\n`)
  if (start < 0) throw new Error(`${page.path} has no "${heading}" heading`)
  const level = heading.indexOf(" ")
  const rest = page.text.slice(start + heading.length + 2)
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


const runSample = async (file: string, databaseUrl: string): Promise<SampleRun> => {
  // A TMPDIR of its own, so what the sample leaves behind in it can be seen.
  const tmp = mkdtempSync(join(tmpdir(), "docs-test-tmp-"))
  try {
    const outcome = await execFileAsync(process.execPath, ["--import", "tsx", join(root, file)], {
      cwd: root,
      env: offlineEnv({ TMPDIR: tmp, DATABASE_URL: databaseUrl }),
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

/** `run` over `items`, at most `limit` at a time. */
const inPool = async <A, B>(items: ReadonlyArray<A>, limit: number, run: (item: A) => Promise<B>): Promise<Array<B>> => {
  const results: Array<B> = new Array(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const index = next++
      results[index] = await run(items[index]!)
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker))
  return results
}

/** What each sample must print: its page's claims about it, checked. */
const expectedOutput: Record<string, (stdout: string) => void> = {
  "examples/readme/agent.ts": (stdout) => {
    expect(stdout).toContain("Added src/auth.test.ts.")
    expect(stdout).toContain("output: 'wrote src/auth.test.ts (19 bytes)'")
    expect(stdout).toMatch(/\{ inputTokens: \d+, outputTokens: \d+ \}/)
    // The second prompt continued the first one's session: its head is past both turns.
    expect(stdout).toMatch(/[0-9a-f-]{36} 17\n$/)
  },
  "examples/readme/agent-layers.ts": (stdout) => {
    expect(stdout).toContain("Wrote hello.txt. head 9, tools: wrote hello.txt (6 bytes)")
  },
  "examples/docs/agent/permissions.ts": (stdout) => {
    expect(stdout).toContain("asked: shell rm -rf build\nasked: shell echo status\n")
    expect(stdout).not.toContain("asked: shell echo again")
    expect(stdout).toContain(`{"command":"rm -rf build"} -> permission denied: no deleting today; the tool did not run`)
    expect(stdout).toContain(`{"command":"echo again"} -> again`)
    expect(stdout).toMatch(/shell deny by callback no deleting today\nshell allow by callback \nshell allow by remembered \n$/)
  },
  "examples/docs/backends/custom/map-backend.ts": (stdout) => {
    // node:test's summary (TAP "# pass 23", or the spec reporter's "ℹ pass 23").
    expect(stdout).toMatch(/^\S+ pass [1-9]\d*$/m)
    expect(stdout).toMatch(/^\S+ fail 0$/m)
    expect(stdout).toContain("Checkpointer conformance: map backend")
  },
  "examples/docs/backends/file/sealed-log.ts": (stdout) => {
    expect(stdout).toContain("{ ok: true, detail: '1 sessions checked, no damage' }")
    expect(stdout).toContain('wrong key: codec "aes-256-gcm" failed to decode')
  },
  "examples/docs/backends/postgres/two-machines.ts": (stdout) => {
    expect(stdout).toContain("conflict: expected 1, actual 2")
    expect(stdout).toContain("head 3: [ 'Refactor src/auth.ts', 'Fix the login test', 'Now add tests' ]")
  },
  "examples/docs/backends/sqlite/conflict.ts": (stdout) => {
    expect(stdout).toContain("conflict: expected 1, actual 2")
    expect(stdout).toContain("head 3")
  },
  "examples/docs/checkpointer/effect-checkpointer.ts": (stdout) => {
    expect(stdout).toContain("checkpoint 1: Fix the answer")
  },
  "examples/docs/checkpointer/promise-checkpointer.ts": (stdout) => {
    expect(stdout).toContain("conflict in demo: expected 0, actual 1")
    expect(stdout).toContain("1 UserMessage")
    expect(stdout).not.toContain("2 UserMessage") // the stale append stored nothing
  },
  "examples/docs/compaction/compact.ts": (stdout) => {
    expect(stdout).toContain("start measure")
    expect(stdout).toContain("progress measure   { tokens: 655, method: 'measured' }")
    expect(stdout).toContain("progress archive 0 6")
    expect(stdout).toContain("progress archive 6 6")
    expect(stdout).toContain("progress summarize 0 1")
    expect(stdout).toContain("progress summarize 1 1")
    expect(stdout).toContain("progress project   { tokens: 78, method: 'measured' }")
    expect(stdout).toContain("done persist")
    expect(stdout).toContain("{ before: 655, after: 78, method: 'measured', compacted: true }")
  },
  "examples/docs/server/typed-client.ts": (stdout) => {
    expect(stdout).toContain("1 session, head 1, checkpoint: Refactor src/auth.ts")
  },
  "examples/docs/time-travel/tree.ts": (stdout) => {
    expect(stdout).toContain("* 3 Write v1 → after it: [11, 21]\n  11 Write v2 → after it: []\n* 21 Write v2b instead → after it: []")
    expect(stdout).toContain("branches: 17, 27 (current)")
    expect(stdout).toContain("after undo: v2\nafter redo: v2b")
    expect(stdout).toContain("a fork of plans (its first 31 events shared) in side/: v2b")
  },
  "examples/docs/time-travel/prune.ts": (stdout) => {
    expect(stdout).toBe(
      "branch 17: 1 object(s) only it holds\nbranch 27 (current): 1 object(s) only it holds\nplans: pruned 17 (BranchesPruned at 28)\n" +
        "branches: 17 (pruned), 27 (current)\ncheckpoints: Write v1, Write v2b instead\nswitch to 17: branch_pruned\n"
    )
  },
  "examples/docs/time-travel/restore.ts": (stdout) => {
    expect(stdout).toContain("path: 'built.txt',\n    action: 'delete',")
    expect(stdout).toContain("path: 'greeting.txt',\n    action: 'write',\n    unverified: false,\n    alreadyRestored: false\n  }\n] []")
    // The file the command made is deleted; nothing is left not undone.
    expect(stdout).toContain("[ 'built.txt', 'greeting.txt' ] true []")
    expect(stdout).toContain('greeting.txt: "hello\\n"')
  }
}

const runs = new Map<string, SampleRun>()

describe("documentation samples", () => {
  let server: PostgresServer | undefined
  beforeAll(async () => {
    // The PostgreSQL samples' database (DATABASE_URL): a throwaway server of this file's own.
    server = await startPostgres()
    const url = server.url
    // A few at a time: each is a Node process of its own, and the machines have two cores.
    const results = await inPool(sampleFiles, Math.max(2, availableParallelism()), async (file) => [file, await runSample(file, url)] as const)
    for (const [file, run] of results) runs.set(file, run)
  }, 240_000)
  afterAll(() => server?.destroy())

  it("every sample file belongs to a page, and each has its output checked here", () => {
    const underSampleFolders = ["readme", "contributing", "docs"].flatMap((dir) => tsFilesUnder(join("examples", dir))).sort()
    expect(underSampleFolders).toEqual(sampleFiles)
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
    for (const file of sampleFiles) expect(included, file).toContain(join(root, file))
    expect(parsed?.options.strict).toBe(true)
  })

  for (const page of pages) {
    it(`every \`\`\`ts block of ${page.path} is one of its samples (${page.samplesDir}), verbatim, and each of them is quoted in it`, () => {
      const samples = samplesOf(page)
      const contents = new Set(samples.map((file) => readFileSync(join(root, file), "utf8")))
      const blocks = tsBlocks(page.text)
      for (const block of blocks) {
        expect(contents.has(block), `${page.path}: a block not in ${page.samplesDir}:\n${block.slice(0, 300)}`).toBe(true)
      }
      for (const file of samples) expect(blocks, `${file} is not quoted whole in ${page.path}`).toContain(readFileSync(join(root, file), "utf8"))
    })
  }

  for (const file of sampleFiles) {
    it(`${file} runs offline, cleans up and prints what its page says`, () => {
      const run = runs.get(file)
      expect(run, `${file} did not run`).toBeDefined()
      if (run === undefined) return
      expect(run.exitCode, `${file} failed:\n${run.stderr}\n${run.stdout.slice(-2000)}`).toBe(0)
      expect(run.leftBehind, `${file} left temporary files behind`).toEqual([])
      expectedOutput[file]?.(run.stdout)
    })
  }
})

// ---------------------------------------------------------------------------
// The reference tables
// ---------------------------------------------------------------------------

describe("reference tables", () => {
  it("the Tools table (docs/agent.md) lists exactly the tools the model is offered, with their parameters", () => {
    const rows = tableRows(section(pageAt(join("docs", "agent.md")), "## Tools"))
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

  it("the Errors tables (docs/errors.md) list exactly the error classes the packages export", () => {
    const isErrorClass = (value: unknown) => typeof value === "function" && value.prototype instanceof Error
    const errorsOf = (entries: ReadonlyArray<object>) =>
      new Set(entries.flatMap((entry) => Object.entries(entry).filter(([, value]) => isErrorClass(value)).map(([name]) => name)))
    const library = errorsOf([indexEntry, coreEntry, checkpointSqliteEntry, checkpointPostgresEntry, providerEntry, testingEntry])
    const serverOwn = [...errorsOf([serverEntry])].filter((name) => !library.has(name))
    const errorsPage = pageAt(join("docs", "errors.md"))
    const documented = (heading: string) => tableRows(section(errorsPage, heading)).map(([name = ""]) => name.replaceAll("`", ""))
    const libraryRows = documented("## The library's")
    const serverRows = documented("## The server's own")
    expect(libraryRows.length).toBe(new Set(libraryRows).size) // no row twice
    expect([...libraryRows].sort()).toEqual([...library].sort())
    expect([...serverRows].sort()).toEqual(serverOwn.sort())
  })
})

// ---------------------------------------------------------------------------
// Links
// ---------------------------------------------------------------------------

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
const anchorOf = (heading: string): string =>
  heading.trim().toLowerCase().replace(/[^\p{Letter}\p{Number}\s_-]/gu, "").replace(/\s/g, "-")

const anchorsOf = (markdown: string): Set<string> =>
  new Set([...prose(markdown).matchAll(/^#{1,6} (.+)$/gm)].map((match) => anchorOf(match[1]!)))

describe("links", () => {
  for (const page of pages) {
    it(`every relative link of ${page.path} leads to a file, and to a heading of it when it names one`, () => {
      const broken: Array<string> = []
      for (const [, target = ""] of prose(page.text).matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target)) continue // https:, mailto:
        const [path = "", anchor] = target.split("#")
        const file = path === "" ? join(root, page.path) : resolve(root, dirname(page.path), path)
        if (!existsSync(file)) {
          broken.push(`${target}: no ${relative(root, file)}`)
          continue
        }
        if (anchor !== undefined && file.endsWith(".md") && !anchorsOf(readFileSync(file, "utf8")).has(anchor)) {
          broken.push(`${target}: no such heading in ${relative(root, file)}`)
        }
      }
      expect(broken).toEqual([])
    })
  }
})
