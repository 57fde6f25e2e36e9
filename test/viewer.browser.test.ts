/**
 * The viewer in a real browser: Debian's Chromium, driven by playwright-core, against a real
 * `lite-agent serve` (a process of its own, with the scripted model and the file store) over a
 * session with a branch, made through the server's API. One server and one browser for the file.
 * Screenshots of the main views go to test-output/viewer/.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { live, makeTempDir, removeTempDirs, startServe, startWorker, type Worker } from "./support/processes.js"

const TOKEN = "viewer-token-0123456789abcdef"
const CHROMIUM = "/usr/bin/chromium"
const SHOTS = resolve(import.meta.dirname, "..", "test-output", "viewer")

let server: Worker
let url: string
let browser: Browser
let workdir: string
let sessions: string

const api = async (method: "GET" | "POST", path: string, body?: unknown) => {
  const response = await fetch(`${url}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  // A turn answers with its events as Server-Sent Events, read to the end: the turn is then over.
  const text = await response.text()
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`)
  return (response.headers.get("content-type") ?? "").startsWith("application/json") ? JSON.parse(text) as unknown : text
}

const turnsFile = (name: string, turns: unknown) => {
  const file = join(sessions, `${name}.json`)
  writeFileSync(file, JSON.stringify(turns))
  return file
}

/** A size as the page writes it (src/viewer/dom.ts, which needs the DOM's types to compile). */
const bytes = (count: number) =>
  count < 1024 ? `${count} B` : count < 1024 * 1024 ? `${(count / 1024).toFixed(1)} KiB` : `${(count / 1024 / 1024).toFixed(1)} MiB`

/** Polls until the page shows what is expected: it waits on the page, however loaded the machine. */
const eventually = <T>(look: () => Promise<T> | T) => expect.poll(look, { timeout: 60_000, interval: 50 })

/** A turn of session s1 run by another process (`lite-agent -p`) on the same store. */
const appendFromAnotherProcess = async (prompt: string, answer: string) => {
  const other = startWorker("../../src/cli/main.ts", [
    "-p",
    prompt,
    "--session",
    "s1",
    "--model",
    `scripted:${turnsFile(`other-${prompt.length}`, [{ text: answer }])}`,
    "--workdir",
    workdir,
    "--checkpointer",
    `file:${sessions}`,
    "--permission-mode",
    "plan"
  ])
  expect((await other.closed).code).toBe(0)
}

/** The row of the tree's checkpoint whose prompt has `text` (a click there selects that checkpoint alone). */
const checkpointRow = (page: Page, text: string) => page.locator("[role=treeitem] > .row").filter({ hasText: text })

/** A page that has entered the token and opened session "s1" — at the checkpoint whose prompt has `at`, when given. */
const openSession = async (page: Page, at?: string) => {
  await page.goto(url)
  await page.getByLabel("Token").fill(TOKEN)
  await page.getByRole("button", { name: "Open" }).click()
  await page.locator("[data-session=s1]").click()
  await page.getByRole("tree").waitFor()
  if (at !== undefined) await checkpointRow(page, at).click()
}

beforeAll(async () => {
  expect(existsSync(CHROMIUM), "Chromium is installed (apt-get install chromium; .ci/run does it)").toBe(true)
  mkdirSync(SHOTS, { recursive: true })
  workdir = makeTempDir("viewer-work")
  sessions = makeTempDir("viewer-sessions")
  const turns = turnsFile("serve-turns", [
    { toolCalls: [{ name: "write_file", input: { path: "hello.ts", content: "export const hello = (name: string) => `hello ${name}`\n" } }] },
    { text: "Created hello.ts. <script>window.__hacked = true</script><img src=x onerror=\"window.__hacked = true\">" },
    { toolCalls: [{ name: "edit_file", input: { path: "hello.ts", old_string: "hello ${name}", new_string: "Hello, ${name}!" } }] },
    { text: "Capitalised the greeting." },
    { toolCalls: [{ name: "write_file", input: { path: "notes.md", content: "# notes\n" } }] },
    { text: "Wrote notes instead." },
    // Two compactions: the first (the page's, keeping recent messages) finds nothing worth writing.
    { text: "A summary not written." },
    { text: "Summary: hello.ts made." },
    // A turn whose command needs a person's yes (shell is asked about).
    { toolCalls: [{ name: "shell", input: { command: "echo allowed > asked.txt" } }] },
    { text: "Ran it." },
    // An edit asked about (its diff shown), denied with a reason the model reads.
    { toolCalls: [{ name: "edit_file", input: { path: "asked.txt", old_string: "allowed", new_string: "edited" } }] },
    { text: "Kept the file." }
  ])
  ;({ worker: server, url } = await startServe([
    "--port",
    "0",
    "--token",
    TOKEN,
    "--model",
    `scripted:${turns}`,
    "--workdir",
    workdir,
    "--checkpointer",
    `file:${sessions}`,
    // Edits of hello.ts and new files run unasked (a rule by pattern); other edits and shell are asked.
    "--permission-mode",
    "default",
    "--allowed-tools",
    "write_file,edit_file(hello.ts)"
  ]))
  // A session with a branch: two prompts, a restore to before the second, another prompt.
  await api("POST", "/sessions/s1/messages", { text: "Create hello.ts <b>in bold</b>" })
  await api("POST", "/sessions/s1/messages", { text: "Capitalise the greeting" })
  const tree = await api("GET", "/sessions/s1/tree") as { checkpoints: Array<{ seq: number; prompt: string }> }
  const second = tree.checkpoints.find((checkpoint) => checkpoint.prompt === "Capitalise the greeting")!.seq
  await api("POST", "/sessions/s1/restore", { seq: second })
  await api("POST", "/sessions/s1/messages", { text: "Write notes instead" })
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] })
})

