/**
 * A session's size in the store, shown under its name in the session's header: the bytes only it
 * holds (what deleting it frees, with its log), the bytes its events reference and, of those, the
 * ones other sessions share. Asked of `GET /sessions/:id/usage` when a session is opened and after
 * it changes, one request at a time: the answer reads every log of the store.
 */
import type { SessionUsage } from "./api.js"
import { bytes, el } from "./dom.js"

/** One line, as text nodes only: "4.1 KiB own · 12.0 KiB referenced (7.9 KiB shared) · log 2.3 KiB". */
export const renderSessionSize = (usage: SessionUsage | undefined) =>
  usage === undefined ? null : el(
    "p",
    {
      class: "session-size meta",
      title: "own: what only this session holds (deleting it frees this and its log); " +
        "referenced: every object its events name; shared: those other sessions name too"
    },
    `${bytes(usage.own.bytes)} own · ${bytes(usage.referenced.bytes)} referenced (${bytes(usage.shared.bytes)} shared) · log ${bytes(usage.logBytes)}`
  )

/**
 * The selected session's usage, loaded one request at a time: asked again while a request is
 * out, it asks once more when that one ends (for the session selected then). A failure shows
 * nothing new: the size is an aside, the other panes say what went wrong.
 */
export const makeUsageLoader = (fetchUsage: (id: string) => Promise<SessionUsage>, loaded: () => void) => {
  let shown: SessionUsage | undefined
  let running = false
  let wanted: string | undefined
  const next = async (): Promise<void> => {
    if (running || wanted === undefined) return
    const id = wanted
    wanted = undefined
    running = true
    try {
      const usage = await fetchUsage(id)
      shown = usage
      loaded()
    } catch {
      // Shown as before; the next change asks again.
    } finally {
      running = false
    }
    return next()
  }
  return {
    /** The usage of session `id`, once known. */
    of: (id: string | undefined) => (shown !== undefined && shown.id === id ? shown : undefined),
    load: (id: string) => {
      wanted = id
      void next()
    }
  }
}
