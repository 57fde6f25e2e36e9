/**
 * Vitest's global setup: the sources and the test workers transpiled to JavaScript once per run
 * (esbuild, file by file, with inline source maps), so the processes the tests start run plain
 * Node. Compiling TypeScript at each start (tsx) cost about 1.6 s of CPU a process, and the
 * suite starts a few hundred.
 */
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { build } from "esbuild"
import type { TestProject } from "vitest/node"
import { writeViewer } from "../../src/server/viewerAssets.js"

const root = resolve(import.meta.dirname, "..", "..")

declare module "vitest" {
  export interface ProvidedContext {
    /** Where the transpiled tree is: `<it>/src`, `<it>/test/workers`, `<it>/test/support`. */
    readonly compiledRoot: string
  }
}

const typescriptUnder = (dir: string): Array<string> =>
  (readdirSync(join(root, dir), { recursive: true }) as Array<string>)
    .filter((file) => file.endsWith(".ts") && !file.endsWith(".d.ts"))
    .map((file) => join(root, dir, file))

export default async function setup(project: TestProject) {
  // Inside the repository, so bare imports resolve from its node_modules; one directory per run.
  const out = join(root, ".test-js", String(process.pid))
  rmSync(out, { recursive: true, force: true })
  mkdirSync(out, { recursive: true })
  writeFileSync(join(out, "package.json"), JSON.stringify({ type: "module", private: true }))
  await build({
    // The viewer is browser code: bundled below, as the built package has it.
    entryPoints: [
      ...typescriptUnder("src").filter((file) => !file.startsWith(join(root, "src", "viewer") + "/")),
      ...typescriptUnder("test/workers"),
      ...typescriptUnder("test/support")
    ],
    outdir: out,
    outbase: root,
    format: "esm",
    platform: "node",
    target: "node20",
    sourcemap: "inline",
    logLevel: "silent"
  })
  await writeViewer(join(root, "src", "viewer"), join(out, "src", "viewer"))
  project.provide("compiledRoot", out)
  return () => rmSync(out, { recursive: true, force: true })
}
