/**
 * Building the page: elements from a tag, attributes and children. Text is always a text node —
 * nothing here (or anywhere in the viewer) parses a string as HTML, so a prompt or a file that
 * holds `<script>` shows as those characters.
 */

export type Child = Node | string | number | false | null | undefined | ReadonlyArray<Child>

type Attributes = Record<string, string | number | boolean | undefined | ((event: Event) => void)>

const add = (parent: Node, child: Child): void => {
  if (child === false || child === null || child === undefined) return
  if (Array.isArray(child)) {
    for (const each of child as ReadonlyArray<Child>) add(parent, each)
    return
  }
  parent.appendChild(typeof child === "string" || typeof child === "number" ? document.createTextNode(String(child)) : (child as Node))
}

/** `<tag attributes…>children…</tag>`: `onclick` and the like are listeners; `true` sets an empty attribute, `false`/undefined none. */
export const el = <K extends keyof HTMLElementTagNameMap>(tag: K, attributes: Attributes = {}, ...children: ReadonlyArray<Child>) => {
  const element = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) continue
    if (typeof value === "function") element.addEventListener(name.slice(2), value)
    else element.setAttribute(name, value === true ? "" : String(value))
  }
  add(element, children)
  return element
}

/** Replace what `parent` holds. */
export const fill = (parent: Element, ...children: ReadonlyArray<Child>) => {
  parent.replaceChildren()
  add(parent, children)
}

/** A duration in words: "3 min ago". */
export const ago = (ms: number) => {
  const seconds = Math.max(0, Math.round(ms / 1000))
  if (seconds < 60) return `${seconds} s ago`
  const minutes = Math.round(seconds / 60)
  if (minutes < 60) return `${minutes} min ago`
  const hours = Math.round(minutes / 60)
  return hours < 48 ? `${hours} h ago` : `${Math.round(hours / 24)} days ago`
}

export const bytes = (count: number) =>
  count < 1024 ? `${count} B` : count < 1024 * 1024 ? `${(count / 1024).toFixed(1)} KiB` : `${(count / 1024 / 1024).toFixed(1)} MiB`
