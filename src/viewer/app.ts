/**
 * The session viewer: the sessions, a session's tree of checkpoints, the conversation at the
 * selected checkpoint and the files its turn changed, kept up to date while an agent writes.
 * It talks only to the session server's API (api.ts, follow.ts) and builds the page with dom.ts.
 */
import {
  type Api,
  ApiError,
  type Changes,
  type Conversation,
  forgetToken,
  makeApi,
  savedToken,
  saveToken,
  type Tree
} from "./api.js"
import { ago, bytes, el, fill } from "./dom.js"
import { follow, type Frame } from "./follow.js"
import { makeActions } from "./actions.js"
import { type PlanView, renderPlan } from "./plan.js"
import { renderChanges, renderConversation } from "./render.js"
import { makeQuestions, type PendingQuestion } from "./questions.js"
import { renderTree, rowOf, shownTree, type TreeSelection } from "./tree.js"
import { makeUsageLoader, renderSessionSize } from "./usage.js"

interface SessionRow {
  readonly id: string
  readonly mtime: string
  details?: { readonly firstPrompt: string | undefined; readonly prompts: number; readonly bytes: number }
}

const root = document.getElementById("app")!
const status = document.getElementById("status")!

let api: Api | undefined
let token: string | undefined
let sessions: Array<SessionRow> = []
let selected: string | undefined
let tree: Tree | undefined
/** The selected checkpoint; undefined: the current leaf. */
let at: number | undefined
let conversation: Conversation | undefined
let changes: Changes | undefined
let following: { stop: () => void } | undefined
let message: { readonly text: string; readonly error: boolean } | undefined
/** A move shown before it is made (restore, undo, redo, fork). */
let plan: PlanView | undefined
/** The checkpoint being named, if a label is being entered. */
let labelling: number | undefined
/** A branch's tip selected in the tree (then its actions are shown, not a checkpoint's). */
let selectedTip: number | undefined
/** Tips of the branches folded in the tree. */
let folded = new Set<number>()

const panes = {
  sessions: el("nav", { class: "sessions", "aria-label": "Sessions" }),
  tree: el("section", { class: "tree", "aria-label": "Checkpoints" }),
  detail: el("section", { class: "detail", "aria-label": "Conversation and changes" })
}
const notice = el("div", { class: "notice", role: "alert" })

const say = (text: string, error = false) => {
  message = { text, error }
  fill(notice, message.text)
  notice.className = error ? "notice error" : "notice"
}

const failed = (error: unknown) => {
  if (error instanceof ApiError && error.status === 401) return showGate("That token was refused: enter the server's token.")
  say(error instanceof ApiError ? `${error.tag}: ${error.message}` : String(error), true)
}

// --- The token -------------------------------------------------------------------------

const showGate = (why?: string) => {
  following?.stop()
  following = undefined
  forgetToken()
  api = undefined
  const input = el("input", { id: "token", type: "password", autocomplete: "off", required: true, "aria-describedby": "token-help" })
  const form = el(
    "form",
    {
      class: "gate",
      onsubmit: (event: Event) => {
        event.preventDefault()
        const value = input.value.trim()
        if (value === "") return
        saveToken(value)
        start(value)
      }
    },
    el("h2", {}, "Open the sessions"),
    el("label", { for: "token" }, "Token"),
    input,
    el("p", { id: "token-help", class: "help" }, "The token `lite-agent serve` printed (or LITE_AGENT_TOKEN). It is kept for this tab only."),
    why === undefined ? null : el("p", { class: "error", role: "alert" }, why),
    el("button", { type: "submit" }, "Open")
  )
  fill(root, form)
  fill(status, "")
  input.focus()
}

// --- Loading ---------------------------------------------------------------------------

