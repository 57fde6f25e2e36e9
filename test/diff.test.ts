/**
 * The terminal's unified diffs: applying a diff's hunks to the old text gives the new one (for
 * random texts), its line counts add up, and it is as short as a diff can be (the lines kept
 * are a longest common subsequence) when the texts are small enough to match exactly.
 */
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { diffLines, unifiedDiff } from "../src/core/textDiff.js"

const linesOf = (text: string) => (text === "" ? [] : text.replace(/\n$/, "").split("\n"))

/** `before` with the hunks of `diff` applied, checking each hunk's header against its lines. */
const apply = (before: string, diff: ReadonlyArray<string>): Array<string> => {
  const old = linesOf(before)
  const out: Array<string> = []
  let at = 0
  let index = 2
  while (index < diff.length) {
    const header = /^@@ -(\d+),(\d+) \+(\d+),(\d+) @@$/.exec(diff[index]!)
    expect(header, diff[index]).not.toBeNull()
    const [oldStart, oldCount, , newCount] = header!.slice(1).map(Number) as [number, number, number, number]
    const start = oldCount === 0 ? oldStart : oldStart - 1
    out.push(...old.slice(at, start))
    at = start
    index++
    let seenOld = 0
    let seenNew = 0
    while (index < diff.length && !diff[index]!.startsWith("@@")) {
      const line = diff[index++]!
      const text = line.slice(1)
      if (line[0] !== "+") {
        expect(old[at]).toBe(text)
        at++
        seenOld++
      }
      if (line[0] !== "-") {
        out.push(text)
        seenNew++
      }
    }
    expect([seenOld, seenNew]).toEqual([oldCount, newCount])
  }
  return [...out, ...old.slice(at)]
}

const lcs = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): number => {
  const table = Array.from({ length: a.length + 1 }, () => new Array<number>(b.length + 1).fill(0))
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      table[i]![j] = a[i] === b[j] ? table[i + 1]![j + 1]! + 1 : Math.max(table[i + 1]![j]!, table[i]![j + 1]!)
    }
  }
  return table[0]![0]!
}

const text = fc.array(fc.constantFrom("a", "b", "c", "d", "", "x y"), { maxLength: 30 }).map((lines) => lines.map((line) => `${line}\n`).join(""))

describe("unified diffs", () => {
  it("applied to the old text, give the new one; the kept lines are a longest common subsequence", () => {
    fc.assert(
      fc.property(text, text, (before, after) => {
        const diff = unifiedDiff("f.txt", before, after)
        if (before === after) {
          expect(diff).toEqual([])
          return
        }
        expect(diff.slice(0, 2)).toEqual(["--- a/f.txt", "+++ b/f.txt"])
        expect(apply(before, diff)).toEqual(linesOf(after))
        const kept = diffLines(before, after).filter((line) => line.kind === " ").length
        expect(kept).toBe(lcs(linesOf(before), linesOf(after)))
      }),
      { numRuns: 300 }
    )
  })

  it("a new file and a deleted one are diffed against /dev/null", () => {
    expect(unifiedDiff("n.txt", undefined, "one\ntwo\n")).toEqual(["--- /dev/null", "+++ b/n.txt", "@@ -0,0 +1,2 @@", "+one", "+two"])
    expect(unifiedDiff("n.txt", "one\n", undefined)).toEqual(["--- a/n.txt", "+++ /dev/null", "@@ -1,1 +0,0 @@", "-one"])
  })

  it("changes far apart are separate hunks with three lines of context", () => {
    const before = Array.from({ length: 20 }, (_, i) => `line ${i}\n`).join("")
    const after = before.replace("line 2\n", "LINE 2\n").replace("line 17\n", "LINE 17\n")
    const diff = unifiedDiff("f.txt", before, after)
    expect(diff.filter((line) => line.startsWith("@@"))).toEqual(["@@ -1,6 +1,6 @@", "@@ -15,6 +15,6 @@"])
  })
})
