/**
 * Prompts as the user means them, from the line editor's lines: a line ending in `\` goes on on
 * the next (the `\` dropped), and the lines of one paste are one prompt — the terminal marks a
 * paste (bracketed paste mode, turned on here while a terminal is used), so the newlines in it do
 * not send it line by line. While a prompt goes on, the line editor shows `… `.
 */
import type { Interface } from "node:readline"

export const BRACKETED_PASTE_ON = "\u001b[?2004h"
export const BRACKETED_PASTE_OFF = "\u001b[?2004l"

export interface PromptLines extends AsyncIterable<string> {
  /** The prompt the editor shows: `> `, or `… ` while a prompt goes on. */
  readonly prompt: () => string
  /** Drop the lines of a prompt begun (Ctrl-C); false when none was. */
  readonly discard: () => boolean
}

export const promptLines = (rl: Interface, input: NodeJS.ReadStream): PromptLines => {
  let pasting = false
  let pending: Array<string> = []
  const ready: Array<string> = []
  let wake: (() => void) | undefined
  let closed = false
  const submit = (text: string) => {
    ready.push(text)
    wake?.()
  }
  input.on("keypress", (_text: unknown, key: { readonly name?: string } | undefined) => {
    if (key?.name === "paste-start") pasting = true
    if (key?.name === "paste-end") {
      pasting = false
      // The paste's last line is still in the editor: it goes on the prompt begun.
      if (pending.length > 0) {
        rl.setPrompt("… ")
        rl.prompt(true)
      }
    }
  })
  // Synchronous with the editor: a line ended inside a paste is seen while `pasting` still says so.
  rl.on("line", (line: string) => {
    if (pasting) {
      pending.push(line)
      return
    }
    if (line.endsWith("\\")) {
      pending.push(line.slice(0, -1))
      rl.setPrompt("… ")
      rl.prompt()
      return
    }
    const whole = [...pending, line].join("\n")
    pending = []
    submit(whole)
  })
  rl.on("close", () => {
    closed = true
    wake?.()
  })
  return {
    prompt: () => pending.length > 0 ? "… " : "> ",
    discard: () => {
      const had = pending.length > 0
      pending = []
      return had
    },
    async *[Symbol.asyncIterator]() {
      for (;;) {
        const next = ready.shift()
        if (next !== undefined) {
          yield next
          continue
        }
        if (closed) return
        await new Promise<void>((resolve) => wake = resolve)
        wake = undefined
      }
    }
  }
}