const loadSessions = async () => {
  if (api === undefined) return
  const listed = await api.sessions()
  const known = new Map(sessions.map((row) => [row.id, row]))
  sessions = listed.sessions.map((session) => ({ ...known.get(session.id), ...session }))
  renderSessions()
  // Each row's first prompt, prompts and size, a few at a time.
  const missing = sessions.filter((row) => row.details === undefined)
  for (let index = 0; index < missing.length; index += 4) {
    await Promise.all(missing.slice(index, index + 4).map((row) => loadDetails(row)))
    renderSessions()
  }
}

const loadDetails = async (row: SessionRow) => {
  if (api === undefined) return
  const [summary, rowTree] = await Promise.all([api.summary(row.id), api.tree(row.id)])
  const first = rowTree.checkpoints.reduce<{ seq: number; prompt: string } | undefined>(
    (earliest, checkpoint) => (earliest === undefined || checkpoint.seq < earliest.seq ? checkpoint : earliest),
    undefined
  )
  row.details = { firstPrompt: first?.prompt, prompts: rowTree.checkpoints.length, bytes: summary.stats.logBytes + summary.stats.snapshotBytes }
}

/** The selected session's size: asked when it is opened and after it changes, redrawn when it comes. */
const usage = makeUsageLoader((id) => api!.usage(id), () => renderSelected())

/** Which load is the latest: an answer to an earlier one (another session, another checkpoint) is dropped. */
let loads = 0

const loadSelected = async () => {
  if (api === undefined || selected === undefined) return
  const load = ++loads
  const id = selected
  const wanted = at
  const [nextTree, nextConversation] = await Promise.all([api.tree(id), api.conversation(id, wanted)])
  const checkpoint = wanted ?? latestCheckpoint(nextTree)
  // A finished turn's changes do not change: asked again only for the last one (it may be running).
  const known = changes !== undefined && changes.seq === checkpoint && checkpoint !== latestCheckpoint(nextTree) && id === selected
  const nextChanges = checkpoint === undefined ? undefined : known ? changes : await api.changes(id, checkpoint)
  if (load !== loads) return
  tree = nextTree
  conversation = nextConversation
  changes = nextChanges
  renderSelected()
}

/** The last checkpoint of the current branch. */
const latestCheckpoint = (of: Tree) =>
  of.checkpoints.filter((checkpoint) => checkpoint.current).reduce<number | undefined>((latest, checkpoint) => Math.max(latest ?? 0, checkpoint.seq), undefined)

// --- Following ---------------------------------------------------------------------------

let refreshTimer: ReturnType<typeof setTimeout> | undefined
const refreshSoon = () => {
  if (refreshTimer !== undefined) return
  refreshTimer = setTimeout(() => {
    refreshTimer = undefined
    const row = sessions.find((each) => each.id === selected)
    if (row !== undefined) delete row.details
    if (selected !== undefined) usage.load(selected)
    Promise.all([loadSelected(), loadSessions()]).catch(failed)
  }, 150)
}

const onFrame = (frame: Frame) => {
  if (frame.event === "permission_request") {
    questions.asked(JSON.parse(frame.data) as PendingQuestion)
    renderSelected()
    return
  }
  // A question is answered, here or by anyone, once its decision or the call's result is in the log.
  if (questions.any() && frame.event === "event") {
    const data = JSON.parse(frame.data) as { event?: { _tag?: string; toolUseId?: string } }
    if (data.event?._tag === "PermissionDecided" || data.event?._tag === "ToolResult") {
      questions.settled(data.event?.toolUseId)
    }
  }
  refreshSoon()
}

/** Which follow is the latest: a session chosen while another's was being set up replaces it. */
let follows = 0

/**
 * Follow the selected session from its head, then load it: what lands after the head read is
 * then a refresh, never missed. After a reconnection the page loads again (events may have
 * landed while it was away; the stream resumes from the last one it saw either way).
 */
