import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpApiClient from "@effect/platform/HttpApiClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Effect } from "effect"
import { SessionApi } from "../../src/server.js"

/**
 * The server tests' typed client: derived from `SessionApi` (as a user would make it), sending
 * the bearer token with every request.
 */
const makeClient = (baseUrl: string, token: string) =>
  HttpApiClient.make(SessionApi, { baseUrl, transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(token)) })

export type SessionClient = Effect.Effect.Success<ReturnType<typeof makeClient>>

/** One call of the typed client against the server at `baseUrl`: its answer, decoded. */
export const answer = <A, E>(baseUrl: string, token: string, call: (client: SessionClient) => Effect.Effect<A, E>): Promise<A> =>
  Effect.runPromise(Effect.flatMap(makeClient(baseUrl, token), call).pipe(Effect.provide(FetchHttpClient.layer)))

/** One call that must fail: the error the client decoded from the server's answer (the server's own error class). */
export const refusal = <A, E>(baseUrl: string, token: string, call: (client: SessionClient) => Effect.Effect<A, E>): Promise<E> =>
  answer(baseUrl, token, (client) => Effect.flip(call(client)))
