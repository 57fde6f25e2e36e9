/**
 * The code samples of the product spec (docs/spec/checkpoints.md) as programs: each sample's
 * text exactly as written, with what it takes from its page put before it — the imports and
 * the `agent` of the sample above it, the `checkpointer`, `sessionId`, `events` and
 * `knownHead` the conflict sample names — and a last line that prints what the test checks.
 */
import { readFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { expect } from "vitest"
import { sqliteCheckpointer } from "../../src/checkpoint-sqlite.js"

export interface SpecSample {
  readonly name: string
  /** The whole program: context, the sample verbatim, the report line. */
  readonly program: string
  /** The texts the fake Anthropic answers the sample's model calls with, in order. */
  readonly anthropicReplies: ReadonlyArray<string>
  /** Checks the report (the JSON of the program's last output line); `home` is its working directory. */
  readonly check: (report: unknown, home: string) => void | Promise<void>
}

const specFile = resolve(import.meta.dirname, "..", "..", "docs", "spec", "checkpoints.md")

/** The body of every ```ts block of the spec, in order. */
export const specBlocks = (): ReadonlyArray<string> =>
  [...readFileSync(specFile, "utf8").matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => match[1] ?? "")

export const specSamples = (): ReadonlyArray<SpecSample> => {
  const [usage = "", timeTravel = "", sqlite = "", conflict = ""] = specBlocks()
  const usageImports = usage.split("\n").filter((line) => line.startsWith("import ")).join("\n")
  return [
    {
      name: "usage",
      program: `${usage}
console.log(JSON.stringify({ text: result.text, checkpoints: (await agent.listCheckpoints(agent.sessionId)).map((c) => c.prompt) }))
`,
      anthropicReplies: ["Refactored src/auth.ts.", "Added the tests."],
      check: (report) => {
        expect(report).toEqual({
          text: "Added the tests.",
          checkpoints: ["Refactor src/auth.ts to use async/await.", "Now add tests for it."]
        })
      }
    },
    {
      name: "time-travel",
      // The session of the usage sample, with a third prompt: the sample restores to before it.
      program: `${usage}
await agent.send("Rename the helper.");
${timeTravel}
console.log(JSON.stringify({ resumed: agent.sessionId === sessions[0].id, checkpoints: (await agent.listCheckpoints(agent.sessionId)).map((c) => c.prompt) }))
`,
      anthropicReplies: ["Refactored src/auth.ts.", "Added the tests.", "Renamed it."],
      check: (report) => {
        expect(report).toEqual({
          resumed: true,
          checkpoints: ["Refactor src/auth.ts to use async/await.", "Now add tests for it."]
        })
      }
    },
    {
      name: "sqlite",
      program: `${usageImports}
${sqlite}
console.log(JSON.stringify({ sessionId: agent.sessionId }))
`,
      anthropicReplies: ["Hello to you."],
      check: async (report, home) => {
        // The turn persisted to ./sessions.db: another process opens it and reads the session.
        const { sessionId } = report as { sessionId: string }
        const store = sqliteCheckpointer({ file: join(home, "sessions.db") })
        try {
          const events = await store.read(sessionId)
          expect(events.map((stored) => stored.event._tag)).toContain("UserMessage")
          expect(events.map((stored) => stored.event._tag)).toContain("AssistantMessage")
        } finally {
          await store.close()
        }
      }
    },
    {
      name: "conflict",
      // Another client has advanced the log past `knownHead`: the append conflicts.
      program: `import { sqliteCheckpointer } from "@lite-agent/checkpoint-sqlite";
import { UserMessage } from "@lite-agent/core";
const checkpointer = sqliteCheckpointer({ file: "./sessions.db" });
const sessionId = "spec-conflict";
await checkpointer.append(sessionId, [new UserMessage({ content: "from another client", origin: "user" })]);
const knownHead = 0;
const events = [new UserMessage({ content: "stale", origin: "user" })];
${conflict}
console.log(JSON.stringify({ head: await checkpointer.head(sessionId), contents: (await checkpointer.read(sessionId)).map((stored) => stored.event._tag === "UserMessage" ? stored.event.content : stored.event._tag) }));
await checkpointer.close();
`,
      anthropicReplies: [],
      check: (report) => {
        expect(report).toEqual({ head: 1, contents: ["from another client"] })
      }
    }
  ]
}
