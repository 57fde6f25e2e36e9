/**
 * The on-disk format of a session log, as pure functions over bytes.
 *
 * ```
 * {"format":"lite-agent/session-log","version":1,"codec":"json"}\n      header
 * <crc32 hex8>\t<seq>\t<batchEnd>\t<payload>\n                            one line per event
 * ```
 *
 * The CRC-32 covers everything after its tab. `batchEnd` is the last seq of the append
 * the record belongs to: a batch counts only when its `seq === batchEnd` line is present,
 * so an append cut short by a crash is never half-visible. The payload is the codec's
 * text for `{"ts":…,"event":…}`.
 */
import { crc32 } from "node:zlib"
import { Effect } from "effect"
import { CheckpointIntegrityError, SchemaVersionError } from "../../core/errors.js"
import { crc32Range } from "./crc32.js"

export const LOG_FORMAT = "lite-agent/session-log"
/**
 * 2: the log's objects are in the store's shared object store (`.objects/`), not in a `blobs/`
 * directory of its session; a release that knows only 1 refuses it rather than miss them.
 */
export const LOG_VERSION = 2

/** Where the version digit of a header this library wrote sits: `{"format":"lite-agent/session-log","version":` comes first. */
export const HEADER_VERSION_OFFSET = `{"format":"${LOG_FORMAT}","version":`.length

const NEWLINE = 0x0a

/** View bytes as a Buffer without copying. */
const asBuffer = (bytes: Uint8Array): Buffer =>
  Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)
const TAB = 0x09

export interface LogHeader {
  readonly format: string
  readonly version: number
  readonly codec: string
  readonly keyId?: string
  /** Random per log file: a truncate (which rewrites the file) and a re-creation give a new one. Absent in older logs. */
  readonly generation?: string
}

export const headerLine = (codec: string, keyId: string | undefined, generation?: string): string =>
  JSON.stringify({
    format: LOG_FORMAT,
    version: LOG_VERSION,
    codec,
    ...(keyId === undefined ? {} : { keyId }),
    ...(generation === undefined ? {} : { generation })
  }) + "\n"

/**
 * Parse the header at the start of `bytes`. Returns the header and the offset just after
 * its newline.
 */
export const parseHeader = (
  sessionId: string,
  input: Uint8Array
): { readonly header: LogHeader; readonly end: number } | CheckpointIntegrityError | SchemaVersionError => {
  const bytes = asBuffer(input)
  const newline = bytes.indexOf(NEWLINE)
  const damaged = (detail: string) => new CheckpointIntegrityError({ sessionId, offset: 0, detail })
  if (newline < 0) return damaged("the log header is incomplete")
  let parsed: unknown
  try {
    parsed = JSON.parse(bytes.toString("utf8", 0, newline))
  } catch {
    return damaged("the log header is not valid JSON: this is not a lite-agent session log")
  }
  if (typeof parsed !== "object" || parsed === null) return damaged("the log header is not an object")
  const header = parsed as Partial<LogHeader>
  if (header.format !== LOG_FORMAT) return damaged(`unknown log format ${JSON.stringify(header.format)}`)
  if (typeof header.version !== "number" || typeof header.codec !== "string") {
    return damaged("the log header lacks its version or codec")
  }
  if (header.version > LOG_VERSION) {
    return new SchemaVersionError({ found: header.version, supported: LOG_VERSION, detail: `session "${sessionId}"` })
  }
  return { header: header as LogHeader, end: newline + 1 }
}

const hex8 = (value: number) => value.toString(16).padStart(8, "0")

/** One record line, newline included. */
export const recordLine = (seq: number, batchEnd: number, payload: string): string => {
  const body = `${seq}\t${batchEnd}\t${payload}`
  return `${hex8(crc32(body))}\t${body}\n`
}

/** What `parseLine` found in a line; filled in place, so a replay makes no object per line. */
export interface LineInfo {
  seq: number
  batchEnd: number
  payloadStart: number
  /** Index of the line's newline. */
  payloadEnd: number
}

