/**
 * The \`lite-agent\` command in a real pseudo-terminal (util-linux \`script\`), driven by
 * keystrokes; the screen read back as text (escape codes and carriage returns removed) or raw.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { join, resolve } from "node:path"
import { afterEach } from "vitest"
import { tempDir } from "./agent.js"
import { nodeArgs } from "./processes.js"

export const root = resolve(import.meta.dirname, "..", "..")
const main = join(root, "src", "cli", "main.ts")
const live = new Set<ChildProcess>()
afterEach(() => {
  for (const child of live) child.kill("SIGKILL")
  live.clear()
})

const quote = (arg: string) => `'${arg.replaceAll("'", "'\\''")}'`
// eslint-disable-next-line no-control-regex
export const plain = (text: string) => text.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, "").replace(/\r/g, "")

/**
 * The command in a pseudo-terminal; `env` adds to (or, with undefined, removes from) its
 * environment; `stderrTo` sends its stderr to that file (`2>file`), the terminal staying its stdin.
 */
export const terminal = (args: ReadonlyArray<string>, extraEnv: NodeJS.ProcessEnv = {}, options: { readonly stderrTo?: string } = {}) => {
  const redirect = options.stderrTo === undefined ? "" : ` 2>${quote(options.stderrTo)}`
  const command = `stty cols 250 rows 50; exec ${[process.execPath, ...nodeArgs(main), ...args].map(quote).join(" ")}${redirect}`
  const env: NodeJS.ProcessEnv = { ...process.env, LITE_AGENT_HOME: tempDir("tty-home"), TERM: "dumb", ...extraEnv }
  delete env.ANTHROPIC_API_KEY
  for (const [key, value] of Object.entries(extraEnv)) if (value === undefined) delete env[key]
  const child = spawn("script", ["-qfec", command, "/dev/null"], { cwd: root, env, stdio: ["pipe", "pipe", "pipe"] })
  live.add(child)
  let output = ""
  child.stdout!.setEncoding("utf8")
  child.stdout!.on("data", (data: string) => {
    output += data
  })
  const closed = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
  let mark = 0
  return {
    /** Everything shown since the last `waitFor` matched. */
    screen: () => plain(output).slice(mark),
    /** Everything written to the terminal, escape codes and all. */
    raw: () => output,
    type: (keys: string) => child.stdin!.write(keys),
    /** Wait until `text` appears after what earlier waits matched; returns the screen up to it. */
    waitFor: async (text: string, timeoutMs = 30_000) => {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const shown = plain(output)
        const at = shown.indexOf(text, mark)
        if (at >= 0) {
          const seen = shown.slice(mark, at + text.length)
          mark = at + text.length
          return seen
        }
        if (Date.now() > deadline) throw new Error(`"${text}" not shown in time; the screen:\n${shown.slice(mark)}`)
        await new Promise((r) => setTimeout(r, 20))
      }
    },
    closed
  }
}

