// Element builders. Text always goes in as text nodes (never innerHTML), so nothing from the
// API can become markup.

const SVG_NS = 'http://www.w3.org/2000/svg';

function apply(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (k === 'class') {
      el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    } else if (k === 'dataset') {
      for (const [dk, dv] of Object.entries(v)) el.dataset[dk] = dv;
    } else if (v === true) {
      el.setAttribute(k, '');
    } else {
      el.setAttribute(k, String(v));
    }
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** An HTML element: h('div', {class: 'x'}, 'text', child, [more]). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  apply(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

export function clear(el) {
  while (el.firstChild) el.removeChild(el.firstChild);
  return el;
}

/** A status badge: ok, error, denied, online, offline, ... */
export function badge(text, kind) {
  return h('span', { class: ['badge', `badge-${kind || text}`] }, text);
}

export function fmtTime(iso) {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleString(undefined, { hour12: false });
}

export function fmtMs(ms) {
  if (ms === null || ms === undefined) return '—';
  if (ms < 1) return `${Math.round(ms * 1000)} µs`;
  if (ms < 1000) return `${ms.toFixed(ms < 10 ? 1 : 0)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

export function fmtBytes(b) {
  if (b === null || b === undefined) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  let v = b;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i += 1; }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${u[i]}`;
}

export function pct(x) {
  return `${(100 * (x || 0)).toFixed(1)} %`;
}

/** Latency of an event in milliseconds. */
export function latencyMs(ev) {
  const a = Date.parse(ev.started_at);
  const b = Date.parse(ev.finished_at);
  return Number.isNaN(a) || Number.isNaN(b) ? null : Math.max(0, b - a);
}

/** A titled panel. */
export function panel(title, ...children) {
  return h('section', { class: 'panel' }, title ? h('h2', null, title) : null, ...children);
}

/** A table from column definitions [{label, cell: row => node|text, class}] and rows. */
export function table(columns, rows, opts = {}) {
  const head = h('tr', null, columns.map((c) => h('th', { class: c.class }, c.label)));
  const body = h('tbody', null, rows.map((r) => {
    const tr = h('tr', opts.rowAttrs ? opts.rowAttrs(r) : null,
      columns.map((c) => h('td', { class: c.class, 'data-label': c.label }, c.cell(r))));
    return tr;
  }));
  return h('div', { class: 'table-wrap' },
    h('table', { class: ['data', opts.class] }, h('thead', null, head), body),
    rows.length === 0 ? h('p', { class: 'muted empty' }, opts.empty || 'Nothing here yet.') : null);
}

export function kv(pairs) {
  return h('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', null, k), h('dd', null, v)]));
}

// Readable renderings of API values. Operators read arguments, effects and request bodies;
// the console never shows them as JSON text.

const MAX_DEPTH = 6;
const isScalar = (v) => v === null || typeof v !== 'object';
const isRecord = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** A value as one line of plain text (for diff lines and table cells): `a: 1, b: x`. */
export function plainText(v) {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (isScalar(v)) return String(v);
  if (Array.isArray(v)) return v.length ? v.map(plainText).join(', ') : 'none';
  const e = Object.entries(v);
  return e.length ? e.map(([k, x]) => `${k}: ${isScalar(x) ? plainText(x) : `(${plainText(x)})`}`).join(', ') : 'empty';
}

/** The columns of a list of flat records with few keys, or null when a table would not fit. */
function recordColumns(list) {
  if (!list.every((r) => isRecord(r) && Object.values(r).every(isScalar))) return null;
  const keys = [...new Set(list.flatMap((r) => Object.keys(r)))];
  return keys.length > 0 && keys.length <= 8 ? keys : null;
}

/**
 * A JSON value as markup: scalars as text, objects as nested key/value lists, lists of flat
 * records as tables, lists of scalars as chips; deeper than a few levels, a summary.
 */
export function valueView(v, depth = 0) {
  if (v === null || v === undefined) return h('span', { class: 'muted' }, '—');
  if (typeof v === 'string') return v.includes('\n') ? h('pre', { class: 'text' }, v) : v;
  if (isScalar(v)) return plainText(v);
  if (Array.isArray(v)) {
    if (v.length === 0) return h('span', { class: 'muted' }, 'none');
    if (depth >= MAX_DEPTH) return h('span', { class: 'muted' }, `list of ${v.length} items`);
    if (v.every(isScalar)) return h('span', { class: 'chips' }, v.map((x) => h('span', { class: 'chip' }, plainText(x))));
    const cols = recordColumns(v);
    if (cols) return table(cols.map((k) => ({ label: k, cell: (r) => plainText(r[k]) })), v, { class: 'values' });
    return h('ol', { class: 'values' }, v.map((x) => h('li', null, valueView(x, depth + 1))));
  }
  const entries = Object.entries(v);
  if (entries.length === 0) return h('span', { class: 'muted' }, 'empty');
  if (depth >= MAX_DEPTH) return h('span', { class: 'muted' }, `object with ${entries.length} fields`);
  return h('dl', { class: 'kv nested' }, entries.map(([k, x]) => [h('dt', null, k), h('dd', null, valueView(x, depth + 1))]));
}

let toastTimer = null;
export function toast(message, kind = 'info') {
  const el = document.getElementById('toast');
  if (!el) return;
  el.textContent = message;
  el.className = `show toast-${kind}`;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.className = ''; }, 5000);
}