const newLineInfo = (): LineInfo => ({ seq: 0, batchEnd: 0, payloadStart: 0, payloadEnd: 0 })

/**
 * Where the decimal number starting at `from` ends (the index of the tab after it), or -1 when
 * there is none: 1 to 16 digits, then a tab, before `to`. Positions, not objects: every line of
 * a replay goes through here.
 */
const numberEnd = (bytes: Buffer, from: number, to: number): number => {
  let index = from
  while (index < to && bytes[index]! >= 0x30 && bytes[index]! <= 0x39 && index - from < 16) index++
  return index === from || index >= to || bytes[index] !== TAB ? -1 : index
}

/** The value of the digits `bytes[from, end)` (checked by `numberEnd`). */
const numberValue = (bytes: Buffer, from: number, end: number): number => {
  let value = 0
  for (let index = from; index < end; index++) value = value * 10 + (bytes[index]! - 0x30)
  return value
}

const parseHex8 = (bytes: Buffer, from: number): number | undefined => {
  let value = 0
  for (let index = from; index < from + 8; index++) {
    const c = bytes[index]!
    const digit = c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : -1
    if (digit < 0) return undefined
    value = value * 16 + digit
  }
  return value
}

/**
 * Parse the line `bytes[start, newline)` into `line`; false (and `line` left meaningless) when
 * it is damaged in any way.
 */
export const parseLine = (input: Uint8Array, start: number, newline: number, line: LineInfo): boolean => {
  const bytes = asBuffer(input)
  if (newline - start < 9 + 6 || bytes[start + 8] !== TAB) return false
  const checksum = parseHex8(bytes, start)
  if (checksum === undefined || crc32Range(bytes, start + 9, newline) !== checksum) return false
  const seqEnd = numberEnd(bytes, start + 9, newline)
  if (seqEnd < 0) return false
  const batchEndEnd = numberEnd(bytes, seqEnd + 1, newline)
  if (batchEndEnd < 0) return false
  const seq = numberValue(bytes, start + 9, seqEnd)
  const batchEnd = numberValue(bytes, seqEnd + 1, batchEndEnd)
  if (seq < 1 || batchEnd < seq) return false
  line.seq = seq
  line.batchEnd = batchEnd
  line.payloadStart = batchEndEnd + 1
  line.payloadEnd = newline
  return true
}

/** A committed record found by a forward scan. */
export interface ScannedRecord {
  readonly seq: number
  readonly batchEnd: number
  readonly payload: string
  /** Offset of the record's first byte. */
  readonly start: number
  /** Offset just after this record's newline. */
  readonly end: number
}

/**
 * Reads a log forward, chunk by chunk, and returns only whole committed batches.
 *
 * A damaged line with nothing valid after it is a torn tail (a crash, or an append still in
 * progress) and ends the log quietly. A damaged line followed by a valid one is corruption
 * in the middle of the log: a `CheckpointIntegrityError` naming its offset and the seq it
 * should have had — nothing after it is skipped silently.
 */
export class ForwardScanner {
  private carry: Buffer = Buffer.alloc(0)
  /** Absolute offset of `carry[0]`. */
  private carryOffset: number
  private pending: Array<ScannedRecord> = []
  private lastCommittedSeq = 0
  private damagedAt: number | undefined

  constructor(
    private readonly sessionId: string,
    startOffset: number,
    /** Records at or before this seq are checked but not returned. */
    private readonly sinceSeq: number,
    /** The seq of the line at `startOffset` (a scan may start inside a batch, see `seekLine`). */
    firstSeq = 1
  ) {
    this.carryOffset = startOffset
    this.lastCommittedSeq = firstSeq - 1
  }

