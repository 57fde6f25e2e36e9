/** Permission rules by pattern (src/agent/permissionRules.ts): what each kind of pattern covers, as an allow rule and as a deny rule. */
import { describe, expect, it } from "vitest"
import { parseToolRule, ruleMatches, splitRules, type ToolRule } from "../src/agent/permissionRules.js"
import { TOOL_NAMES } from "../src/agent/tools.js"

const rule = (text: string): ToolRule => {
  const parsed = parseToolRule(text, TOOL_NAMES)
  if (typeof parsed === "string") throw new Error(parsed)
  return parsed
}
const allows = (text: string, tool: string, input: unknown) => ruleMatches(rule(text), tool, input as never, true)
const denies = (text: string, tool: string, input: unknown) => ruleMatches(rule(text), tool, input as never, false)

describe("permission rules by pattern", () => {
  it("a command glob covers the whole command; an allow rule never a line with a shell operator, a deny rule any command of it", () => {
    expect(allows("shell(git status*)", "shell", { command: "git status" })).toBe(true)
    expect(allows("shell(git status*)", "shell", { command: "git status --short" })).toBe(true)
    expect(allows("shell(git status*)", "shell", { command: "git statusx" })).toBe(true)
    expect(allows("shell(git status)", "shell", { command: "git status --short" })).toBe(false)
    for (const joined of ["git status; rm -rf ~", "git status && rm x", "git status | sh", "git status > f", "git status $(rm x)", "git status `rm x`", "git status &", "git status\nrm x"]) {
      expect(allows("shell(git status*)", "shell", { command: joined }), joined).toBe(false)
    }
    expect(denies("shell(rm *)", "shell", { command: "make && rm -rf build" })).toBe(true)
    expect(denies("shell(rm *)", "shell", { command: "echo rm" })).toBe(false)
    expect(allows("shell(git status*)", "write_file", { path: "git status" })).toBe(false)
  })

  it("a path glob: * within a directory, ** any directories, ? one character; a path out of the workdir is never allowed", () => {
    expect(allows("write_file(src/**)", "write_file", { path: "src/a/b/c.ts" })).toBe(true)
    expect(allows("write_file(src/**)", "write_file", { path: "./src/x.ts" })).toBe(true)
    expect(allows("write_file(src/*.ts)", "write_file", { path: "src/a/b.ts" })).toBe(false)
    expect(allows("write_file(src/**/*.ts)", "write_file", { path: "src/b.ts" })).toBe(true)
    expect(allows("write_file(src/**/*.ts)", "write_file", { path: "src/a/b.ts" })).toBe(true)
    expect(allows("edit_file(?.md)", "edit_file", { path: "a.md" })).toBe(true)
    expect(allows("edit_file(?.md)", "edit_file", { path: "ab.md" })).toBe(false)
    expect(allows("write_file(src/**)", "write_file", { path: "src/../../etc/passwd" })).toBe(false)
    expect(allows("write_file(**)", "write_file", { path: "/etc/passwd" })).toBe(false)
    expect(denies("write_file(/etc/**)", "write_file", { path: "/etc/passwd" })).toBe(true)
    expect(allows("write_file(src/**)", "write_file", { path: "src2/x" })).toBe(false)
  })

  it("a list splits at commas outside parentheses; a bad rule says what is wrong", () => {
    expect(splitRules("shell(git log --format=%h,%s), write_file(src/**),read_file")).toEqual(["shell(git log --format=%h,%s)", "write_file(src/**)", "read_file"])
    expect(parseToolRule("bash(ls)", TOOL_NAMES)).toContain('no tool "bash"')
    expect(parseToolRule("shell( )", TOOL_NAMES)).toContain("the pattern in parentheses is empty")
    expect(parseToolRule("shell(ls", TOOL_NAMES)).toContain("is not a rule")
  })
})
