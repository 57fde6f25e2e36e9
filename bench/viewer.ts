/**
 * The viewer (`lite-agent serve`'s page at /): the bytes it ships, and the time from opening a
 * session's page in headless Chromium (Debian's, driven by playwright-core) until its
 * conversation is on the page — for a session of 1,000 events (250 turns: a prompt, a tool call,
 * its result, an answer) against a session with no message yet, measured in the same run,
 * alternating. Medians of `ROUNDS`.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { gzipSync } from "node:zlib"
import { chromium } from "playwright-core"
import type { SessionEventInput } from "../src/core/encoding.js"
import { AssistantMessage, SessionMetadata, ToolResult, UserMessage } from "../src/core/events.js"
import { fileCheckpointer } from "../src/index.js"
import { serveSessions } from "../src/server.js"
import { median, ratio } from "./shared.js"

const ROUNDS = 9
const TURNS = 250
const TOKEN = "viewer-bench-token-0123456789"

export const runViewerBench = async () => {
  const dir = mkdtempSync(join(tmpdir(), "lite-agent-bench-viewer-"))
  const checkpointer = fileCheckpointer({ dir })
  const server = await serveSessions({ checkpointer, token: TOKEN, port: 0 })
  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] })
  try {
    await checkpointer.append("empty", [new SessionMetadata({ formatVersion: 1 })])
    const events: Array<SessionEventInput> = [new SessionMetadata({ formatVersion: 1 })]
    for (let turn = 0; turn < TURNS; turn++) {
      const id = `toolu_${turn}`
      events.push(
        new UserMessage({ content: `Prompt ${turn}: change file ${turn % 17}.ts`, origin: "user" }),
        new AssistantMessage({ content: [{ type: "tool_use", id, name: "read_file", input: { path: `src/file${turn % 17}.ts` } }] }),
        new ToolResult({ toolUseId: id, toolName: "read_file", content: `export const value${turn} = ${turn}\n`.repeat(8), isError: false }),
        new AssistantMessage({ content: [{ type: "text", text: `Turn ${turn} done: the file reads as expected.` }] })
      )
    }
    await checkpointer.append("long", events.slice(0, 1000))

    const shipped = await Promise.all(["/", "/viewer/app.js", "/viewer/viewer.css"].map(async (path) => {
      const body = Buffer.from(await (await fetch(`${server.url}${path}`)).arrayBuffer())
      return { path, bytes: body.length, gzip: gzipSync(body).length }
    }))
    const total = shipped.reduce((sum, file) => sum + file.bytes, 0)
    const totalGzip = shipped.reduce((sum, file) => sum + file.gzip, 0)

    const context = await browser.newContext()
    // The token as the page keeps it for the tab (the gate is not what is measured).
    await context.addInitScript({ content: `sessionStorage.setItem("lite-agent-token", ${JSON.stringify(TOKEN)})` })
    const page = await context.newPage()
    /** Ms from opening the session's page until its conversation (or "No messages yet") is shown. */
    const firstRender = async (sessionId: string, expected: string) => {
      await page.goto("about:blank")
      const start = performance.now()
      await page.goto(`${server.url}/#${sessionId}`)
      await page.getByRole("region", { name: "Conversation", exact: true }).filter({ hasText: expected }).waitFor()
      return performance.now() - start
    }
    // The 1,000th event is the last turn's tool result.
    const lastOfLong = `export const value${TURNS - 1} = ${TURNS - 1}`
    await firstRender("long", lastOfLong)
    await firstRender("empty", "No messages yet")
    const long: Array<number> = []
    const empty: Array<number> = []
    for (let round = 0; round < ROUNDS; round++) {
      empty.push(await firstRender("empty", "No messages yet"))
      long.push(await firstRender("long", lastOfLong))
    }
    await context.close()
    return [
      ...shipped.map((file) => [`shipped: ${file.path}`, `${file.bytes} B (${file.gzip} B gzipped)`, "", ""]),
      ["shipped: the page in all", `${total} B (${totalGzip} B gzipped)`, "", ""],
      [`first render of a session of 1,000 events (${TURNS} prompts)`, `${median(long).toFixed(0)} ms`, `${median(empty).toFixed(0)} ms`, ratio(median(long), median(empty))]
    ]
  } finally {
    await browser.close()
    await server.close()
    await checkpointer.close()
    rmSync(dir, { recursive: true, force: true })
  }
}
