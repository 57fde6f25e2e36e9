/**
 * The permission prompt: before a tool call that needs permission, the terminal shows what it
 * would do (the command; for an edit, the diff it would make) and takes one key — `y` allow,
 * `n` deny, `t` deny and tell the model why (a line), `a` allow this tool for the rest of the
 * session (for a file tool that writes, all of them), `Esc` (or Ctrl-C) deny and stop the turn. The agent is built before the terminal is ready, so its `canUseTool` asks through a
 * holder the terminal fills in (`attach`).
 */
import { emitKeypressEvents } from "node:readline"
import { type CanUseTool, EDIT_TOOLS, type PermissionContext, type PermissionResult } from "../agent/permissions.js"
import type { JsonValue } from "../core/events.js"
import { proposedDiff, stringField } from "../tools/editDiffs.js"
import { shorten } from "./render.js"
import { type Key, type Paint, paintDiff, takeKeypresses } from "./terminal.js"

export type PermissionChoice = "yes" | "no" | "explain" | "always" | "stop"

const choiceOf = (key: Key): PermissionChoice | undefined =>
  key.ctrl === true && key.name === "c"
    ? "stop"
    : key.name === "escape"
    ? "stop"
    : key.name === "y"
    ? "yes"
    : key.name === "n"
    ? "no"
    : key.name === "t"
    ? "explain"
    : key.name === "a"
    ? "always"
    : undefined

/**
 * The keyboard, key by key: `input`'s keypresses taken from whoever listened (the prompt's line
 * editor), raw; the function returned gives them back as they were.
 */
const takeKeyboard = (input: NodeJS.ReadStream): (() => void) => {
  emitKeypressEvents(input)
  const taken = takeKeypresses(input)
  const wasRaw = input.isRaw
  if (input.isTTY) input.setRawMode(true)
  input.resume()
  return () => {
    if (input.isTTY) input.setRawMode(wasRaw)
    taken.giveBack()
    if (taken.others === 0) input.pause()
  }
}

/**
 * One choice from the keyboard: keypresses on `input` are taken from whoever listened (the
 * prompt's line editor) until a choice key comes, then given back. An abort of `signal` is "stop".
 */
export const readChoice = (input: NodeJS.ReadStream, signal: AbortSignal, ready: () => void = () => {}): Promise<PermissionChoice> =>
  new Promise((resolve) => {
    const giveBack = takeKeyboard(input)
    // Keys typed before the question (type-ahead) must not answer it: what is already there is
    // read and dropped over two turns of the event loop, then the question is shown (`ready`).
    const drop = () => {}
    input.on("keypress", drop)
    setImmediate(() =>
      setImmediate(() => {
        input.off("keypress", drop)
        start()
      })
    )
    const finish = (choice: PermissionChoice) => {
      input.off("keypress", listener)
      signal.removeEventListener("abort", aborted)
      giveBack()
      resolve(choice)
    }
    const listener = (_text: unknown, key: Key | undefined) => {
      const choice = key === undefined ? undefined : choiceOf(key)
      if (choice !== undefined) finish(choice)
    }
    const aborted = () => finish("stop")
    const start = () => {
      if (signal.aborted) return finish("stop")
      signal.addEventListener("abort", aborted)
      input.on("keypress", listener)
      ready()
    }
  })

/**
 * A line typed on the keyboard while the prompt's line editor is set aside (as `readChoice`
 * takes its key): printable keys are echoed through `write`, Backspace removes one, Enter ends
 * it; Esc, Ctrl-C or an abort of `signal` give "" (no reason).
 */
export const readLine = (input: NodeJS.ReadStream, write: (text: string) => void, signal: AbortSignal): Promise<string> =>
  new Promise((resolve) => {
    const giveBack = takeKeyboard(input)
    let line = ""
    const finish = (text: string) => {
      input.off("keypress", listener)
      signal.removeEventListener("abort", aborted)
      giveBack()
      write("\n")
      resolve(text)
    }
    const listener = (text: string | undefined, key: (Key & { readonly sequence?: string }) | undefined) => {
      if (key?.name === "return" || key?.name === "enter") return finish(line.trim())
      if (key?.name === "escape" || (key?.ctrl === true && key.name === "c")) return finish("")
      if (key?.name === "backspace") {
        if (line.length > 0) {
          line = line.slice(0, -1)
          write("\b \b")
        }
        return
      }
      if (text !== undefined && key?.ctrl !== true && /^[^\u0000-\u001f\u007f]+$/.test(text)) {
        line += text
        write(text)
      }
    }
    const aborted = () => finish("")
    if (signal.aborted) return finish("")
    signal.addEventListener("abort", aborted)
    input.on("keypress", listener)
  })

