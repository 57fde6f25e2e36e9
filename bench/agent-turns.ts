/** One backend's agent-turn row, in a process of its own: `node --expose-gc --import tsx bench/agent-turns.ts <file|memory|sqlite>`. */
import { measureBackend } from "./agent.js"

const backend = process.argv[2]
if (backend !== "file" && backend !== "memory" && backend !== "sqlite") throw new Error(`unknown backend ${String(backend)}`)
process.stdout.write(JSON.stringify(await measureBackend(backend)))