const followSelected = async () => {
  following?.stop()
  following = undefined
  questions.clear()
  if (api === undefined || token === undefined || selected === undefined) return
  const mine = ++follows
  const id = selected
  usage.load(id)
  const summary = await api.summary(id)
  if (mine !== follows) return
  let connected = false
  following = follow(token, id, summary.head, summary.generation, {
    onFrame,
    onState: (state) => {
      if (state === "refused") return showGate("That token was refused: enter the server's token.")
      if (state === "gone") return say(`Session ${id} is gone: it was deleted.`, true)
      fill(status, state === "live" ? "live" : "reconnecting…")
      status.className = `status ${state}`
      if (state === "live" && connected) refreshSoon()
      if (state === "live") connected = true
    }
  })
  await loadSelected()
}

// --- Rendering ---------------------------------------------------------------------------

const select = (id: string) => {
  selected = id
  at = undefined
  selectedTip = undefined
  folded = new Set()
  tree = undefined
  conversation = undefined
  changes = undefined
  plan = undefined
  labelling = undefined
  location.hash = `#${encodeURIComponent(id)}`
  renderSessions()
  renderSelected()
  followSelected().catch(failed)
}

const renderSessions = () => {
  const now = Date.now()
  fill(
    panes.sessions,
    el("h2", {}, "Sessions"),
    sessions.length === 0
      ? el("p", { class: "empty" }, "No sessions yet.")
      : el(
        "ul",
        { class: "session-list" },
        sessions.map((row) =>
          el(
            "li",
            {},
            el(
              "button",
              {
                type: "button",
                class: row.id === selected ? "session selected" : "session",
                "aria-current": row.id === selected ? "true" : undefined,
                "data-session": row.id,
                onclick: () => select(row.id)
              },
              el("span", { class: "prompt" }, row.details === undefined ? row.id : row.details.firstPrompt ?? "(no prompt yet)"),
              el(
                "span",
                { class: "meta" },
                ago(now - Date.parse(row.mtime)),
                row.details === undefined
                  ? null
                  : ` · ${row.details.prompts} prompt${row.details.prompts === 1 ? "" : "s"} · ${bytes(row.details.bytes)}`
              )
            )
          )
        )
      )
  )
}

const questions = makeQuestions({ api: () => api, session: () => selected, failed, render: () => renderSelected() })

const actions = makeActions({
  api: () => api!,
  say,
  failed,
  reload: () => loadSelected().catch(failed),
  openSession: (id) => loadSessions().then(() => select(id), failed),
  render: () => renderSelected(),
  focusPlan: () => panes.detail.querySelector<HTMLElement>(".plan")?.focus(),
  setPlan: (next) => {
    plan = next
  },
  setLabelling: (seq) => {
    labelling = seq
  }
})

