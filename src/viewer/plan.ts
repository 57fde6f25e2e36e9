/**
 * What a restore, an undo, a redo or a fork would do, before it is done: every file it writes or
 * deletes, what it leaves alone and why (not covered by the capture), the commands it cannot
 * undo, and each refusal with its reason. Confirming runs the same move for real; a refused move
 * cannot be confirmed.
 */
import type { Restore } from "./api.js"
import { el } from "./dom.js"

const ACTIONS: Record<Restore["plan"][number]["action"], string> = {
  write: "written back",
  link: "made a link again",
  directory: "made a directory again",
  delete: "deleted",
  none: "left as it is"
}

export interface PlanView {
  readonly title: string
  /** The dry run's answer; undefined when it was refused as a whole (the refusals say why). */
  readonly result: Restore | undefined
  readonly refusals: Restore["refusals"]
  readonly onConfirm: () => void
  readonly onCancel: () => void
}

export const renderPlan = (view: PlanView) => {
  const refusals = [...(view.result?.refusals ?? []), ...view.refusals]
  const plan = view.result?.plan ?? []
  const refusedPaths = new Map(refusals.filter((refusal) => refusal.path !== undefined).map((refusal) => [refusal.path!, refusal]))
  const section = el(
    "section",
    { class: "plan", role: "dialog", "aria-label": view.title, tabindex: -1 },
    el("h2", {}, view.title),
    plan.length === 0 && refusals.length === 0 ? el("p", {}, "No file changes: only the conversation moves.") : null,
    plan.length === 0 ? null : el(
      "table",
      {},
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "File"), el("th", { scope: "col" }, "What happens"))),
      el(
        "tbody",
        {},
        plan.map((step) => {
          const refusal = step.refusal ?? refusedPaths.get(step.path)
          return el(
            "tr",
            { class: refusal === undefined ? "" : "refused", "data-path": step.path },
            el("td", { class: "path" }, step.path),
            el(
              "td",
              {},
              refusal === undefined
                ? `${ACTIONS[step.action]}${step.alreadyRestored ? " (already)" : ""}${step.unverified ? " — not verifiable (no hash recorded)" : ""}`
                : `refused: ${refusal.reason} — ${refusal.detail}`
            )
          )
        })
      )
    ),
    refusals.filter((refusal) => !plan.some((step) => step.path === refusal.path)).map((refusal) =>
      el("p", { class: "error refusal", "data-path": refusal.path }, `${refusal.path ?? "refused"}: ${refusal.reason} — ${refusal.detail}`)
    ),
    (view.result?.notCovered.length ?? 0) === 0 ? null : el(
      "div",
      {},
      el("h3", {}, "Left as they are (the capture does not cover them)"),
      el("ul", { class: "plain" }, view.result!.notCovered.map((each) => el("li", {}, el("span", { class: "path" }, each.path), ` — ${each.reason}`)))
    ),
    (view.result?.commandsNotUndone.length ?? 0) === 0 ? null : el(
      "div",
      {},
      el("h3", {}, "Commands whose effects outside the workspace stay"),
      el("ul", { class: "plain" }, view.result!.commandsNotUndone.map((each) => el("li", {}, `#${each.seq} ${each.tool} ${JSON.stringify(each.input)}`)))
    ),
    el(
      "div",
      { class: "buttons" },
      el("button", { type: "button", class: "confirm", disabled: refusals.length > 0 || view.result === undefined, onclick: view.onConfirm }, "Confirm"),
      el("button", { type: "button", onclick: view.onCancel }, "Cancel")
    )
  )
  return section
}
