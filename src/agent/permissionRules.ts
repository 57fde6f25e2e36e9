/**
 * Permission rules by tool and, optionally, by what the call is about: `shell`, `write_file`, or
 * `shell(git status*)` (a command), `write_file(src/**)` (a path). Pure.
 *
 * - A command pattern is a glob over the whole command (`*` any text). An allow rule matches a
 *   plain command only: one with a shell operator (`;`, `&&`, `||`, `|`, `&`, a redirection, `$(`,
 *   a backtick, a newline) is asked about, so `git status*` never lets `git status; rm -rf ~` run.
 *   A deny rule matches when any command of the line matches (`rm *` denies `make && rm -rf x`).
 * - A path pattern is a glob over the path relative to the workdir (`*` within a directory, `**`
 *   any directories, `?` one character). A path that leaves the workdir matches no allow rule.
 */
import { posix } from "node:path"
import type { JsonValue } from "../core/events.js"

export interface ToolRule {
  readonly tool: string
  /** What the call must be about; absent: every call of the tool. */
  readonly pattern?: string | undefined
  /** The rule as written. */
  readonly text: string
}

/** Tools whose calls are about a path (their `path` input). */
const PATH_TOOLS: ReadonlySet<string> = new Set(["read_file", "write_file", "edit_file", "delete_file", "list_files", "chmod_file"])

/** A rule's text read, or what is wrong with it. */
export const parseToolRule = (text: string, toolNames: ReadonlyArray<string>): ToolRule | string => {
  const match = /^([a-z_]+)(?:\((.*)\))?$/s.exec(text.trim())
  if (match === null) return `${JSON.stringify(text)} is not a rule: a tool name, or a tool name and a pattern in parentheses (shell(git status*), write_file(src/**))`
  const [, tool, pattern] = match
  if (!toolNames.includes(tool!)) return `no tool ${JSON.stringify(tool)}; the tools are ${toolNames.join(", ")}`
  if (pattern === undefined) return { tool: tool!, text: text.trim() }
  if (pattern.trim() === "") return `${JSON.stringify(text)}: the pattern in parentheses is empty (leave the parentheses out for every call)`
  if (tool !== "shell" && !PATH_TOOLS.has(tool!)) return `${JSON.stringify(text)}: ${tool} takes no pattern`
  return { tool: tool!, pattern: pattern.trim(), text: text.trim() }
}

/** Rules in one comma-separated list: commas inside a rule's parentheses belong to its pattern. */
export const splitRules = (value: string): Array<string> => {
  const rules: Array<string> = []
  let depth = 0
  let current = ""
  for (const char of value) {
    if (char === "(") depth++
    if (char === ")") depth = Math.max(0, depth - 1)
    if (char === "," && depth === 0) {
      rules.push(current)
      current = ""
    } else current += char
  }
  rules.push(current)
  return rules.map((rule) => rule.trim()).filter((rule) => rule !== "")
}

const escapeRegExp = (text: string) => text.replace(/[.+^${}()|[\]\\]/g, "\\$&")

/** A command glob: `*` is any text, everything else itself. */
const commandRegExp = (pattern: string) => new RegExp(`^${pattern.split("*").map((part) => escapeRegExp(part).replace(/\?/g, "\\?")).join(".*")}$`, "s")

/** A path glob: `**` any directories, `*` within one, `?` one character. */
const pathRegExp = (pattern: string) => {
  let source = ""
  const glob = posix.normalize(pattern.replace(/^\.\//, ""))
  for (let index = 0; index < glob.length; index++) {
    const char = glob[index]!
    if (char === "*" && glob[index + 1] === "*") {
      // `**/` any directories (none too); a trailing `**` anything below.
      const slash = glob[index + 2] === "/"
      source += slash ? "(?:.*/)?" : ".*"
      index += slash ? 2 : 1
    } else if (char === "*") source += "[^/]*"
    else if (char === "?") source += "[^/]"
    else source += escapeRegExp(char)
  }
  return new RegExp(`^${source}$`)
}

/** The operators that join or redirect commands in a shell line. */
const SHELL_OPERATOR = /&&|\|\||[;|&\n<>`]|\$\(/

const stringInput = (input: JsonValue, key: string): string | undefined =>
  typeof input === "object" && input !== null && !Array.isArray(input) && typeof (input as Record<string, JsonValue>)[key] === "string"
    ? (input as Record<string, string>)[key]
    : undefined

/** The call's path relative to the workdir, or undefined when it leaves the workdir or names none. */
const relativePath = (input: JsonValue): string | undefined => {
  const path = stringInput(input, "path")
  if (path === undefined) return undefined
  const normal = posix.normalize(path.replace(/\\/g, "/"))
  return normal.startsWith("/") || normal === ".." || normal.startsWith("../") ? undefined : normal.replace(/^\.\//, "")
}

/** Whether `rule` covers the call, as an allow rule (`allow`) or as a deny rule. */
export const ruleMatches = (rule: ToolRule, toolName: string, input: JsonValue, allow: boolean): boolean => {
  if (rule.tool !== toolName) return false
  if (rule.pattern === undefined) return true
  if (toolName === "shell") {
    const command = (stringInput(input, "command") ?? "").trim()
    const pattern = commandRegExp(rule.pattern)
    if (allow) return !SHELL_OPERATOR.test(command) && pattern.test(command)
    return pattern.test(command) || command.split(/&&|\|\||[;|&\n]/).some((part) => pattern.test(part.trim()))
  }
  const path = relativePath(input)
  if (path === undefined) {
    // Out of the workdir: never allowed by a pattern; denied by one that names it as written.
    const written = stringInput(input, "path")
    return !allow && written !== undefined && pathRegExp(rule.pattern).test(posix.normalize(written))
  }
  return pathRegExp(rule.pattern).test(path)
}