afterAll(async () => {
  await browser?.close()
  for (const child of live) child.kill("SIGKILL")
  removeTempDirs()
})

describe("the viewer", () => {
  it("serves its page without the token, with a strict Content-Security-Policy; the sessions need the token", async () => {
    const page = await fetch(url)
    expect(page.status).toBe(200)
    const csp = page.headers.get("content-security-policy") ?? ""
    expect(csp).toContain("default-src 'none'")
    expect(csp).toContain("script-src 'self'")
    expect(csp).toContain("connect-src 'self'")
    expect(csp).not.toContain("unsafe-inline")
    expect(await page.text()).toContain('<script type="module" src="/viewer/app.js"></script>')
    expect((await fetch(`${url}/viewer/app.js`)).headers.get("content-type")).toContain("text/javascript")
    expect((await fetch(`${url}/sessions`)).status).toBe(401)
  })

  it("asks for the token, refuses a wrong one, and keeps a right one for the tab", async () => {
    const context = await browser.newContext()
    const page = await context.newPage()
    await page.goto(url)
    await page.screenshot({ path: join(SHOTS, "token.png") })
    await page.getByLabel("Token").fill("not-the-token")
    await page.getByRole("button", { name: "Open" }).click()
    await eventually(() => page.getByRole("alert").filter({ hasText: "That token was refused" }).count()).toBe(1)
    expect(await page.locator("[data-session]").count()).toBe(0)
    await page.getByLabel("Token").fill(TOKEN)
    await page.getByRole("button", { name: "Open" }).click()
    await page.locator("[data-session=s1]").waitFor()
    // Kept for the tab: a reload needs no token.
    await page.reload()
    await page.locator("[data-session=s1]").waitFor()
    expect(await page.getByLabel("Token").count()).toBe(0)
    await context.close()
  })

  it("lists the sessions; shows the tree with its branch, the conversation and a checkpoint's diff", async () => {
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } })
    const page = await context.newPage()
    await openSession(page)
    const row = page.locator("[data-session=s1]")
    await eventually(() => row.textContent()).toContain("Create hello.ts <b>in bold</b>")
    expect(await row.textContent()).toContain("3 prompts")
    // The current branch flat, the branch the restore left one level in after the checkpoint it
    // parts from (its checkpoint and its tip), and exactly one "you are here".
    const nodes = page.getByRole("treeitem")
    expect(await nodes.count()).toBe(5)
    const levels = await nodes.evaluateAll((items) => items.map((item) => `${item.getAttribute("aria-level")} ${item.className.replace(/ selected/, "")}`))
    expect(levels).toEqual(["1 node checkpoint current", "2 node checkpoint side", "2 node tip side", "1 node checkpoint current", "1 node tip current here"])
    const other = page.locator("[role=treeitem].side.checkpoint")
    expect(await other.textContent()).toContain("Capitalise the greeting")
    expect(await page.locator(".badge.here").count()).toBe(1)
    expect(await page.locator("[role=treeitem].here").textContent()).toContain("you are here")
    // The session's size under its header, as GET /sessions/s1/usage says.
    const usage = await api("GET", "/sessions/s1/usage") as { logBytes: number; referenced: { bytes: number }; shared: { bytes: number }; own: { bytes: number } }
    expect(usage.own.bytes).toBeGreaterThan(0)
    await eventually(() => page.locator(".tree .session-size").textContent()).toBe(
      `${bytes(usage.own.bytes)} own · ${bytes(usage.referenced.bytes)} referenced (${bytes(usage.shared.bytes)} shared) · log ${bytes(usage.logBytes)}`
    )
    expect(await other.textContent()).not.toContain("you are here")
    // The other branch's checkpoint: its conversation and its diff.
    await checkpointRow(page, "Capitalise the greeting").click()
    await eventually(() => page.locator(".changes .path").allTextContents()).toEqual(["hello.ts"])
    const diff = page.locator(".changes pre.diff")
    expect(await diff.locator(".removed").allTextContents()).toContain("-export const hello = (name: string) => `hello ${name}`\n")
    expect(await diff.locator(".added").allTextContents()).toContain("+export const hello = (name: string) => `Hello, ${name}!`\n")
    const conversation = page.getByRole("region", { name: "Conversation", exact: true })
    expect(await conversation.textContent()).toContain("Capitalised the greeting.")
    expect(await conversation.textContent()).not.toContain("Wrote notes instead.")
    await page.screenshot({ path: join(SHOTS, "session.png") })
    // The keyboard moves through the tree (past the other branch's tip) and selects.
    await other.focus()
    await page.keyboard.press("ArrowDown")
    await page.keyboard.press("ArrowDown")
    await page.keyboard.press("Enter")
    await eventually(() => page.locator(".changes .path").allTextContents()).toEqual(["notes.md"])
    await context.close()
  })

  it("shows session text as text: markup and scripts in prompts and answers do nothing", async () => {
    const page = await browser.newPage()
    let dialogs = 0
    page.on("dialog", (dialog) => {
      dialogs++
      void dialog.dismiss()
    })
    await openSession(page, "Create hello.ts")
    const conversation = page.getByRole("region", { name: "Conversation", exact: true })
    await eventually(() => conversation.textContent()).toContain("<script>window.__hacked = true</script>")
    expect(await conversation.textContent()).toContain("Create hello.ts <b>in bold</b>")
    expect(await conversation.locator("b, script, img").count()).toBe(0)
    expect(await page.evaluate(() => (globalThis as { __hacked?: boolean }).__hacked)).toBeUndefined()
    expect(dialogs).toBe(0)
    await page.close()
  })

  it("follows the session live: what another process appends shows up, and keyboard focus stays where it was", async () => {
    const page = await browser.newPage()
    await openSession(page)
    await page.locator(".status.live").waitFor()
    // Focus on a tree item the arrow keys moved to (not the selected one).
    await checkpointRow(page, "Create hello.ts").click()
    await page.locator("[role=treeitem][aria-selected=true]").focus()
    await page.keyboard.press("ArrowDown")
    const focusedSeq = () => page.locator(":focus").getAttribute("data-seq")
    const movedTo = await focusedSeq()
    expect(movedTo).not.toBeNull()
    await appendFromAnotherProcess("A prompt from another process", "Answered in another process.")
    await page.getByRole("treeitem").filter({ hasText: "A prompt from another process" }).waitFor()
    expect(await focusedSeq()).toBe(movedTo)
    await checkpointRow(page, "A prompt from another process").click()
    await eventually(() => page.getByRole("region", { name: "Conversation", exact: true }).textContent()).toContain("Answered in another process.")
    await page.close()
  })

  it("restores through its plan (the file on disk changes), and undoes the restore", async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } })
    await openSession(page, "Write notes instead")
    await page.getByRole("button", { name: "Restore to before this checkpoint" }).click()
    const plan = page.getByRole("dialog", { name: "Restore to before checkpoint" })
    await plan.waitFor()
    expect(await plan.locator("tr[data-path='notes.md']").textContent()).toContain("deleted")
    await page.screenshot({ path: join(SHOTS, "restore-plan.png") })
    expect(existsSync(join(workdir, "notes.md"))).toBe(true)
    await plan.getByRole("button", { name: "Confirm" }).click()
    await eventually(() => page.getByRole("alert").textContent()).toContain("Restored: 1 file deleted, the conversation moved")
    expect(existsSync(join(workdir, "notes.md"))).toBe(false)
    // Undo: the same plan first, then the file is back.
    await page.getByRole("button", { name: "Undo" }).click()
    const undo = page.getByRole("dialog", { name: "Undo the last move" })
    expect(await undo.locator("tr[data-path='notes.md']").textContent()).toContain("written back")
    await undo.getByRole("button", { name: "Confirm" }).click()
    await eventually(() => page.getByRole("alert").textContent()).toContain("Undone: 1 file put back")
    expect(readFileSync(join(workdir, "notes.md"), "utf8")).toBe("# notes\n")
    await page.close()
  })

  it("shows a refused restore's reason for each file, and it cannot be confirmed", async () => {
    const page = await browser.newPage()
    await openSession(page)
    // Someone edits the file the restore would delete.
    writeFileSync(join(workdir, "notes.md"), "# notes\nedited by hand\n")
    try {
      await checkpointRow(page, "Write notes instead").click()
      await page.getByRole("button", { name: "Restore to before this checkpoint" }).click()
      const plan = page.getByRole("dialog", { name: "Restore to before checkpoint" })
      await plan.waitFor()
      const refused = plan.locator("[data-path='notes.md']")
      await eventually(() => refused.first().textContent()).toContain("modified_externally")
      expect(await plan.getByRole("button", { name: "Confirm" }).isDisabled()).toBe(true)
      await plan.getByRole("button", { name: "Cancel" }).click()
      expect(await page.getByRole("dialog").count()).toBe(0)
      expect(readFileSync(join(workdir, "notes.md"), "utf8")).toBe("# notes\nedited by hand\n")
    } finally {
      writeFileSync(join(workdir, "notes.md"), "# notes\n")
      await page.close()
    }
  })

  it("labels a checkpoint and a branch; compacts, saying when there was nothing to compact; shows a compaction's summary as such", async () => {
    const page = await browser.newPage()
    await openSession(page, "Create hello.ts")
    await page.getByRole("button", { name: "Label…" }).click()
    await page.getByLabel(/Label for checkpoint/).fill("the start")
    // What another process writes meanwhile redraws the page; what was typed stays.
    await appendFromAnotherProcess("Appended while a label was typed", "Answered while a label was typed.")
    await checkpointRow(page, "Appended while a label was typed").waitFor()
    expect(await page.getByLabel(/Label for checkpoint/).inputValue()).toBe("the start")
    await page.getByRole("button", { name: "Save label" }).click()
    await eventually(async () => {
      const label = checkpointRow(page, "Create hello.ts").locator(".label:not(.branch)")
      return (await label.count()) > 0 ? label.textContent() : `no label; notice: ${await page.locator(".notice").textContent()}`
    }).toBe("the start")
    // A branch's name: on its tip's row.
    const otherTip = page.locator("[role=treeitem].tip.side > .row")
    await otherTip.click()
    await page.getByRole("button", { name: "Label branch…" }).click()
    await page.getByLabel(/Label for the branch ending at/).fill("greeting")
    await page.getByRole("button", { name: "Save label" }).click()
    await eventually(() => otherTip.locator(".label.branch").count()).toBe(1)
    expect(await otherTip.locator(".label.branch").textContent()).toBe("greeting")
    const labelled = await api("GET", "/sessions/s1/tree") as { branches: Array<{ label?: string; checkpoint: number | null }> }
    expect(labelled.branches.filter((branch) => branch.label === "greeting")).toHaveLength(1)
    // Everything is recent (the default keeps 20,000 tokens verbatim): nothing to compact, and the page says why.
    await page.getByRole("button", { name: "Compact" }).click()
    await eventually(() => page.getByRole("alert").textContent()).toContain("Nothing compacted")
    // Compacted by another client: the summary shows, marked as such, where the messages it replaces end.
    expect(String(await api("POST", "/sessions/s1/compact", { keepRecentTokens: 0 }))).toContain('"compacted":true')
    // At the last checkpoint (the compaction came after its turn); not at the one before.
    await checkpointRow(page, "Appended while a label was typed").click()
    const summary = page.locator(".message.compaction")
    await summary.waitFor()
    expect(await summary.textContent()).toContain("Summary: hello.ts made.")
    expect(await summary.textContent()).toContain("Compaction summary")
    await checkpointRow(page, "A prompt from another process").click()
    await eventually(() => page.getByRole("region", { name: "Conversation", exact: true }).textContent()).toContain("Answered in another process.")
    expect(await page.locator(".message.compaction").count()).toBe(0)
    await page.close()
  })

  it("on another branch's checkpoint: switch there or restore there, each through its plan; undo says where it goes; a branch folds", async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } })
    await openSession(page, "Capitalise the greeting")
    const hello = () => readFileSync(join(workdir, "hello.ts"), "utf8")
    expect(hello()).toContain("hello ${name}")
    expect(existsSync(join(workdir, "notes.md"))).toBe(true)
    // Switch: the other branch's conversation and files.
    await page.getByRole("toolbar", { name: "Checkpoint actions" }).getByRole("button", { name: "Switch to this branch" }).click()
    const switchPlan = page.getByRole("dialog", { name: "Switch to the branch ending at" })
    await switchPlan.waitFor()
    expect(await switchPlan.locator("tr[data-path='notes.md']").textContent()).toContain("deleted")
    await switchPlan.getByRole("button", { name: "Confirm" }).click()
    await eventually(() => page.getByRole("alert").textContent()).toContain("Switched:")
    expect(hello()).toContain("Hello, ${name}!")
    expect(existsSync(join(workdir, "notes.md"))).toBe(false)
    await eventually(() => page.locator("[role=treeitem].checkpoint.current .prompt").allTextContents()).toEqual(["Create hello.ts <b>in bold</b>", "Capitalise the greeting"])
    expect(await page.locator(".badge.here").count()).toBe(1)
    // Undo, in the session's own toolbar, says where it goes back to.
    const before = await api("GET", "/sessions/s1/tree") as { undo: { from: number } | null }
    await page.getByRole("toolbar", { name: "Session actions" }).getByRole("button", { name: "Undo" }).click()
    const undo = page.getByRole("dialog", { name: `Undo the last move (back to #${before.undo!.from})` })
    await undo.waitFor()
    await undo.getByRole("button", { name: "Confirm" }).click()
    await eventually(() => page.getByRole("alert").textContent()).toContain("Undone:")
    expect(existsSync(join(workdir, "notes.md"))).toBe(true)
    // Restore to before a checkpoint of another branch: the session moves there, conversation and files.
    await checkpointRow(page, "Capitalise the greeting").click()
    await page.getByRole("toolbar", { name: "Checkpoint actions" }).getByRole("button", { name: "Restore to before this checkpoint" }).click()
    const restorePlan = page.getByRole("dialog", { name: "Restore to before checkpoint" })
    await restorePlan.waitFor()
    await restorePlan.getByRole("button", { name: "Confirm" }).click()
    await eventually(() => page.getByRole("alert").textContent()).toContain("Restored:")
    expect(hello()).toContain("hello ${name}")
    expect(existsSync(join(workdir, "notes.md"))).toBe(false)
    await page.getByRole("toolbar", { name: "Session actions" }).getByRole("button", { name: "Undo" }).click()
    await page.getByRole("dialog", { name: "Undo the last move" }).getByRole("button", { name: "Confirm" }).click()
    await eventually(() => page.getByRole("alert").textContent()).toContain("Undone:")
    expect(existsSync(join(workdir, "notes.md"))).toBe(true)
    // ← on the other branch folds it into its tip; → shows it again.
    await eventually(() => page.locator("[role=treeitem].side.checkpoint").count()).toBe(1)
    await page.locator("[role=treeitem].side.checkpoint").focus()
    await page.keyboard.press("ArrowLeft")
    await eventually(() => page.locator("[role=treeitem].side.checkpoint").count()).toBe(0)
    expect(await page.locator("[role=treeitem].side.tip").getAttribute("aria-expanded")).toBe("false")
    expect(await page.locator("[role=treeitem].side.tip").textContent()).toContain("1 more folded")
    await page.keyboard.press("ArrowRight")
    await eventually(() => page.locator("[role=treeitem].side.checkpoint").count()).toBe(1)
    await page.close()
  })

  it("forks from a checkpoint through its plan, and opens the fork", async () => {
    const page = await browser.newPage()
    await openSession(page, "Capitalise the greeting")
    await page.getByRole("button", { name: "Fork from here" }).click()
    const plan = page.getByRole("dialog", { name: "Fork from before checkpoint" })
    await plan.waitFor()
    await plan.getByRole("button", { name: "Confirm" }).click()
    await eventually(() => page.getByRole("alert").textContent()).toMatch(/Forked into session \S+/)
    const forkId = /Forked into session (\S+?):/.exec((await page.getByRole("alert").textContent()) ?? "")![1]!
    // The fork is listed and open. It shares the whole tree (nothing is lost) and stands just before the checkpoint.
    await page.locator(`[data-session="${forkId}"][aria-current=true]`).waitFor()
    const forkTree = await api("GET", `/sessions/${forkId}/tree`) as { checkpoints: Array<{ prompt: string; current: boolean }> }
    expect(forkTree.checkpoints.filter((checkpoint) => checkpoint.current).map((checkpoint) => checkpoint.prompt)).toEqual([
      "Create hello.ts <b>in bold</b>"
    ])
    await eventually(() => page.locator("[role=treeitem].current > .row .prompt").allTextContents()).toEqual(["Create hello.ts <b>in bold</b>"])
    expect((await page.locator("[role=treeitem] > .row .prompt").allTextContents()).sort()).toEqual(
      forkTree.checkpoints.map((checkpoint) => checkpoint.prompt).sort()
    )
    await page.close()
  })

  it("answers a running turn's permission question from the page", async () => {
    const page = await browser.newPage()
    await openSession(page)
    // A turn that will ask before its shell command, started without waiting for it.
    const started = await fetch(`${url}/sessions/s2/messages?detach=true`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "Run the command" })
    })
    expect(started.status).toBe(202)
    await page.reload()
    await page.locator("[data-session=s2]").click()
    const question = page.getByRole("region", { name: "Waiting for permission" })
    await eventually(async () =>
      (await question.count()) > 0
        ? question.textContent()
        : `no question; notice: ${await page.locator(".notice").textContent()}; status: ${await page.locator("#status").textContent()}`
    ).toContain("echo allowed > asked.txt")
    expect(await question.locator("code").textContent()).toBe("echo allowed > asked.txt")
    await page.screenshot({ path: join(SHOTS, "permission.png") })
    expect(existsSync(join(workdir, "asked.txt"))).toBe(false)
    await question.getByRole("button", { name: "Allow" }).click()
    await eventually(() => page.getByRole("region", { name: "Conversation", exact: true }).textContent()).toContain("Ran it.")
    expect(readFileSync(join(workdir, "asked.txt"), "utf8")).toBe("allowed\n")
    expect(await page.getByRole("region", { name: "Waiting for permission" }).count()).toBe(0)
    // Denied with a reason: the model is told it, and the command never runs.
    const again = await fetch(`${url}/sessions/s2/messages?detach=true`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ text: "Remove it" })
    })
    expect(again.status).toBe(202)
    await eventually(async () => (await question.count()) > 0 ? question.locator("code").textContent() : "no question").toBe("asked.txt")
    // The diff the edit would make, as the terminal shows it — not the call's JSON.
    const diff = question.getByLabel("What edit_file would change")
    expect(await diff.locator(".removed").allTextContents()).toEqual(["-allowed\n"])
    expect(await diff.locator(".added").allTextContents()).toEqual(["+edited\n"])
    await page.screenshot({ path: join(SHOTS, "permission-edit.png") })
    await question.getByLabel("Deny, and say why:").fill("keep the file")
    await question.getByRole("button", { name: "Deny with reason" }).click()
    await eventually(() => page.getByRole("region", { name: "Conversation", exact: true }).textContent()).toContain("Kept the file.")
    expect(await page.getByRole("region", { name: "Conversation", exact: true }).textContent()).toContain(
      "permission denied: the user denied edit_file: keep the file; the tool did not run"
    )
    expect(readFileSync(join(workdir, "asked.txt"), "utf8")).toBe("allowed\n")
    await page.close()
  })

  it("follows on after the server restarts: the page reconnects and misses nothing", async () => {
    const page = await browser.newPage()
    await openSession(page)
    await page.locator(".status.live").waitFor()
    const port = new URL(url).port
    server.child.kill("SIGKILL")
    await server.closed
    await page.locator(".status.reconnecting").waitFor()
    // Written while no server runs: the page must still get it once one is back.
    await appendFromAnotherProcess("Written while the server was down", "Answered while the server was down.")
    ;({ worker: server } = await startServe(["--port", port, "--token", TOKEN, "--checkpointer", `file:${sessions}`]))
    await page.locator(".status.live").waitFor()
    await checkpointRow(page, "Written while the server was down").waitFor()
    await page.close()
  })

  it("builds the page from nothing that parses text as HTML", () => {
    const viewer = resolve(import.meta.dirname, "..", "src", "viewer")
    const sources = readdirSync(viewer).filter((file) => file.endsWith(".ts")).map((file) => readFileSync(join(viewer, file), "utf8"))
    expect(sources.length).toBeGreaterThanOrEqual(10)
    for (const source of sources) expect(source).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|DOMParser/)
  })
})
