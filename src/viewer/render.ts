/**
 * The conversation at a checkpoint and the files its turn changed. Every piece of session text —
 * prompts, answers, tool inputs and results, file contents — goes on the page as text.
 */
import type { Changes, Conversation } from "./api.js"
import { type Child, el } from "./dom.js"

type TextBlock = { readonly type: "text"; readonly text: string }
type ToolUse = { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: unknown }

const contentText = (content: unknown): string =>
  typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((block: TextBlock) => (block.type === "text" ? block.text : "")).join("\n")
    : ""

const message = (kind: string, heading: Child, ...body: ReadonlyArray<Child>) =>
  el("article", { class: `message ${kind}` }, el("header", {}, heading), ...body)

const entry = (seq: number, event: Record<string, unknown>): HTMLElement => {
  const seqLabel = el("span", { class: "seq" }, `#${seq}`)
  switch (event["_tag"]) {
    case "UserMessage":
      return message("user", [seqLabel, " You"], el("div", { class: "text" }, contentText(event["content"])))
    case "RuntimeMessage":
      return message(
        "runtime",
        [seqLabel, " Runtime message ", el("span", { class: "badge" }, String(event["kind"]))],
        el("div", { class: "text" }, contentText(event["content"]))
      )
    case "AssistantMessage": {
      const blocks = (event["content"] as ReadonlyArray<TextBlock | ToolUse>) ?? []
      return message(
        "assistant",
        [seqLabel, " Agent"],
        blocks.map((block) =>
          block.type === "text"
            ? el("div", { class: "text" }, block.text)
            : el(
              "div",
              { class: "tool-call" },
              el("span", { class: "tool-name" }, block.name),
              el("pre", {}, JSON.stringify(block.input, null, 2))
            )
        )
      )
    }
    case "ToolResult":
      return message(
        event["isError"] === true ? "tool-result error" : "tool-result",
        [seqLabel, ` ${String(event["toolName"])} result`, event["isError"] === true ? el("span", { class: "badge" }, "error") : null],
        el("pre", {}, contentText(event["content"]))
      )
    case "BackgroundCompleted":
      return message(
        "runtime",
        [seqLabel, " Background command finished ", el("span", { class: "badge" }, `exit ${String(event["exitCode"])}`)],
        el("pre", {}, `${String(event["command"])}\n${String(event["output"])}`)
      )
    default:
      return message("other", [seqLabel, ` ${String(event["_tag"])}`])
  }
}

export const renderConversation = (conversation: Conversation, at: number | undefined) => {
  const summary = conversation.compaction
  const entries = conversation.entries
  return el(
    "section",
    { class: "conversation", "aria-label": "Conversation" },
    el("h2", {}, at === undefined ? "Conversation" : `Conversation up to the end of checkpoint #${at}`),
    entries.length === 0 && summary === null ? el("p", { class: "empty" }, "No messages yet.") : null,
    entries.map((each) => {
      const shown = entry(each.seq, each.event as Record<string, unknown>)
      // The compaction's summary stands where the messages it replaces end.
      return summary !== null && each.seq === summary.keptFromSeq
        ? [compaction(summary), shown]
        : shown
    }),
    summary !== null && !entries.some((each) => each.seq === summary.keptFromSeq) ? compaction(summary) : null
  )
}

const compaction = (summary: NonNullable<Conversation["compaction"]>) =>
  message(
    "compaction",
    [el("span", { class: "seq" }, `#${summary.seq}`), " Compaction summary ", el("span", { class: "badge" }, "the model sees this instead of the messages above")],
    el("div", { class: "text" }, summary.summary)
  )

const side = (recorded: Changes["files"][number]["before"]) =>
  recorded.kind === "file"
    ? `${recorded.size ?? 0} bytes`
    : recorded.kind === "link"
    ? `a link to ${recorded.target ?? "?"}`
    : recorded.kind === "absent"
    ? "absent"
    : recorded.kind === "directory"
    ? "a directory"
    : `unknown (${recorded.reason ?? "not recorded"})`

/** A unified diff's lines, each marked as what it is (a hunk, added, removed, context). */
export const diffLines = (lines: ReadonlyArray<string>) => lines.map((line) => diffLine(line))

const diffLine = (line: string) =>
  el(
    "span",
    {
      class: line.startsWith("---") || line.startsWith("+++")
        ? "file"
        : line.startsWith("@@")
        ? "hunk"
        : line.startsWith("+")
        ? "added"
        : line.startsWith("-")
        ? "removed"
        : "context"
    },
    `${line}\n`
  )

export const renderChanges = (changes: Changes) =>
  el(
    "section",
    { class: "changes", "aria-label": `Files changed by checkpoint ${changes.seq}` },
    el("h2", {}, `Files checkpoint #${changes.seq} changed`),
    changes.files.length === 0 ? el("p", { class: "empty" }, "No files changed in this turn.") : null,
    changes.files.map((file) =>
      el(
        "details",
        { class: "file", open: true },
        el("summary", {}, el("span", { class: "path" }, file.path), el("span", { class: "meta" }, ` ${side(file.before)} → ${side(file.after)}`)),
        file.note === null ? null : el("p", { class: "note" }, file.note),
        file.diff === null || file.diff.length === 0 ? null : el("pre", { class: "diff" }, file.diff.map(diffLine))
      )
    )
  )
