// Building the page's DOM from data: text goes in as text, so a job named
// `<img src=x onerror=alert(1)>` shows as those characters and runs nothing.

/** Attributes an element is made with (set with setAttribute, so values are never parsed as HTML). */
export type Attributes = Readonly<Record<string, string | undefined>>;

/** A child: an element, or text (set as a text node). */
export type Child = Node | string | null | undefined | false;

/** `<tag attributes>children</tag>`, every string child a text node. */
export function el<K extends keyof HTMLElementTagNameMap>(tag: K, attributes: Attributes = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) if (value !== undefined) element.setAttribute(name, value);
  append(element, ...children);
  return element;
}

/** Appends children, strings as text nodes. */
export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
  }
}

/** Removes every child. */
export function clear(element: Element): void {
  element.replaceChildren();
}

/** `2026-03-01 12:00:05`, in the browser's time zone. */
export function formatTime(iso: string): string {
  const date = new Date(iso);
  const pad = (n: number): string => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

/** `3 s`, `4 min 05 s`, `2 h 07 min`. */
export function formatDuration(ms: number): string {
  const seconds = Math.max(0, Math.round(ms / 1000));
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min ${String(seconds % 60).padStart(2, '0')} s`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, '0')} min`;
}

/** A status as a coloured badge (the colour also said in words, by the status itself). */
export function statusBadge(status: string): HTMLElement {
  return el('span', { class: `status status-${status.toLowerCase()}`, 'data-status': status }, status);
}