  push(chunk: Uint8Array): Array<ScannedRecord> | CheckpointIntegrityError {
    const bytes = this.carry.length === 0 ? asBuffer(chunk) : Buffer.concat([this.carry, chunk])
    const out: Array<ScannedRecord> = []
    let start = 0
    while (true) {
      const newline = bytes.indexOf(NEWLINE, start)
      if (newline < 0) break
      const offset = this.carryOffset + start
      const line = this.line
      if (!parseLine(bytes, start, newline, line)) {
        this.damagedAt ??= offset
      } else {
        if (this.damagedAt !== undefined) return this.corruption(this.damagedAt)
        const expected = this.expectedSeq()
        if (line.seq !== expected || (this.pending.length > 0 && line.batchEnd !== this.pendingBatchEnd)) {
          return this.corruption(offset, `found seq ${line.seq} (batch ending ${line.batchEnd})`)
        }
        this.pendingBatchEnd = line.batchEnd
        this.pending.push({
          seq: line.seq,
          batchEnd: line.batchEnd,
          payload: line.seq > this.sinceSeq ? bytes.toString("utf8", line.payloadStart, line.payloadEnd) : "",
          start: offset,
          end: this.carryOffset + newline + 1
        })
        if (line.seq === line.batchEnd) {
          for (const record of this.pending) if (record.seq > this.sinceSeq) out.push(record)
          this.lastCommittedSeq = line.seq
          this.pending = []
        }
      }
      start = newline + 1
    }
    this.carry = bytes.subarray(start)
    this.carryOffset += start
    return out
  }

  private pendingBatchEnd = 0
  private readonly line = newLineInfo()

  private expectedSeq(): number {
    return (this.pending.length > 0 ? this.pending[this.pending.length - 1]!.seq : this.lastCommittedSeq) + 1
  }

  private corruption(offset: number, found?: string): CheckpointIntegrityError {
    return new CheckpointIntegrityError({
      sessionId: this.sessionId,
      seq: this.lastCommittedSeq + 1,
      offset,
      detail: found === undefined
        ? `damaged record in the middle of the log (valid records follow it)`
        : `records out of order: expected seq ${this.expectedSeq()}, ${found}`
    })
  }
}

/**
 * Find the end of the last committed batch by scanning backwards from `size`: the offset
 * just after the last valid line whose `seq === batchEnd`, and that seq (the head).
 * `read(position, length)` reads bytes of the file.
 */
export const findCommittedEnd = <E>(
  read: (position: number, length: number) => Effect.Effect<Uint8Array, E>,
  headerEnd: number,
  size: number
): Effect.Effect<{ readonly head: number; readonly end: number }, E> =>
  Effect.gen(function*() {
  let windowStart = size
  let window = Buffer.alloc(0)
  const line = newLineInfo()
  // Lines are short: most tails hold the last committed line in the first 4 KB read.
  let blockSize = 4 * 1024
  // Lines are examined from the end; `cursor` is the index in `window` of the newline that
  // ends the next line to examine (or -1 when none is left in the window).
  while (windowStart > headerEnd) {
    const nextStart = Math.max(headerEnd, windowStart - blockSize)
    window = Buffer.concat([yield* read(nextStart, windowStart - nextStart), window])
    windowStart = nextStart
    blockSize *= 2
    let newline = window.lastIndexOf(NEWLINE)
    while (newline >= 0) {
      const previous = newline === 0 ? -1 : window.lastIndexOf(NEWLINE, newline - 1)
      if (previous < 0 && windowStart > headerEnd) break // the line starts before the window: read more
      if (parseLine(window, previous + 1, newline, line) && line.seq === line.batchEnd) {
        return { head: line.seq, end: windowStart + newline + 1 }
      }
      newline = previous
    }
  }
  return { head: 0, end: headerEnd }
  })

/** Longest line a seek probes for before it settles for the position it has. */
const MAX_PROBE_BYTES = 16 * 1024 * 1024
/** Close enough: from here a forward scan is cheaper than more probes. */
const SEEK_SPAN_BYTES = 64 * 1024

