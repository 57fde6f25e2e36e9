/**
 * How the command writes to a terminal: colours (only on a terminal, and never with `NO_COLOR`
 * or `--no-color`), a spinner with elapsed time and tokens while the model works (only on a
 * terminal; drawn with a carriage return and spaces, no escape codes), and coloured diffs.
 */
import type { Writable } from "node:stream"
import { isatty } from "node:tty"

/** A key as readline reports it. */
export interface Key {
  readonly name?: string | undefined
  readonly ctrl?: boolean | undefined
  /** Alt, or an Esc just before (readline reports Esc Esc typed at once as one meta Esc). */
  readonly meta?: boolean | undefined
}

/**
 * Take `input`'s keypresses from whoever listens to them now (the prompt's line editor), for a
 * navigator or a question of one key; returns what gives them back.
 */
export const takeKeypresses = (input: NodeJS.ReadStream): { readonly others: number; readonly giveBack: () => void } => {
  const others = input.listeners("keypress") as Array<(...args: Array<unknown>) => void>
  for (const listener of others) input.off("keypress", listener)
  return {
    others: others.length,
    giveBack: () => {
      for (const listener of others) input.on("keypress", listener)
    }
  }
}

/**
 * Draws lines where it drew the last ones (a list redrawn in place as keys move its selection):
 * back over what it drew, then the new lines.
 */
export const makeRedraw = (print: (line: string) => void, write: (text: string) => void) => {
  let drawn = 0
  return (lines: ReadonlyArray<string>) => {
    if (drawn > 0) write(`\u001b[${drawn}A\u001b[J`)
    for (const line of lines) print(line)
    drawn = lines.length
  }
}

export interface Paint {
  readonly enabled: boolean
  readonly red: (text: string) => string
  readonly green: (text: string) => string
  readonly cyan: (text: string) => string
  readonly yellow: (text: string) => string
  readonly dim: (text: string) => string
  readonly bold: (text: string) => string
}

const sgr = (open: number, close: number) => (text: string) => `\u001b[${open}m${text}\u001b[${close}m`
const same = (text: string) => text

/** Colours on when `output` is a terminal, `NO_COLOR` is unset or empty, and `--no-color` was not given. */
/** Whether stdin is a terminal, without creating \`process.stdin\` (a stream print mode may never read). */
export const stdinIsTerminal = (): boolean => isatty(0)

export const colorsWanted = (output: { readonly isTTY?: boolean }, noColorFlag: boolean, env: NodeJS.ProcessEnv = process.env) =>
  output.isTTY === true && !noColorFlag && (env["NO_COLOR"] === undefined || env["NO_COLOR"] === "")

export const makePaint = (enabled: boolean): Paint =>
  enabled
    ? { enabled, red: sgr(31, 39), green: sgr(32, 39), cyan: sgr(36, 39), yellow: sgr(33, 39), dim: sgr(2, 22), bold: sgr(1, 22) }
    : { enabled, red: same, green: same, cyan: same, yellow: same, dim: same, bold: same }

/** A unified diff's lines, coloured: removed red, added green, hunk headers cyan. */
export const paintDiff = (paint: Paint, lines: ReadonlyArray<string>): Array<string> =>
  lines.map((line) =>
    line.startsWith("---") || line.startsWith("+++")
      ? paint.bold(line)
      : line.startsWith("@@")
      ? paint.cyan(line)
      : line.startsWith("-")
      ? paint.red(line)
      : line.startsWith("+")
      ? paint.green(line)
      : line
  )

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

export interface Spinner {
  /** Show it (if it is not shown), saying what is going on. */
  readonly start: (label: string) => void
  /** Take it off the line, so that what is written next starts at column 0. */
  readonly stop: () => void
  /** Tokens so far, shown beside the time. */
  readonly setTokens: (tokens: number) => void
}

/** A spinner on `output`, or one that does nothing when `output` is not a terminal. */
export const makeSpinner = (output: Writable & { readonly isTTY?: boolean }, paint: Paint, now: () => number = Date.now): Spinner => {
  if (output.isTTY !== true) return { start: () => {}, stop: () => {}, setTokens: () => {} }
  let timer: ReturnType<typeof setInterval> | undefined
  let startedAt = 0
  let frame = 0
  let label = ""
  let tokens = 0
  let shownWidth = 0
  const draw = () => {
    const seconds = ((now() - startedAt) / 1000).toFixed(1)
    const text = `${FRAMES[frame++ % FRAMES.length]} ${label} ${seconds}s${tokens > 0 ? ` · ${tokens.toLocaleString("en-US")} tokens` : ""}`
    output.write(`\r${paint.dim(text)}${" ".repeat(Math.max(0, shownWidth - text.length))}`)
    shownWidth = text.length
  }
  return {
    start: (what) => {
      label = what
      if (timer !== undefined) return
      startedAt = now()
      draw()
      timer = setInterval(draw, 100)
      timer.unref()
    },
    stop: () => {
      if (timer === undefined) return
      clearInterval(timer)
      timer = undefined
      output.write(`\r${" ".repeat(shownWidth)}\r`)
      shownWidth = 0
    },
    setTokens: (count) => {
      tokens = count
    }
  }
}
