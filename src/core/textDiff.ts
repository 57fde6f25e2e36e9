/**
 * A unified diff of two texts, as the terminal and the viewer show an edit: `--- a/path`, `+++ b/path`, then
 * hunks with three lines of context. Pure. The lines between the common head and tail are
 * matched by a longest-common-subsequence table when that table is small; past that (two large,
 * wholly different middles) they are shown as removed then added — still a correct diff, only
 * not the shortest.
 */

/** Cells of the LCS table at most: about 16 MB of counts. */
const MAX_TABLE = 4_000_000

export type DiffLine = { readonly kind: " " | "-" | "+"; readonly text: string }

const splitLines = (text: string): Array<string> => {
  if (text === "") return []
  const lines = text.split("\n")
  if (lines.at(-1) === "") lines.pop()
  return lines
}

/** Every line of both texts, each kept (" "), removed ("-") or added ("+"), in order. */
export const diffLines = (before: string, after: string): Array<DiffLine> => {
  const a = splitLines(before)
  const b = splitLines(after)
  let head = 0
  while (head < a.length && head < b.length && a[head] === b[head]) head++
  let tail = 0
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++
  const middleA = a.slice(head, a.length - tail)
  const middleB = b.slice(head, b.length - tail)
  const lines: Array<DiffLine> = a.slice(0, head).map((text) => ({ kind: " ", text }))
  const n = middleA.length
  const m = middleB.length
  if (n * m > MAX_TABLE) {
    for (const text of middleA) lines.push({ kind: "-", text })
    for (const text of middleB) lines.push({ kind: "+", text })
  } else {
    // lengths[i * (m + 1) + j]: the LCS of middleA[i..] and middleB[j..].
    const lengths = new Uint32Array((n + 1) * (m + 1))
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lengths[i * (m + 1) + j] = middleA[i] === middleB[j]
          ? lengths[(i + 1) * (m + 1) + j + 1]! + 1
          : Math.max(lengths[(i + 1) * (m + 1) + j]!, lengths[i * (m + 1) + j + 1]!)
      }
    }
    let i = 0
    let j = 0
    while (i < n || j < m) {
      if (i < n && j < m && middleA[i] === middleB[j]) {
        lines.push({ kind: " ", text: middleA[i]! })
        i++
        j++
      } else if (i < n && (j === m || lengths[(i + 1) * (m + 1) + j]! >= lengths[i * (m + 1) + j + 1]!)) {
        // Removals before additions, as diff -u shows a changed block.
        lines.push({ kind: "-", text: middleA[i++]! })
      } else {
        lines.push({ kind: "+", text: middleB[j++]! })
      }
    }
  }
  for (const text of a.slice(a.length - tail)) lines.push({ kind: " ", text })
  return lines
}

/**
 * The unified diff of `before` → `after` for `path` (`undefined`: the file did not exist, or is
 * gone), as lines; empty when nothing changed.
 */
export const unifiedDiff = (path: string, before: string | undefined, after: string | undefined, context = 3): Array<string> => {
  const lines = diffLines(before ?? "", after ?? "")
  const changed = lines.flatMap((line, index) => line.kind === " " ? [] : [index])
  if (changed.length === 0) return []
  const out = [before === undefined ? "--- /dev/null" : `--- a/${path}`, after === undefined ? "+++ /dev/null" : `+++ b/${path}`]
  // Group changes whose contexts touch into one hunk.
  let start = 0
  while (start < changed.length) {
    let end = start
    while (end + 1 < changed.length && changed[end + 1]! - changed[end]! <= 2 * context + 1) end++
    const from = Math.max(0, changed[start]! - context)
    const to = Math.min(lines.length, changed[end]! + context + 1)
    // Line numbers: how many lines of each side come before the hunk.
    let oldLine = 0
    let newLine = 0
    for (const line of lines.slice(0, from)) {
      if (line.kind !== "+") oldLine++
      if (line.kind !== "-") newLine++
    }
    const hunk = lines.slice(from, to)
    const oldCount = hunk.filter((line) => line.kind !== "+").length
    const newCount = hunk.filter((line) => line.kind !== "-").length
    out.push(`@@ -${oldCount === 0 ? oldLine : oldLine + 1},${oldCount} +${newCount === 0 ? newLine : newLine + 1},${newCount} @@`)
    for (const line of hunk) out.push(`${line.kind}${line.text}`)
    start = end + 1
  }
  return out
}
