/**
 * The questions a running turn waits on (`permission_request` frames): each shows what the call
 * would do — the command, or for a file edit the diff it would make, as the terminal shows it —
 * and is answered Allow, Deny, or Deny with a reason the model is told.
 */
import type { Api } from "./api.js"
import { type Child, el } from "./dom.js"
import { diffLines } from "./render.js"

export interface PendingQuestion {
  readonly requestId: string
  readonly name: string
  readonly input: unknown
  /** The diff an edit would make (the server reads it as the question is asked). */
  readonly diff?: ReadonlyArray<string>
}

export interface QuestionsContext {
  readonly api: () => Api | undefined
  readonly session: () => string | undefined
  readonly failed: (error: unknown) => void
  /** Redraw once a question is answered. */
  readonly render: () => void
}

/** What the call is about, in a few words: a command or a path, else its input. */
const subjectOf = (input: unknown): string | undefined => {
  if (typeof input !== "object" || input === null) return undefined
  const { command, path } = input as { command?: unknown; path?: unknown }
  return typeof command === "string" ? command : typeof path === "string" ? path : undefined
}

export const makeQuestions = (context: QuestionsContext) => {
  let questions: Array<PendingQuestion> = []
  /** The reason being typed for a denial, by question: kept across redraws (a live update must not wipe it). */
  const reasons = new Map<string, HTMLInputElement>()

  const answer = (question: PendingQuestion, behavior: "allow" | "deny", message?: string) => {
    const api = context.api()
    const session = context.session()
    if (api === undefined || session === undefined) return
    api.answer(session, question.requestId, behavior, message).then(() => {
      questions = questions.filter((each) => each.requestId !== question.requestId)
      reasons.delete(question.requestId)
      context.render()
    }, context.failed)
  }

  const reasonInput = (question: PendingQuestion) => {
    const existing = reasons.get(question.requestId)
    if (existing !== undefined) return existing
    const input = el("input", { type: "text", id: `why-${question.requestId}`, maxlength: 2000, placeholder: "What to do instead (the model is told)" })
    reasons.set(question.requestId, input)
    return input
  }

  const render = (): Child =>
    questions.length === 0 ? null : el(
      "section",
      { class: "questions", "aria-label": "Waiting for permission" },
      questions.map((question) => {
        const subject = subjectOf(question.input)
        const why = reasonInput(question)
        return el(
          "div",
          { class: "question" },
          el("p", {}, `The agent asks to run ${question.name}`, subject === undefined ? ":" : [": ", el("code", {}, subject)]),
          question.diff !== undefined && question.diff.length > 0
            ? el("pre", { class: "diff", "aria-label": `What ${question.name} would change` }, diffLines(question.diff))
            : subject === undefined
            ? el("pre", {}, JSON.stringify(question.input, null, 2))
            : null,
          el("button", { type: "button", onclick: () => answer(question, "allow") }, "Allow"),
          el("button", { type: "button", onclick: () => answer(question, "deny") }, "Deny"),
          el("label", { for: why.id, class: "why" }, "Deny, and say why:"),
          why,
          el("button", {
            type: "button",
            onclick: () => {
              const text = why.value.trim()
              answer(question, "deny", text === "" ? undefined : `the user denied ${question.name}: ${text}`)
            }
          }, "Deny with reason")
        )
      })
    )

  return {
    render,
    /** A question heard; the same one again is ignored. */
    asked: (question: PendingQuestion) => {
      if (!questions.some((each) => each.requestId === question.requestId)) questions = [...questions, question]
    },
    /** A question answered by anyone (its decision or the call's result is in the log). */
    settled: (toolUseId: string | undefined) => {
      questions = questions.filter((question) => question.requestId !== toolUseId)
    },
    any: () => questions.length > 0,
    clear: () => {
      questions = []
      reasons.clear()
    }
  }
}
