// Builds @lite-agent/sdk into packages/sdk from the one source tree: the sources it maps to
// (src/), the compiled modules and declarations (dist/), the command's startup-snapshot bundle
// and its bin (bin/lite-agent), the CLI's scripted examples and the README. The other packages are re-exports of its subpaths and need no build.
import { execFileSync } from "node:child_process"
import { createHash } from "node:crypto"
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"

const root = join(dirname(new URL(import.meta.url).pathname), "..")
const sdk = join(root, "packages", "sdk")
for (const built of ["dist", "src", "examples", "bin", "README.md"]) rmSync(join(sdk, built), { recursive: true, force: true })
cpSync(join(root, "src"), join(sdk, "src"), { recursive: true })
cpSync(join(root, "examples", "cli"), join(sdk, "examples", "cli"), { recursive: true })
cpSync(join(root, "README.md"), join(sdk, "README.md"))
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc")
execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], { cwd: root, stdio: "inherit" })

// The viewer (src/viewer, browser code: not compiled by tsc) as the server loads it: dist/viewer.
const { writeViewer } = await import(join(sdk, "dist", "server", "viewerAssets.js"))
await writeViewer(join(root, "src", "viewer"), join(sdk, "dist", "viewer"))

// The command's startup snapshot entry, bundled into one CommonJS script (what
// `node --build-snapshot` takes). While a snapshot is built only built-in modules can be
// required; the banner lets the snapshot's process require packages once it runs (snapshot.ts).
const esbuild = createRequire(import.meta.url)("esbuild")
const distCli = join(sdk, "dist", "cli")
// `import.meta.url` (the server finds the viewer's files by it) is, from the snapshot, that of
// the installed dist/cli/main.js the process was started with: the same depth as dist/server.
const requireBanner = [
  "let __liteAgentRuntimeRequire;",
  "let __liteAgentImportMetaUrl = \"\";",
  "const __liteAgentBuiltinRequire = require;",
  "require = (id) => (__liteAgentRuntimeRequire ?? __liteAgentBuiltinRequire)(id);",
  "var __liteAgentUseRequire = (runtimeRequire) => {",
  "  __liteAgentRuntimeRequire = runtimeRequire;",
  "  __liteAgentImportMetaUrl = __liteAgentBuiltinRequire(\"node:url\").pathToFileURL(process.argv[1]).href;",
  "};"
].join("\n")
esbuild.buildSync({
  entryPoints: [join(root, "src", "cli", "snapshot.ts")],
  outfile: join(distCli, "snapshot.cjs"),
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  // A snapshot holds the bundle's source (functions compile from it when first called): the
  // smaller, the faster every start. Names are kept: errors are shown by their class.
  minify: true,
  keepNames: true,
  // Loaded on demand, from the installed package: native, or optional peers.
  // esbuild: only a source checkout bundles the viewer on the fly (src/server/viewerAssets.ts).
  external: ["better-sqlite3", "pg", "@effect/sql", "@effect/sql-pg", "@effect/sql-sqlite-node", "@parcel/watcher", "esbuild"],
  banner: { js: requireBanner },
  define: { "import.meta.url": "__liteAgentImportMetaUrl" },
  logLevel: "error"
})
// The build's id: a snapshot of another build is never used.
const id = createHash("sha256").update(readFileSync(join(distCli, "snapshot.cjs"))).digest("hex").slice(0, 12)
writeFileSync(join(distCli, "snapshot.json"), `${JSON.stringify({ id })}\n`)

// The bin: node started from the snapshot for this node binary when there is one (see
// src/cli/snapshotCache.ts for its name), else the command as usual (which builds one).
mkdirSync(join(sdk, "bin"), { recursive: true })
writeFileSync(join(sdk, "bin", "lite-agent"), `#!/bin/sh
# The lite-agent command: node started from a snapshot of the loaded command when one was built
# for this node binary (the first start builds it in the background), else as usual.
# LITE_AGENT_NO_SNAPSHOT=1 never uses one; nor does a start with NODE_OPTIONS set.
# Forks are what a shell script's start costs: only a symlink (npm's bin links) is resolved by one.
self=$0
if [ -L "$self" ]; then self=$(readlink -f "$self" 2>/dev/null || realpath "$self" 2>/dev/null || echo "$self"); fi
case "$self" in */*) dir=\${self%/*} ;; *) dir=. ;; esac
main=$dir/../dist/cli/main.js
node=
saved_ifs=$IFS; IFS=:
for entry in $PATH; do if [ -f "\${entry:-.}/node" ] && [ -x "\${entry:-.}/node" ]; then node=\${entry:-.}/node; break; fi; done
IFS=$saved_ifs
[ -n "$node" ] || { echo "lite-agent: node is not on the PATH" >&2; exit 1; }
case " $* " in
  *" --help "*|*" -h "*|*" --version "*) exec "$node" "$main" "$@" ;;
esac
# A snapshot loads only under the V8 flags it was built with: none from NODE_OPTIONS.
if [ -z "$LITE_AGENT_NO_SNAPSHOT" ] && [ -z "$NODE_OPTIONS" ] && key=$(stat -L -c '%Y-%s' "$node" 2>/dev/null); then
  blob="\${LITE_AGENT_HOME:-$HOME/.lite-agent}/cache/cli-${id}-$key.blob"
  if [ -f "$blob" ]; then exec "$node" --snapshot-blob "$blob" "$main" "$@"; fi
fi
exec "$node" "$main" "$@"
`, { mode: 0o755 })
