import { createHash } from "node:crypto"

/** The SHA-256 of `data`, as lowercase hex: how file contents are named in events. */
export const sha256Hex = (data: Uint8Array): string => createHash("sha256").update(data).digest("hex")