/** A line's answer, for a prompt on something that is not a terminal. */
export const choiceOfLine = (line: string): PermissionChoice | undefined => {
  const answer = line.trim().toLowerCase()
  return answer === "y" || answer === "yes"
    ? "yes"
    : answer === "n" || answer === "no"
    ? "no"
    : answer === "t" || answer === "tell"
    ? "explain"
    : answer === "a" || answer === "always"
    ? "always"
    : answer === "s" || answer === "stop"
    ? "stop"
    : undefined
}

export interface PromptIo {
  readonly paint: Paint
  readonly workdir: string
  /** Write one line of the prompt. */
  readonly print: (line: string) => void
  /** Take the user's choice; `ready` shows the question's last line once a key can answer it. */
  readonly choose: (signal: AbortSignal, ready: () => void) => Promise<PermissionChoice>
  /** A line from the user after `question` (why a call is denied); "" for none. */
  readonly readLine: (question: string, signal: AbortSignal) => Promise<string>
  /** The diff of this call was shown (not again after it runs). */
  readonly diffShown?: (toolUseId: string) => void
}

/** What the call is about, in a few words: a command, a path, or its input. */
const subjectOf = (input: JsonValue): string =>
  stringField(input, "command") ?? stringField(input, "path") ?? shorten(JSON.stringify(input), 100)

/** Ask about one call on the terminal; the answer as `canUseTool` gives it. */
export const askInTerminal = async (
  io: PromptIo,
  name: string,
  input: JsonValue,
  context: PermissionContext
): Promise<PermissionResult> => {
  const { paint } = io
  io.print(`${paint.yellow("?")} ${paint.bold(name)} ${paint.bold(subjectOf(input))}`)
  const diff = proposedDiff(io.workdir, name, input)
  if (diff.length > 0) {
    for (const line of paintDiff(paint, diff)) io.print(`    ${line}`)
    io.diffShown?.(context.toolUseId)
  }
  // One "always" for a file tool that writes covers them all (the rules remember them together).
  const always = EDIT_TOOLS.has(name) ? "file edits" : name
  const choice = await io.choose(context.signal, () =>
    io.print(
      `  allow? ${paint.bold("y")} yes · ${paint.bold("n")} no · ${paint.bold("t")} no, and tell it why · ${paint.bold("a")} always ${always} this session · ${
        paint.bold("Esc")
      } no, and stop the turn`
    ))
  const why = choice === "explain" ? await io.readLine("  why (the model is told; Enter sends): ", context.signal) : ""
  io.print(`  ${
    choice === "yes"
      ? paint.green("allowed")
      : choice === "always"
      ? paint.green(`allowed (and ${always} from now on, this session)`)
      : choice === "no" || choice === "explain"
      ? paint.red(why === "" ? "denied" : "denied; the model is told why")
      : paint.red("denied; the turn stops")
  }`)
  switch (choice) {
    case "yes":
      return { behavior: "allow" }
    case "always":
      return { behavior: "allow", remember: true }
    case "no":
      return { behavior: "deny", message: `the user denied ${name}` }
    case "explain":
      return { behavior: "deny", message: why === "" ? `the user denied ${name}` : `the user denied ${name}: ${why}` }
    case "stop":
      return { behavior: "deny", message: `the user denied ${name} and stopped the turn`, interrupt: true }
  }
}

/** The agent's `canUseTool`, asking whatever terminal is attached (refusing while none is). */
export const makeTerminalPermissions = () => {
  let io: PromptIo | undefined
  let before: ((toolUseId: string) => Promise<void>) | undefined
  const canUseTool: CanUseTool = async (name, input, context) => {
    if (io === undefined) return { behavior: "deny", message: "no terminal to ask for permission" }
    if (before !== undefined) await before(context.toolUseId)
    return askInTerminal(io, name, input, context)
  }
  return {
    canUseTool,
    /** Ask on `prompt`; `waitFor` resolves when what came before the question is on the screen. */
    attach: (prompt: PromptIo, waitFor?: (toolUseId: string) => Promise<void>) => {
      io = prompt
      before = waitFor
    }
  }
}
