import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { aes256gcmCodec, CodecError, fileCheckpointer, UserMessage } from "@lite-agent/sdk"

const dir = mkdtempSync(join(tmpdir(), "docs-file-")) // fileCheckpointer() alone: ~/.lite-agent/sessions
const key = randomBytes(32) // 32 bytes you keep
const sealed = fileCheckpointer({ dir, synchronous: "full", codec: aes256gcmCodec(key) })
const wrongKey = fileCheckpointer({ dir, codec: aes256gcmCodec(randomBytes(32)) })

try {
  await sealed.append("s1", [new UserMessage({ content: "Refactor src/auth.ts", origin: "user" })])
  console.log(await sealed.checkIntegrity()) // { ok, detail }, changes nothing
  try {
    await wrongKey.read("s1")
  } catch (err) {
    if (!(err instanceof CodecError)) throw err
    console.log(`wrong key: ${err.message}`)
  }
} finally {
  await sealed.close()
  await wrongKey.close()
  rmSync(dir, { recursive: true, force: true })
}
