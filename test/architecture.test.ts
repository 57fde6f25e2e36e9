/**
 * The import graph has floors: the pure core (src/core) at the bottom, then the backends and
 * tools, then the agent, then the facade and providers; the entry points (one file per package
 * subpath, at the top of src/) are the only files that re-export. Nothing imports upward.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join, relative, resolve } from "node:path"
import { describe, expect, it } from "vitest"

const src = resolve(import.meta.dirname, "..", "src")

const sourcesUnder = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sourcesUnder(join(dir, entry.name)) : entry.name.endsWith(".ts") ? [join(dir, entry.name)] : []
  )

/** Every module a file imports or re-exports from (static `from "…"` clauses and dynamic imports). */
const importsOf = (file: string) =>
  [...readFileSync(file, "utf8").matchAll(/(?:from|import)\s*\(?\s*"([^"]+)"/g)].map((match) => match[1]!)

const ENTRY_POINTS = ["index.ts", "core.ts", "checkpoint-sqlite.ts", "checkpoint-postgres.ts", "provider.ts", "server.ts", "testing.ts"]

describe("module boundaries", () => {
  it("no file under src/core imports from outside src/core (Effect and Node built-ins aside)", () => {
    const upward = sourcesUnder(join(src, "core")).flatMap((file) =>
      importsOf(file)
        .filter((target) => target.startsWith(".") && !resolve(file, "..", target).startsWith(join(src, "core") + "/"))
        .map((target) => `${relative(src, file)} imports ${target}`)
    )
    expect(upward).toEqual([])
  })

  it("the CLI (src/cli) is loaded by nothing else", () => {
    const intoCli = sourcesUnder(src)
      .filter((file) => !file.startsWith(join(src, "cli") + "/"))
      .flatMap((file) =>
        importsOf(file)
          .filter((target) => target.startsWith(".") && resolve(file, "..", target).startsWith(join(src, "cli") + "/"))
          .map((target) => `${relative(src, file)} imports ${target}`)
      )
    expect(intoCli).toEqual([])
  })

  it("only the command and the server (src/cli, src/server and its entry point) load @effect/platform-node; only the command loads the server", () => {
    const allowedNode = (file: string) =>
      file.startsWith(join(src, "cli") + "/") || file.startsWith(join(src, "server") + "/") || file === join(src, "server.ts")
    const offenders = sourcesUnder(src).filter((file) => !file.startsWith(join(src, "viewer") + "/")).flatMap((file) =>
      importsOf(file)
        .filter((target) =>
          (target.startsWith("@effect/platform-node") && !allowedNode(file)) ||
          (target.startsWith(".") && resolve(file, "..", target).startsWith(join(src, "server") + "/") &&
            !allowedNode(file))
        )
        .map((target) => `${relative(src, file)} imports ${target}`)
    )
    expect(offenders).toEqual([])
  })

  it("the viewer (src/viewer, browser code) imports only its own modules, the server's API as types, and core modules that import nothing", () => {
    const viewer = join(src, "viewer")
    /** A module of the pure core that imports nothing (the tree's picture): the same code in the page and the terminal. */
    const selfContainedCore = (target: string, from: string) => {
      const path = resolve(from, "..", target).replace(/\.js$/, ".ts")
      return path.startsWith(join(src, "core") + "/") && existsSync(path) && importsOf(path).length === 0
    }
    const offenders = sourcesUnder(viewer).flatMap((file) => {
      const source = readFileSync(file, "utf8")
      const typeOnly = new Set([...source.matchAll(/import type\s[^;]*?from\s*"([^"]+)"/g)].map((match) => match[1]!))
      return importsOf(file)
        .filter((target) => {
          const own = target.startsWith(".") && resolve(file, "..", target).startsWith(viewer + "/")
          const apiTypes = typeOnly.has(target) && (target === "effect" || resolve(file, "..", target) === join(src, "server", "api.js"))
          return !own && !apiTypes && !selfContainedCore(target, file)
        })
        .map((target) => `${relative(src, file)} imports ${target}`)
    })
    expect(offenders).toEqual([])
  })

  it("the entry points are the files at the top of src/, one per subpath of @lite-agent/sdk", () => {
    const top = readdirSync(src).filter((name) => name.endsWith(".ts")).sort()
    expect(top).toEqual([...ENTRY_POINTS].sort())
    const exported = Object.keys(
      (JSON.parse(readFileSync(join(src, "..", "packages", "sdk", "package.json"), "utf8")) as { exports: Record<string, unknown> }).exports
    ).filter((subpath) => subpath !== "./package.json")
    expect(exported.sort()).toEqual([".", "./checkpoint-postgres", "./checkpoint-sqlite", "./core", "./provider", "./server", "./testing"])
  })

  it("every service's Tag key names the folder of its module (@lite-agent/<folder>/<Service>)", () => {
    const misnamed = sourcesUnder(src).flatMap((file) =>
      [...readFileSync(file, "utf8").matchAll(/Context\.Tag\("([^"]+)"\)/g)]
        .map((match) => match[1]!)
        .filter((key) => !key.startsWith(`@lite-agent/${relative(src, join(file, ".."))}/`))
        .map((key) => `${relative(src, file)}: ${key}`)
    )
    expect(misnamed).toEqual([])
  })

  it("no file below the top of src/ is a barrel (a file of re-exports only)", () => {
    const barrels = sourcesUnder(src)
      .filter((file) => !ENTRY_POINTS.includes(relative(src, file)))
      .filter((file) => {
        const code = readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, "").trim()
        const statements = code.split(/\n(?=\S)/).filter((statement) => statement.trim().length > 0)
        return statements.length > 0 && statements.every((statement) => /^export\s+(\*|\{|type\s+\{)/.test(statement.trim()))
      })
      .map((file) => relative(src, file))
    expect(barrels).toEqual([])
  })

  it("no import cycle anywhere in src/, type-only imports included", () => {
    const files = sourcesUnder(src)
    const edges = new Map(
      files.map((file) => [
        file,
        importsOf(file).filter((target) => target.startsWith(".")).map((target) => resolve(file, "..", target).replace(/\.js$/, ".ts"))
      ])
    )
    // Tarjan's strongly connected components: any component of more than one file (or a file importing itself) is a cycle.
    const index = new Map<string, number>()
    const lowLink = new Map<string, number>()
    const stack: Array<string> = []
    const onStack = new Set<string>()
    const cycles: Array<Array<string>> = []
    let next = 0
    const visit = (file: string) => {
      index.set(file, next)
      lowLink.set(file, next++)
      stack.push(file)
      onStack.add(file)
      for (const target of edges.get(file) ?? []) {
        if (!edges.has(target)) continue
        if (!index.has(target)) {
          visit(target)
          lowLink.set(file, Math.min(lowLink.get(file)!, lowLink.get(target)!))
        } else if (onStack.has(target)) lowLink.set(file, Math.min(lowLink.get(file)!, index.get(target)!))
      }
      if (lowLink.get(file) !== index.get(file)) return
      const component: Array<string> = []
      for (let member = stack.pop()!; ; member = stack.pop()!) {
        onStack.delete(member)
        component.push(relative(src, member))
        if (member === file) break
      }
      if (component.length > 1 || (edges.get(file) ?? []).includes(file)) cycles.push(component.sort())
    }
    for (const file of files) if (!index.has(file)) visit(file)
    expect(cycles).toEqual([])
  })

  it("no entry point re-exports from an internal/ folder", () => {
    const leaks = ENTRY_POINTS.flatMap((entry) =>
      [...readFileSync(join(src, entry), "utf8").matchAll(/export\s[^;]*?from\s*"([^"]+)"/g)]
        .map((match) => match[1]!)
        .filter((target) => target.split("/").includes("internal"))
        .map((target) => `${entry} re-exports ${target}`)
    )
    expect(leaks).toEqual([])
  })

  it("no file under src/ is longer than 450 lines: one job per file", () => {
    const long = sourcesUnder(src)
      .map((file) => [relative(src, file), readFileSync(file, "utf8").split("\n").length] as const)
      .filter(([, lines]) => lines > 450)
    expect(long).toEqual([])
  })
})
