/**
 * Worker for test/fork.deleteRace.test.ts: a store of its own over IPC, deleting or forking
 * sessions when told, so that two of them race one session.
 *
 *   node test/workers/forker.ts <file|sqlite|postgres> <location>
 *
 * It sends `{ ready: true }` once the store is open, then answers each message
 * `{ op: "delete", session }` or `{ op: "fork", from, fork, at }` with `{ ok: true }` or
 * `{ ok: false, tag, message }`. Each operation starts after a random pause of up to
 * `jitterMs`, so that the trials meet at every point of each other's steps.
 */
import { SessionForked } from "../../src/index.js"
import { isStoreBackend, openStore } from "../support/stores.js"

export type ForkerCommand =
  | { readonly op: "delete"; readonly session: string; readonly jitterMs: number }
  | { readonly op: "fork"; readonly from: string; readonly fork: string; readonly at: number; readonly jitterMs: number }
  | { readonly op: "close" }

export type ForkerReply = { readonly ok: true } | { readonly ok: false; readonly tag: string | undefined; readonly message: string }

const [backend, location] = process.argv.slice(2)
if (!isStoreBackend(backend) || location === undefined) throw new Error("usage: forker.ts <backend> <location>")

const store = await openStore(backend, location)
await store.list()
process.send!({ ready: true })

const run = async (command: ForkerCommand): Promise<void> => {
  if (command.op === "close") {
    await store.close()
    process.disconnect()
    return
  }
  await new Promise((resolve) => setTimeout(resolve, Math.random() * command.jitterMs))
  try {
    if (command.op === "delete") await store.delete(command.session)
    else await store.append(command.fork, [new SessionForked({ from: command.from, at: command.at })], 0)
    process.send!({ ok: true } satisfies ForkerReply)
  } catch (error) {
    process.send!({ ok: false, tag: (error as { readonly _tag?: string })._tag, message: String(error) } satisfies ForkerReply)
  }
}

process.on("message", (message) => void run(message as ForkerCommand))
