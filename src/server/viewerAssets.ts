/**
 * The viewer's files (src/viewer): the page shell, its script and its style sheet. The built
 * package has them beside the compiled server (dist/viewer, written by `writeViewer` from
 * scripts/build.mjs); a source checkout has the TypeScript instead, bundled here on first use
 * with esbuild (a development dependency, never loaded by the built package).
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

export interface ViewerAssets {
  readonly html: string
  readonly script: string
  readonly style: string
}

/** The page's script: src/viewer/app.ts and what it imports, one ES module (types only from the server's API). */
const bundleViewer = async (sourceDir: string): Promise<string> => {
  const esbuild = await import("esbuild")
  const built = await esbuild.build({
    entryPoints: [join(sourceDir, "app.ts")],
    bundle: true,
    write: false,
    format: "esm",
    target: "es2022",
    minify: true,
    legalComments: "none",
    logLevel: "silent"
  })
  return built.outputFiles[0]!.text
}

/** Write the viewer as the server loads it (app.js, index.html, viewer.css) into `outDir`. */
export const writeViewer = async (sourceDir: string, outDir: string): Promise<void> => {
  mkdirSync(outDir, { recursive: true })
  writeFileSync(join(outDir, "app.js"), await bundleViewer(sourceDir))
  for (const file of ["index.html", "viewer.css"]) copyFileSync(join(sourceDir, file), join(outDir, file))
}

/** The viewer's files, or undefined when this installation has none (then `/` says so). */
export const loadViewerAssets = async (): Promise<ViewerAssets | undefined> => {
  // Beside this module's directory: dist/viewer in the package, src/viewer in a checkout.
  const viewerDir = fileURLToPath(new URL("../viewer/", import.meta.url))
  const read = (name: string) => readFileSync(join(viewerDir, name), "utf8")
  if (existsSync(join(viewerDir, "app.js"))) return { html: read("index.html"), script: read("app.js"), style: read("viewer.css") }
  if (!existsSync(join(viewerDir, "app.ts"))) return undefined
  return { html: read("index.html"), script: await bundleViewer(viewerDir), style: read("viewer.css") }
}
