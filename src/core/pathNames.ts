/**
 * Names are bytes. A POSIX file system allows any byte but `/` and NUL in a name, so a name
 * need not be valid UTF-8; Node hands such a name back with U+FFFD in place of each bad byte,
 * which names no file at all. Paths are kept as strings in the log, lossless: a byte that is not
 * part of valid UTF-8 is kept as the lone surrogate U+DC80 + (byte − 0x80) — the way Python's
 * `surrogateescape` does it. A lone surrogate never comes out of decoding valid UTF-8, so no
 * two byte strings share a path, and a path of valid UTF-8 is its plain text. Pure.
 */

const LOW_SURROGATE_BASE = 0xdc00

/** Whether `path` holds a byte that is not UTF-8 (then the file system must be given its bytes). */
export const hasRawBytes = (path: string): boolean => LOW_SURROGATES.test(path) && rawByteIndexes(path).length > 0
const LOW_SURROGATES = /[\udc80-\udcff]/

/** Indexes of the lone surrogates U+DC80..U+DCFF in `path` (a low surrogate right after a high one is half of a pair). */
const rawByteIndexes = (path: string): Array<number> => {
  const indexes: Array<number> = []
  for (let index = 0; index < path.length; index++) {
    const code = path.charCodeAt(index)
    if (code >= 0xdc80 && code <= 0xdcff) {
      const before = index > 0 ? path.charCodeAt(index - 1) : 0
      if (!(before >= 0xd800 && before <= 0xdbff)) indexes.push(index)
    }
  }
  return indexes
}

/** The bytes a path names on the file system. */
export const bytesOfPath = (path: string): Uint8Array => {
  const encoder = new TextEncoder()
  const raw = rawByteIndexes(path)
  if (raw.length === 0) return encoder.encode(path)
  const parts: Array<Uint8Array> = []
  let from = 0
  for (const index of raw) {
    if (index > from) parts.push(encoder.encode(path.slice(from, index)))
    parts.push(Uint8Array.of(path.charCodeAt(index) - LOW_SURROGATE_BASE))
    from = index + 1
  }
  if (from < path.length) parts.push(encoder.encode(path.slice(from)))
  const bytes = new Uint8Array(parts.reduce((total, part) => total + part.length, 0))
  let offset = 0
  for (const part of parts) {
    bytes.set(part, offset)
    offset += part.length
  }
  return bytes
}

/** How many bytes the UTF-8 sequence starting at `bytes[at]` takes, or 0 when it is not valid there. */
const validSequenceLength = (bytes: Uint8Array, at: number): number => {
  const first = bytes[at]!
  if (first < 0x80) return 1
  const continuation = (offset: number, low = 0x80, high = 0xbf) => {
    const byte = bytes[at + offset]
    return byte !== undefined && byte >= low && byte <= high
  }
  if (first >= 0xc2 && first <= 0xdf) return continuation(1) ? 2 : 0
  if (first >= 0xe0 && first <= 0xef) {
    // No overlong forms (E0 A0..), no UTF-16 surrogates (ED 80..9F).
    const [low, high] = first === 0xe0 ? [0xa0, 0xbf] : first === 0xed ? [0x80, 0x9f] : [0x80, 0xbf]
    return continuation(1, low, high) && continuation(2) ? 3 : 0
  }
  if (first >= 0xf0 && first <= 0xf4) {
    const [low, high] = first === 0xf0 ? [0x90, 0xbf] : first === 0xf4 ? [0x80, 0x8f] : [0x80, 0xbf]
    return continuation(1, low, high) && continuation(2) && continuation(3) ? 4 : 0
  }
  return 0
}

/** The path that names these bytes: their UTF-8 text, each byte outside valid UTF-8 as its lone surrogate. */
export const pathOfBytes = (bytes: Uint8Array): string => {
  let text = ""
  let from = 0
  let at = 0
  const decoder = new TextDecoder("utf-8")
  while (at < bytes.length) {
    const length = validSequenceLength(bytes, at)
    if (length > 0) {
      at += length
      continue
    }
    if (at > from) text += decoder.decode(bytes.subarray(from, at))
    text += String.fromCharCode(LOW_SURROGATE_BASE + bytes[at]!)
    at++
    from = at
  }
  return from === 0 ? decoder.decode(bytes) : text + decoder.decode(bytes.subarray(from))
}

/** A path as text a person can read: each byte that is not UTF-8 shown as `\xNN`. */
export const displayPath = (path: string): string => {
  const raw = rawByteIndexes(path)
  if (raw.length === 0) return path
  let text = ""
  let from = 0
  for (const index of raw) {
    text += path.slice(from, index) + `\\x${(path.charCodeAt(index) - LOW_SURROGATE_BASE).toString(16).padStart(2, "0")}`
    from = index + 1
  }
  return text + path.slice(from)
}
