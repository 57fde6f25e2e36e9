import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { memoryCheckpointer, UserMessage } from "@lite-agent/sdk"
import { serveSessions, SessionApi } from "@lite-agent/server"
import { Effect } from "effect"

const checkpointer = memoryCheckpointer()
await checkpointer.append("demo", [new UserMessage({ content: "Refactor src/auth.ts", origin: "user" })])
const server = await serveSessions({ checkpointer })

const program = Effect.gen(function*() {
  const client = yield* HttpApiClient.make(SessionApi, {
    baseUrl: server.url,
    transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(server.token))
  })
  const { sessions } = yield* client.sessions.list()
  const { head } = yield* client.sessions.get({ path: { id: "demo" } })
  const { checkpoints } = yield* client.sessions.checkpoints({ path: { id: "demo" } })
  console.log(`${sessions.length} session, head ${head}, checkpoint: ${checkpoints[0]?.prompt}`)
}).pipe(Effect.provide(FetchHttpClient.layer))

await Effect.runPromise(program).finally(() => server.close())