/**
 * Where to start reading the records after `sinceSeq`: the start of a line whose seq is at
 * most `sinceSeq + 1`, found by bisecting the committed bytes (every line carries its seq and
 * checksum), so reading the tail of a long log costs O(log size) probes, not a scan from the
 * start. Falls back to an earlier position (at worst the first record) when a probe finds no
 * intact line.
 */
export const seekLine = <E>(
  read: (position: number, length: number) => Effect.Effect<Uint8Array, E>,
  headerEnd: number,
  committedEnd: number,
  sinceSeq: number
): Effect.Effect<{ readonly offset: number; readonly seq: number }, E> =>
  Effect.gen(function*() {
    // A follower reads the last few records: its line is usually in the log's last kilobytes.
    const nearEnd = sinceSeq > 0 ? yield* lineNearEnd(read, headerEnd, committedEnd, sinceSeq) : undefined
    if (nearEnd !== undefined) return nearEnd
    let lo = { offset: headerEnd, seq: 1 }
    let hi = committedEnd
    while (sinceSeq > 0 && hi - lo.offset > SEEK_SPAN_BYTES) {
      const middle = lo.offset + Math.floor((hi - lo.offset) / 2)
      const probe = yield* lineAfter(read, middle, hi)
      if (probe === undefined) break
      if (probe.seq <= sinceSeq + 1) lo = probe
      else hi = middle
    }
    return lo
  })

/**
 * The last line before `committedEnd` whose seq is at most `sinceSeq + 1`, found by reading
 * back from the end, 4 KB then twice as much each time, for at most `SEEK_SPAN_BYTES`; undefined
 * when it starts further back (or a line there does not parse): the binary search takes over.
 */
const lineNearEnd = <E>(
  read: (position: number, length: number) => Effect.Effect<Uint8Array, E>,
  headerEnd: number,
  committedEnd: number,
  sinceSeq: number
): Effect.Effect<{ readonly offset: number; readonly seq: number } | undefined, E> =>
  Effect.gen(function*() {
    const line = newLineInfo()
    let windowStart = committedEnd
    let window = Buffer.alloc(0)
    let blockSize = 4 * 1024
    while (windowStart > headerEnd && committedEnd - windowStart < SEEK_SPAN_BYTES) {
      const nextStart = Math.max(headerEnd, windowStart - blockSize)
      window = Buffer.concat([asBuffer(yield* read(nextStart, windowStart - nextStart)), window])
      windowStart = nextStart
      blockSize *= 2
      // The window ends with the newline of the last committed line; examine lines from the end.
      let newline = window.length - 1
      while (newline >= 0) {
        const previous = newline === 0 ? -1 : window.lastIndexOf(NEWLINE, newline - 1)
        if (previous < 0 && windowStart > headerEnd) break // the line starts before the window: read more
        if (!parseLine(window, previous + 1, newline, line)) return undefined
        if (line.seq <= sinceSeq + 1) return { offset: windowStart + previous + 1, seq: line.seq }
        newline = previous
      }
    }
    return undefined
  })

/** The first whole line starting after `position` (and before `end`), or undefined. */
const lineAfter = <E>(
  read: (position: number, length: number) => Effect.Effect<Uint8Array, E>,
  position: number,
  end: number
): Effect.Effect<{ readonly offset: number; readonly seq: number } | undefined, E> =>
  Effect.gen(function*() {
    let length = 8 * 1024
    while (true) {
      const bytes = asBuffer(yield* read(position, Math.min(length, end - position)))
      const previous = bytes.indexOf(NEWLINE)
      const next = previous < 0 ? -1 : bytes.indexOf(NEWLINE, previous + 1)
      if (next >= 0) {
        const line = newLineInfo()
        return parseLine(bytes, previous + 1, next, line) ? { offset: position + previous + 1, seq: line.seq } : undefined
      }
      if (position + bytes.length >= end || length >= MAX_PROBE_BYTES) return undefined
      length *= 4
    }
  })
