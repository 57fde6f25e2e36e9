/**
 * CRC-32 (the zlib polynomial) of a byte range, without a view over it.
 *
 * Every line of a replay is checked, and most lines are a few hundred bytes: for those, making
 * a `subarray` and crossing into zlib costs more than the checksum itself. A table-driven loop
 * (slicing-by-8) over the range is two to three times faster there. Long lines go to zlib, whose
 * native code wins from about half a kilobyte on.
 */
import { crc32 } from "node:zlib"

/** Below this many bytes the JavaScript loop is faster than zlib on this kind of machine. */
const NATIVE_FROM_BYTES = 512

/** Eight 256-entry tables: table k advances a byte through k further zero bytes. */
const TABLE = (() => {
  const table = new Int32Array(256 * 8)
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte
    for (let bit = 0; bit < 8; bit++) crc = crc & 1 ? 0xedb88320 ^ (crc >>> 1) : crc >>> 1
    table[byte] = crc
  }
  for (let byte = 0; byte < 256; byte++) {
    let crc = table[byte]!
    for (let slice = 1; slice < 8; slice++) {
      crc = table[crc & 0xff]! ^ (crc >>> 8)
      table[slice * 256 + byte] = crc
    }
  }
  return table
})()

/** CRC-32 of `bytes[start, end)`, as `zlib.crc32` of that range returns it. */
export const crc32Range = (bytes: Buffer, start: number, end: number): number => {
  if (end - start >= NATIVE_FROM_BYTES) return crc32(bytes.subarray(start, end))
  const t = TABLE
  let crc = -1
  let index = start
  for (; index + 8 <= end; index += 8) {
    const word = crc ^ (bytes[index]! | (bytes[index + 1]! << 8) | (bytes[index + 2]! << 16) | (bytes[index + 3]! << 24))
    crc = t[1792 + (word & 0xff)]! ^ t[1536 + ((word >>> 8) & 0xff)]! ^ t[1280 + ((word >>> 16) & 0xff)]! ^
      t[1024 + (word >>> 24)]! ^ t[768 + bytes[index + 4]!]! ^ t[512 + bytes[index + 5]!]! ^
      t[256 + bytes[index + 6]!]! ^ t[bytes[index + 7]!]!
  }
  for (; index < end; index++) crc = t[(crc ^ bytes[index]!) & 0xff]! ^ (crc >>> 8)
  return (crc ^ -1) >>> 0
}
