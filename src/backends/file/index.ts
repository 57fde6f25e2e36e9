export * as FileCheckpointer from "./FileCheckpointer.js"
export type { FileCheckpointerOptions } from "./FileCheckpointer.js"
export * as LogCodec from "./codec.js"
export { aes256gcmCodec, type CodecRecord, gzipCodec, jsonCodec, type LogCodecService } from "./codec.js"
