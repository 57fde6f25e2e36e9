/** How the terminal shows a tool's result: its first lines, and how many more it printed. */
import { describe, expect, it } from "vitest"
import { eventLine, RESULT_LINES } from "../src/cli/render.js"
import { shortTime } from "../src/cli/treeLines.js"
import { makePaint } from "../src/cli/terminal.js"

const paint = makePaint(false)
const result = (output: string, isError = false) =>
  eventLine({ type: "tool_end", sessionId: "s", toolUseId: "t", name: "shell", isError, output }, paint)

describe("a tool's result in the terminal", () => {
  it("shows its first lines and says how many more there are", () => {
    const output = Array.from({ length: 10 }, (_, index) => `line ${index + 1}`).join("\n")
    expect(result(`${output}\n`)).toBe(["  ← line 1", "    line 2", "    line 3", "    … +7 lines"].join("\n"))
    expect(RESULT_LINES).toBe(3)
  })

  it("a short output is shown whole, without a count; an error says so on its first line", () => {
    expect(result("exit 0\n")).toBe("  ← exit 0")
    expect(result("a\nb\nc\nd")).toBe(["  ← a", "    b", "    c", "    … +1 line"].join("\n"))
    expect(result("boom\nat x", true)).toBe(["  ← boom (error)", "    at x"].join("\n"))
  })
})

describe("a time in the terminal's lists", () => {
  it("the clock alone within the last 12 hours (across midnight too), else the day as well", () => {
    const at = new Date(2026, 11, 7, 23, 58).getTime()
    expect(shortTime(at, at + 5 * 60_000)).toBe("23:58")
    expect(shortTime(at, at + 13 * 60 * 60_000)).toBe("12-07 23:58")
  })
})
