/**
 * What the page does to a session, each through the API with its rules: restore, undo, redo and
 * fork shown as a plan (their dry run) and made on confirmation; labels; compaction.
 */
import type { Api, Restore, Tree } from "./api.js"
import { refusalsOf } from "./api.js"
import { el } from "./dom.js"
import { parseFrames } from "./follow.js"
import type { PlanView } from "./plan.js"

export interface ActionContext {
  readonly api: () => Api
  readonly say: (text: string, error?: boolean) => void
  readonly failed: (error: unknown) => void
  /** Load the selected session again. */
  readonly reload: () => void
  /** Load the sessions, then open this one. */
  readonly openSession: (id: string) => void
  readonly render: () => void
  readonly focusPlan: () => void
  readonly setPlan: (plan: PlanView | undefined) => void
  readonly setLabelling: (seq: number | undefined) => void
}

export const makeActions = (context: ActionContext) => {
  const { failed, say } = context

  const describeMove = (result: Restore) =>
    `${result.restoredFiles.length} file${result.restoredFiles.length === 1 ? "" : "s"} put back` +
    `${result.conversationRestored ? ", the conversation moved" : ""}` +
    `${result.notCovered.length === 0 ? "" : `, ${result.notCovered.length} left as they are (not covered)`}`

  /**
   * Show what a move would do (its dry run), and make it on confirmation. A dry run refused with
   * 409 shows its refusals and cannot be confirmed.
   */
  const planMove = <R extends Restore>(title: string, run: (dryRun: boolean) => Promise<R>, done: (result: R) => void) => {
    const show = (result: Restore | undefined, refusals: Restore["refusals"]) => {
      context.setPlan({
        title,
        result,
        refusals,
        onConfirm: () => {
          run(false).then((moved) => {
            context.setPlan(undefined)
            done(moved)
            context.reload()
          }, (error: unknown) => {
            const refused = refusalsOf(error)
            if (refused.length > 0) show(result, refused)
            else failed(error)
          })
        },
        onCancel: () => {
          context.setPlan(undefined)
          context.render()
        }
      })
      context.render()
      context.focusPlan()
    }
    run(true).then((result) => show(result, []), (error: unknown) => {
      const refused = refusalsOf(error)
      if (refused.length > 0) show(undefined, refused)
      else failed(error)
    })
  }

  const restoreTo = (id: string, seq: number) =>
    planMove(`Restore to before checkpoint #${seq}`, (dryRun) => context.api().restore(id, seq, dryRun), (result) => say(`Restored: ${describeMove(result)}.`))

  const undoOrRedo = (id: string, which: "undo" | "redo") =>
    planMove(which === "undo" ? "Undo the last move" : "Redo the move undone", (dryRun) => context.api()[which](id, dryRun), (result) =>
      say(`${which === "undo" ? "Undone" : "Redone"}: ${describeMove(result)}.`))

  const forkFrom = (id: string, seq: number) =>
    planMove(`Fork from before checkpoint #${seq}`, (dryRun) => context.api().fork(id, seq, dryRun), (result) => {
      say(`Forked into session ${result.sessionId}: ${describeMove(result)}.`)
      context.openSession(result.sessionId)
    })

  /** Compact the session; its answer is the compaction's events, the last of which says how it ended. */
  const compact = (id: string) => {
    say("Compacting…")
    context.api().compact(id).then((events) => {
      const last = parseFrames(`${events}\n\n`).frames.filter((frame) => frame.event === "compaction").at(-1)
      const outcome = last === undefined ? undefined : JSON.parse(last.data) as {
        phase: string
        result?: { compacted: boolean; reason?: string }
        detail?: string
      }
      if (outcome?.phase === "done" && outcome.result?.compacted === true) say("Compacted: the model now sees a summary of the earlier conversation.")
      else if (outcome?.phase === "done") say(`Nothing compacted: ${outcome.result?.reason ?? outcome.detail ?? "nothing to summarise"}.`)
      else say(`The compaction did not finish (${outcome?.phase ?? "no answer"}): ${outcome?.detail ?? ""}`, true)
      context.reload()
    }, failed)
  }

  /** The label being entered: the same form across redraws (a live update must not wipe what is typed). */
  let labelForm: { readonly key: string; readonly form: HTMLFormElement } | undefined

  /** A node's name in words: a checkpoint, or the tip of a branch (labelled as the branch's name). */
  const nodeName = (shown: Tree, seq: number) =>
    shown.checkpoints.some((checkpoint) => checkpoint.seq === seq) ? `checkpoint #${seq}` : `the branch ending at #${seq}`

  const renderLabelForm = (id: string, shown: Tree, seq: number) => {
    const name = nodeName(shown, seq)
    const key = `${id}\u0000${seq}`
    if (labelForm?.key === key) return labelForm.form
    const input = el("input", { id: "label", type: "text", maxlength: 200 })
    const form = el(
      "form",
      {
        class: "label-form",
        onsubmit: (event: Event) => {
          event.preventDefault()
          context.api().label(id, seq, input.value.trim()).then(() => {
            labelForm = undefined
            context.setLabelling(undefined)
            const label = input.value.trim()
            say(label === "" ? `The label of ${name} is removed.` : `${name[0]!.toUpperCase()}${name.slice(1)} is labelled "${label}".`)
            context.reload()
          }, failed)
        }
      },
      el("label", { for: "label" }, `Label for ${name} (empty removes it)`),
      input,
      el("button", { type: "submit" }, "Save label"),
      el("button", {
        type: "button",
        onclick: () => {
          labelForm = undefined
          context.setLabelling(undefined)
          context.render()
        }
      }, "Cancel")
    )
    queueMicrotask(() => input.focus())
    labelForm = { key, form }
    return form
  }

  const startLabelling = (seq: number) => () => {
    labelForm = undefined
    context.setLabelling(seq)
    context.render()
  }

  const renderActions = (id: string, shown: Tree, seq: number | undefined) => {
    // The branch this checkpoint ends, if it is a branch's last: its tip can be named too.
    const ended = seq === undefined ? undefined : shown.branches.find((branch) => branch.checkpoint === seq)
    return el(
      "div",
      { class: "actions", role: "toolbar", "aria-label": "Actions" },
      seq === undefined ? null : [
        el("button", { type: "button", onclick: () => restoreTo(id, seq) }, "Restore to before this checkpoint"),
        el("button", { type: "button", onclick: () => forkFrom(id, seq) }, "Fork from here"),
        el("button", { type: "button", onclick: startLabelling(seq) }, "Label…"),
        ended === undefined || ended.leaf === seq ? null : el("button", { type: "button", onclick: startLabelling(ended.leaf) }, "Label branch…")
      ],
      el("button", { type: "button", disabled: shown.undo === null, onclick: () => undoOrRedo(id, "undo") }, "Undo"),
      el("button", { type: "button", disabled: shown.redo === null, onclick: () => undoOrRedo(id, "redo") }, "Redo"),
      el("button", { type: "button", onclick: () => compact(id) }, "Compact")
    )
  }

  return { renderActions, renderLabelForm }
}
