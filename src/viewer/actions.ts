/**
 * What the page does to a session, each through the API with its rules: restore, switch, undo,
 * redo and fork shown as a plan (their dry run) and made on confirmation; labels; compaction.
 */
import type { PictureRow } from "../core/treePicture.js"
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

  /** What a move did, in words: files written back and files deleted apart, and what it left. */
  const describeMove = (result: Restore) => {
    const deleted = new Set(result.plan.filter((file) => file.action === "delete").map((file) => file.path))
    const removed = result.restoredFiles.filter((path) => deleted.has(path)).length
    const written = result.restoredFiles.length - removed
    const files = (count: number) => `${count} file${count === 1 ? "" : "s"}`
    const parts = [
      written > 0 || removed === 0 ? `${files(written)} put back` : undefined,
      removed > 0 ? `${files(removed)} deleted` : undefined,
      result.conversationRestored ? "the conversation moved" : undefined,
      result.notCovered.length === 0 ? undefined : `${result.notCovered.length} left as they are (not covered)`
    ]
    return parts.filter((part) => part !== undefined).join(", ")
  }

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

  const restoreTo = (id: string, seq: number, mode: "both" | "conversation" | "files" = "both") =>
    planMove(
      mode === "both"
        ? `Restore to before checkpoint #${seq}`
        : mode === "files"
        ? `Restore the files only to before checkpoint #${seq}`
        : `Restore the conversation only to before checkpoint #${seq}`,
      (dryRun) => context.api().restore(id, seq, dryRun, mode === "files" ? { conversation: false } : mode === "conversation" ? { files: false } : {}),
      (result) => say(`Restored: ${describeMove(result)}.`)
    )

  const switchTo = (id: string, tip: number) =>
    planMove(`Switch to the branch ending at #${tip}`, (dryRun) => context.api().switchTo(id, tip, dryRun), (result) => say(`Switched: ${describeMove(result)}.`))

  /** Undo or redo, the plan saying where it goes (the leaf the move left, or the one the undo left). */
  const undoOrRedo = (id: string, shown: Tree, which: "undo" | "redo") => {
    const to = which === "undo" ? shown.undo?.from : shown.redo?.from
    const where = to === undefined ? "" : ` (back to #${to})`
    return planMove(which === "undo" ? `Undo the last move${where}` : `Redo the move undone${where}`, (dryRun) => context.api()[which](id, dryRun), (result) =>
      say(`${which === "undo" ? "Undone" : "Redone"}: ${describeMove(result)}.`))
  }

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

  /** What acts on the whole session — undo, redo, compact — apart from what acts on a row. */
  const renderSessionActions = (id: string, shown: Tree) =>
    el(
      "div",
      { class: "actions session-actions", role: "toolbar", "aria-label": "Session actions" },
      el("button", { type: "button", disabled: shown.undo === null, onclick: () => undoOrRedo(id, shown, "undo") }, "Undo"),
      el("button", { type: "button", disabled: shown.redo === null, onclick: () => undoOrRedo(id, shown, "redo") }, "Redo"),
      el("button", { type: "button", onclick: () => compact(id) }, "Compact")
    )

  /**
   * What can be done with the selected row: on a checkpoint of the current branch, restore (both,
   * the conversation or the files), fork, label; on one of another branch, switch to that branch,
   * restore there (conversation and files: the session moves there), fork, label; on another
   * branch's tip, switch to it; on any tip, name its branch.
   */
  const renderActions = (id: string, row: PictureRow | undefined) => {
    const button = (text: string, onclick: () => void) => el("button", { type: "button", onclick }, text)
    const switchButton = row === undefined || row.branch.current ? null : button("Switch to this branch", () => switchTo(id, row.branch.tip))
    return el(
      "div",
      { class: "actions", role: "toolbar", "aria-label": row?.kind === "tip" ? "Branch actions" : "Checkpoint actions" },
      row === undefined
        ? null
        : row.kind === "tip"
        ? [switchButton, button("Label branch…", startLabelling(row.seq))]
        : row.branch.current
        ? [
          button("Restore to before this checkpoint", () => restoreTo(id, row.seq)),
          button("Conversation only", () => restoreTo(id, row.seq, "conversation")),
          button("Files only", () => restoreTo(id, row.seq, "files")),
          button("Fork from here", () => forkFrom(id, row.seq)),
          button("Label…", startLabelling(row.seq))
        ]
        : [
          switchButton,
          button("Restore to before this checkpoint", () => restoreTo(id, row.seq)),
          button("Fork from here", () => forkFrom(id, row.seq)),
          button("Label…", startLabelling(row.seq))
        ]
    )
  }

  return { renderActions, renderSessionActions, renderLabelForm }
}
