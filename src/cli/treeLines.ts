/**
 * The lines the terminal draws for a session's tree (`/tree`) and for the rewind picker, from the
 * one picture of the tree (`treePicture`). Pure: a row and the terminal's width in, a line out.
 * Each line fits the width (the prompt is what is shortened, never the seq or the label), so a
 * list of any length redraws in place.
 */
import type { PictureRow } from "../core/treePicture.js"
import { shorten } from "./render.js"

/** The selection marker's columns, before each row. */
const MARKER = 2

/** Within this long, a time is shown by its clock alone. */
const RECENT_MS = 12 * 60 * 60_000

/** A time as the lists show it: HH:MM within the last 12 hours, else MM-DD HH:MM (local time). */
export const shortTime = (ts: number, now: number = Date.now()): string => {
  const at = new Date(ts)
  const pad = (value: number) => String(value).padStart(2, "0")
  const clock = `${pad(at.getHours())}:${pad(at.getMinutes())}`
  return now - ts >= 0 && now - ts < RECENT_MS ? clock : `${pad(at.getMonth() + 1)}-${pad(at.getDate())} ${clock}`
}

/** What comes before a row's text: its depth, and `╰─` where a side branch parts. */
const indentOf = (row: PictureRow): string =>
  row.depth === 0 ? "" : `${"   ".repeat(row.depth - 1)}${row.parts ? "╰─ " : "   "}`

/** `"prompt"` shortened to what is left of `width` after `before` and `after`. */
const quoted = (prompt: string, width: number, before: string, after = ""): string =>
  `"${shorten(prompt, Math.max(12, width - MARKER - before.length - after.length - 2))}"${after}`

/** One row of `/tree`, at most `width` columns with the selection marker. */
export const treeRowText = (row: PictureRow, width: number, now?: number): string => {
  const indent = indentOf(row)
  if (row.kind === "checkpoint") {
    const checkpoint = row.checkpoint!
    const head = `${indent}${String(checkpoint.seq).padStart(4)}  ${shortTime(checkpoint.ts, now)}  ${checkpoint.label === undefined ? "" : `[${shorten(checkpoint.label, 30)}] `}`
    return `${head}${quoted(checkpoint.prompt, width, head)}`
  }
  const label = row.branch.label === undefined ? "" : ` [${shorten(row.branch.label, 30)}]`
  if (row.here) return `${indent}● you are here (tip ${row.seq})${label}`
  const folded = row.folded === undefined ? "" : ` · ${row.folded} row${row.folded === 1 ? "" : "s"} folded (→ shows them)`
  return `${indent}○ tip ${row.seq}${label}${folded}`
}

/** A checkpoint in the rewind picker: seq, time, prompt, and how many files a restore there puts back. */
export const rewindRowText = (
  checkpoint: { readonly seq: number; readonly ts: number; readonly prompt: string; readonly files: ReadonlyArray<string> },
  width: number,
  now?: number
): string => {
  const head = `${String(checkpoint.seq).padStart(4)}  ${shortTime(checkpoint.ts, now)}  `
  const files = checkpoint.files.length
  return `${head}${quoted(checkpoint.prompt, width, head, `  ${files === 0 ? "no files" : files === 1 ? "1 file" : `${files} files`} changed since`)}`
}
