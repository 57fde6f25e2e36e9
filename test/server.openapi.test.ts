/**
 * The OpenAPI document as the tools people generate clients with read it, against a real server:
 * it passes Redocly's recommended rules with no error, and a client generated from it
 * (openapi-typescript's types, openapi-fetch) type-checks — a seq is a number, the token a header
 * — and calls the server: without the token it gets the 401 the document says.
 */
import { mkdirSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { createConfig, lintFromString } from "@redocly/openapi-core"
import openapiTS, { astToString } from "openapi-typescript"
import ts from "typescript"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { memoryCheckpointer, UserMessage } from "../src/index.js"
import { type RunningSessionServer, serveSessions } from "../src/server.js"

const TOKEN = "openapi-token-0123456789"
const root = resolve(import.meta.dirname, "..")
/** Inside the repository, so that the generated client resolves openapi-fetch from its node_modules. */
const out = join(root, "test-output", "openapi-client")

const checkpointer = memoryCheckpointer()
let server: RunningSessionServer
let document: string
beforeAll(async () => {
  await checkpointer.append("s1", [new UserMessage({ content: "the first prompt", origin: "user" })])
  server = await serveSessions({ checkpointer, token: TOKEN })
  document = await (await fetch(`${server.url}/openapi.json`)).text()
})
afterAll(async () => {
  await server?.close()
  await checkpointer.close()
})

/** What the compiler says of a file of the generated client's folder, under strict settings. */
const typeErrors = (file: string): Array<string> => {
  const program = ts.createProgram([join(out, file)], {
    strict: true,
    noEmit: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    skipLibCheck: true
  })
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"))
}

const CLIENT = `
import createClient from "openapi-fetch"
import type { paths } from "./api.js"

/** Calls of the generated client; each argument's type is the document's. */
export const calls = async (baseUrl: string, token: string) => {
  const client = createClient<paths>({ baseUrl, headers: { authorization: \`Bearer \${token}\` } })
  const sessions = await client.GET("/sessions")
  const tree = await client.GET("/sessions/{id}/tree", { params: { path: { id: "s1" } } })
  const changes = await client.GET("/sessions/{id}/checkpoints/{seq}/changes", { params: { path: { id: "s1", seq: 1 } } })
  const conversation = await client.GET("/sessions/{id}/conversation", { params: { path: { id: "s1" }, query: { at: 1 } } })
  const leaf: number | undefined = tree.data?.leaf
  const ids: Array<string> | undefined = sessions.data?.sessions.map((session) => session.id)
  const anonymous = createClient<paths>({ baseUrl })
  const refused = await anonymous.GET("/sessions")
  return { ids, leaf, changesStatus: changes.response.status, messages: conversation.data?.entries.length, refusedStatus: refused.response.status }
}
`

describe("the OpenAPI document, read by client generators", () => {
  it("passes the recommended rules of Redocly's linter with no error", async () => {
    const config = await createConfig({ extends: ["recommended"] })
    const problems = await lintFromString({ source: document, absoluteRef: join(out, "openapi.json"), config })
    const said = (severity: string) =>
      problems.filter((problem) => problem.severity === severity).map((problem) => `${problem.ruleId}: ${problem.message} (${problem.location[0]?.pointer ?? ""})`)
    expect(said("error")).toEqual([])
    // Every operation has a summary a generator can name it by.
    const spec = JSON.parse(document) as { paths: Record<string, Record<string, { summary?: string }>> }
    expect(Object.values(spec.paths).flatMap((item) => Object.values(item)).filter((operation) => operation.summary === undefined)).toEqual([])
  })

  it("a client generated from it type-checks and calls the server with the token; without it, 401", async () => {
    mkdirSync(out, { recursive: true })
    writeFileSync(join(out, "api.ts"), astToString(await openapiTS(JSON.parse(document) as never)))
    writeFileSync(join(out, "client.ts"), CLIENT)
    expect(typeErrors("client.ts")).toEqual([])
    const { calls } = await import(join(out, "client.ts")) as { calls: (baseUrl: string, token: string) => Promise<Record<string, unknown>> }
    expect(await calls(server.url, TOKEN)).toEqual({ ids: ["s1"], leaf: 1, changesStatus: 200, messages: 1, refusedStatus: 401 })
  })

  it("a seq given as text does not type-check: the document says it is a number", () => {
    writeFileSync(join(out, "wrong.ts"), `
import createClient from "openapi-fetch"
import type { paths } from "./api.js"
export const wrong = () => createClient<paths>({ baseUrl: "" }).GET("/sessions/{id}/checkpoints/{seq}/changes", { params: { path: { id: "s1", seq: "one" } } })
`)
    expect(typeErrors("wrong.ts").join("\n")).toContain(`Type 'string' is not assignable to type 'number'`)
  })
})
