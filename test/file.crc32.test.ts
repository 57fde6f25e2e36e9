import fc from "fast-check"
import { crc32 } from "node:zlib"
import { describe, expect, it } from "vitest"
import { crc32Range } from "../src/backends/file/crc32.js"

describe("crc32Range (the log lines' checksum)", () => {
  it("equals zlib's CRC-32 of the same range, for any bytes and any range, short lines and long", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 0, maxLength: 2_000 }),
        fc.nat(),
        fc.nat(),
        (array, a, b) => {
          const bytes = Buffer.from(array)
          const start = bytes.length === 0 ? 0 : a % (bytes.length + 1)
          const end = start + (b % (bytes.length - start + 1))
          expect(crc32Range(bytes, start, end)).toBe(crc32(bytes.subarray(start, end)))
        }
      ),
      { numRuns: 500 }
    )
  })

  it("matches known values: empty, a classic check string, and a record line's body", () => {
    expect(crc32Range(Buffer.alloc(0), 0, 0)).toBe(0)
    expect(crc32Range(Buffer.from("123456789"), 0, 9)).toBe(0xcbf43926)
    const body = Buffer.from(`x\t1\t1\t{"ts":1,"event":{"_tag":"UserMessage","content":"hi","origin":"user"}}\n`)
    expect(crc32Range(body, 2, body.length - 1)).toBe(crc32(body.subarray(2, body.length - 1)))
  })
})
