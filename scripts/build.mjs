// Builds @lite-agent/sdk into packages/sdk from the one source tree: the sources it maps to
// (src/), the compiled modules and declarations (dist/), the CLI's scripted examples and the
// README. The other packages are re-exports of its subpaths and need no build.
import { execFileSync } from "node:child_process"
import { cpSync, rmSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"

const root = join(dirname(new URL(import.meta.url).pathname), "..")
const sdk = join(root, "packages", "sdk")
for (const built of ["dist", "src", "examples", "README.md"]) rmSync(join(sdk, built), { recursive: true, force: true })
cpSync(join(root, "src"), join(sdk, "src"), { recursive: true })
cpSync(join(root, "examples", "cli"), join(sdk, "examples", "cli"), { recursive: true })
cpSync(join(root, "README.md"), join(sdk, "README.md"))
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], { cwd: root, stdio: "inherit" })