const renderSelected = () => {
  if (selected === undefined) {
    fill(panes.tree, el("p", { class: "empty" }, "Choose a session."))
    fill(panes.detail)
    return
  }
  if (tree === undefined) {
    fill(panes.tree, el("p", { class: "empty" }, "Loading…"))
    fill(panes.detail)
    return
  }
  const shownAt = at ?? latestCheckpoint(tree)
  const shown = shownTree(tree, folded)
  const treeSelection: TreeSelection | undefined = selectedTip !== undefined
    ? { kind: "tip", seq: selectedTip }
    : shownAt === undefined
    ? undefined
    : { kind: "checkpoint", seq: shownAt }
  // Keyboard focus stays where it was across a redraw (a live update redraws both panes).
  const focused = document.activeElement
  const focusedRow = panes.tree.contains(focused) && (focused as HTMLElement).dataset["seq"] !== undefined
    ? { seq: (focused as HTMLElement).dataset["seq"], kind: (focused as HTMLElement).dataset["kind"] }
    : undefined
  const focusedControl = panes.detail.contains(focused) && focused !== null ? controlKey(focused) : undefined
  fill(
    panes.tree,
    el("h2", {}, "Checkpoints"),
    renderSessionSize(usage.of(selected)),
    actions.renderSessionActions(selected, tree),
    renderTree(tree, shown, {
      selected: treeSelection,
      onSelect: (selection) => {
        plan = undefined
        labelling = undefined
        if (selection.kind === "tip") {
          // A tip: its branch's actions; the checkpoint shown stays.
          selectedTip = selection.seq
          return renderSelected()
        }
        // Shown selected at once (the actions are then this checkpoint's); its files and messages follow.
        selectedTip = undefined
        at = selection.seq
        changes = undefined
        conversation = undefined
        renderSelected()
        loadSelected().catch(failed)
      },
      onFold: (tip, fold) => {
        if (fold) folded.add(tip)
        else folded.delete(tip)
        renderSelected()
        // The branch's row at the fold keeps the focus.
        panes.tree.querySelector<HTMLElement>(`[role=treeitem][data-tip="${tip}"][aria-expanded]`)?.focus()
      }
    })
  )
  if (focusedRow !== undefined) {
    const item = panes.tree.querySelector<HTMLElement>(`[role=treeitem][data-seq="${focusedRow.seq}"][data-kind="${focusedRow.kind}"]`)
    panes.tree.querySelectorAll<HTMLElement>("[role=treeitem]").forEach((each) => (each.tabIndex = each === item ? 0 : -1))
    item?.focus()
  }
  const checkpoint = tree.checkpoints.find((each) => each.seq === shownAt)
  const row = rowOf(shown, treeSelection)
  const tipHeader = row?.kind === "tip"
    ? [
      el("h2", {}, `Branch ending at #${row.seq}`),
      el("p", { class: "prompt" }, row.here ? "You are here." : "Another branch: switch to it to go on from its end.", row.branch.label === undefined ? null : el("span", { class: "label" }, row.branch.label))
    ]
    : undefined
  fill(
    panes.detail,
    questions.render(),
    el(
      "header",
      { class: "checkpoint" },
      tipHeader ?? [
        el("h2", {}, checkpoint === undefined ? "No checkpoint yet" : `Checkpoint #${checkpoint.seq}`),
        checkpoint === undefined ? null : el("p", { class: "prompt" }, checkpoint.prompt, checkpoint.label === undefined ? null : el("span", { class: "label" }, checkpoint.label))
      ]
    ),
    actions.renderActions(selected, row),
    plan === undefined ? null : renderPlan(plan),
    labelling === undefined ? null : actions.renderLabelForm(selected, tree, labelling),
    changes === undefined ? null : renderChanges(changes),
    conversation === undefined ? null : renderConversation(conversation, shownAt)
  )
  if (focusedControl !== undefined) {
    // The same element when it was kept (the label form), else the control with the same name in the same place.
    const again = focused instanceof HTMLElement && focused.isConnected
      ? focused
      : Array.from(panes.detail.querySelectorAll<HTMLElement>("button, input")).find((each) => controlKey(each) === focusedControl)
    again?.focus()
  }
}

/** A control by where it is (its labelled container) and what it says: the same control after a redraw. */
const controlKey = (element: Element) =>
  `${element.closest("[aria-label]")?.getAttribute("aria-label") ?? ""}\u0000${element.id}\u0000${element.textContent ?? ""}`

// --- Start ---------------------------------------------------------------------------------

const start = (given: string) => {
  token = given
  api = makeApi(given)
  fill(root, notice, el("div", { class: "panes" }, panes.sessions, panes.tree, panes.detail))
  if (message !== undefined) say(message.text, message.error)
  renderSessions()
  renderSelected()
  loadSessions().then(() => {
    const wanted = decodeURIComponent(location.hash.slice(1))
    if (wanted !== "" && sessions.some((row) => row.id === wanted)) select(wanted)
  }, failed)
}

// Back and forward (and a link to `#<session id>`) open that session.
addEventListener("hashchange", () => {
  const wanted = decodeURIComponent(location.hash.slice(1))
  if (api !== undefined && wanted !== selected && sessions.some((row) => row.id === wanted)) select(wanted)
})

const saved = savedToken()
if (saved === undefined) showGate()
else start(saved)
