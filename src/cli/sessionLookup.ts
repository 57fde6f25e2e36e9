/**
 * Finding the session a command line names (`--session`, `--resume`, `/resume`): an id, or the
 * start of exactly one. An id that names none is refused with the ids closest to it — never a new
 * empty session by mistake (a new session is what starting without one gives).
 */
import { editDistance } from "../core/internal/options.js"


/** The ids most like `wanted`, closest first: a shared start, a small edit distance, or containing it. */
export const closeMatches = (wanted: string, ids: ReadonlyArray<string>, most = 5): Array<string> => {
  const scored = ids.flatMap((id) => {
    let shared = 0
    while (shared < Math.min(id.length, wanted.length) && id[shared] === wanted[shared]) shared++
    const edits = editDistance(wanted, id.slice(0, Math.max(wanted.length, 1)))
    const close = shared >= Math.min(4, wanted.length) || edits <= Math.max(2, Math.floor(wanted.length / 3)) || id.includes(wanted)
    return close ? [{ id, score: edits - shared }] : []
  })
  return scored.sort((a, b) => a.score - b.score || (a.id < b.id ? -1 : 1)).slice(0, most).map(({ id }) => id)
}

export type SessionLookup =
  | { readonly found: string }
  | { readonly problem: string }

/**
 * The session `wanted` names among `ids`: exactly that id, or (with `prefix`) the one id that
 * starts with it; else what is wrong, with the closest ids.
 */
export const lookUpSession = (wanted: string, ids: ReadonlyArray<string>, prefix: boolean): SessionLookup => {
  if (ids.includes(wanted)) return { found: wanted }
  const starting = prefix ? ids.filter((id) => id.startsWith(wanted)) : []
  if (starting.length === 1) return { found: starting[0]! }
  if (starting.length > 1) return { problem: `${wanted} starts ${starting.length} sessions (${starting.slice(0, 5).join(", ")}${starting.length > 5 ? ", …" : ""}): give more of it` }
  const close = closeMatches(wanted, ids)
  return {
    problem: `no session ${wanted} in this store${close.length === 0 ? "" : `; the closest: ${close.join(", ")}`}`
  }
}
