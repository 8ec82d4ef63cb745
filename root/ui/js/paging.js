// Fleet-sized lists, one page at a time. A zone holds up to tens of thousands of targets, so
// no page asks for a whole list: tables show one page of the REST family's paged lists
// (`limit` and `next_cursor`; targets, leases) under their filters, with Next and Previous
// page (a stack of the cursors that led here) and "first–last of total"; counts come from
// the answers' `total` and `by_status`; a target is chosen with a search-as-you-type input
// over `?q=` (a few matches), never from a list of every target.

import { h, clear, table } from './dom.js';
import { get, qs } from './api.js';

/** Rows on a page of a table. */
export const PAGE = 100;
/** Matches offered by a target picker. */
export const MATCHES = 20;
/** Quiet time after typing before a filter or a search is applied (ms). */
const TYPING_MS = 250;

export const TARGET_STATUSES = [['online', 'online'], ['degraded', 'degraded'], ['offline', 'offline']];
export const SKILL_STATES = [
  ['enabled', 'enabled'],
  ['closed', 'closed (any reason)'],
  ['disabled', 'disabled'],
  ['uninstalled', 'uninstalled'],
  ['owner_disabled', 'off on the hub'],
];
export const LEASE_STATUSES = [['active', 'active'], ['expired', 'expired'], ['revoked', 'revoked']];

/** `by_status` as text: `2 online, 14998 offline`. */
export function statusSummary(byStatus) {
  return Object.entries(byStatus || {}).map(([s, n]) => `${n} ${s}`).join(', ');
}

/** A list's page of `path` (targets: `/v1/root/hubs`) as a one-line query. */
export function firstOf(path, filters = {}) {
  return get(`${path}${qs({ ...filters, limit: 1 })}`);
}

/**
 * A paged table of `path` with ids under `id`: `items(answer)` picks the page's rows,
 * `view(rows)` renders them; `summary(answer)` adds to the count line. `load(filters)` shows
 * the first page under new filters; `refresh()` shows the current page again.
 */
export function pagedList({ id, path, items, view, summary, noun = 'items', limit = PAGE }) {
  const count = h('span', { class: 'muted', id: `${id}-count`, 'aria-live': 'polite' });
  const prev = h('button', { type: 'button', class: 'secondary small-button', id: `${id}-prev`, disabled: true }, 'Previous page');
  const next = h('button', { type: 'button', class: 'secondary small-button', id: `${id}-next`, disabled: true }, 'Next page');
  const body = h('div', { id: `${id}-body` }, h('p', { class: 'muted' }, 'Loading…'));
  const element = h('div', { class: 'paged', id },
    h('div', { class: 'table-head' }, count, h('span', { class: 'pager' }, prev, next)), body);
  let filters = {};
  let at = null; // the cursor of the page shown; null for the first page
  let back = []; // [cursor, offset] of each page before this one, for Previous
  let offset = 0; // rows before this page
  let nextCursor = null;
  let seq = 0;

  async function show() {
    const mine = ++seq;
    prev.disabled = true;
    next.disabled = true;
    element.setAttribute('aria-busy', 'true');
    let answer;
    try {
      answer = await get(`${path}${qs({ ...filters, limit, cursor: at })}`);
    } catch (e) {
      if (mine !== seq) return;
      element.removeAttribute('aria-busy');
      count.textContent = '';
      prev.disabled = back.length === 0;
      clear(body).append(h('p', { class: 'error' }, e.message));
      return;
    }
    if (mine !== seq) return; // a later request (new filters, another page) answers instead
    const rows = items(answer) || [];
    nextCursor = answer.next_cursor || null;
    const total = answer.total ?? rows.length;
    const span = rows.length ? `${offset + 1}–${offset + rows.length}` : '0';
    const extra = summary ? summary(answer) : '';
    count.textContent = `${span} of ${total} ${noun}${extra ? ` · ${extra}` : ''}`;
    Object.assign(element.dataset, { total: String(total), offset: String(offset), shown: String(rows.length) });
    prev.disabled = back.length === 0;
    next.disabled = !nextCursor;
    element.removeAttribute('aria-busy');
    clear(body).append(...[view(rows, answer)].flat(Infinity));
  }

  next.addEventListener('click', () => {
    if (!nextCursor) return;
    back.push([at, offset]);
    offset += Number(element.dataset.shown || 0);
    at = nextCursor;
    show();
  });
  prev.addEventListener('click', () => {
    if (back.length === 0) return;
    [at, offset] = back.pop();
    show();
  });

  return {
    element,
    load(f) {
      filters = { ...f };
      at = null;
      back = [];
      offset = 0;
      return show();
    },
    refresh: () => show(),
  };
}

/**
 * A search-as-you-type target input: what is typed asks root for the targets whose id
 * contains it (`?q=…&limit=20`) and offers them in a datalist; the form submits the text.
 * Returns [input, datalist].
 */
export function targetPicker({ id, name = 'target_id', value = '', required = false, placeholder = 'type part of a target id' }) {
  const list = h('datalist', { id: `${id}-options` });
  const input = h('input', {
    id, name, value, required, placeholder,
    type: 'text', list: `${id}-options`, class: 'target-picker', autocomplete: 'off', spellcheck: 'false',
  });
  let asked = null;
  let seq = 0;
  let timer = null;
  async function suggest() {
    const q = input.value.trim();
    if (q === asked) return;
    asked = q;
    const mine = ++seq;
    try {
      const r = await get(`/v1/root/hubs${qs({ q, limit: MATCHES })}`);
      if (mine !== seq) return;
      clear(list).append(...(r.targets || []).map((t) => h('option', { value: t.target_id }, `${t.status} · ${t.environment} · ${t.subnet_id}`)));
    } catch {
      asked = null; // suggestions only help: the form still submits what was typed
    }
  }
  input.addEventListener('focus', () => { suggest(); });
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(suggest, TYPING_MS);
  });
  return [input, list];
}

/**
 * A filter form with ids under `id`: fields `{name, label, kind: 'text'|'search'|'select'|
 * 'target', options: [[value, label]], placeholder}`. Selects apply on change, text fields
 * once typing pauses (or on Enter); `onChange(values)` gets the non-empty values.
 */
export function filterForm(id, fields, onChange, initial = {}) {
  const control = (f) => {
    const fid = `${id}-${f.name}`;
    if (f.kind === 'select') {
      return h('select', { id: fid, name: f.name },
        [['', 'any'], ...f.options].map(([v, l]) => h('option', { value: v, selected: v === (initial[f.name] || '') }, l)));
    }
    if (f.kind === 'target') return targetPicker({ id: fid, name: f.name, value: initial[f.name] || '', placeholder: f.placeholder || 'any' });
    return h('input', {
      id: fid, name: f.name, type: f.kind === 'search' ? 'search' : 'text', value: initial[f.name] || '',
      placeholder: f.placeholder || 'any', autocomplete: 'off', spellcheck: 'false',
    });
  };
  const form = h('form', { class: 'filters', id: `${id}-filters` },
    fields.map((f) => h('label', null, f.label, control(f))),
    h('button', { type: 'submit', id: `${id}-apply` }, 'Apply'),
    h('button', { type: 'reset', class: 'secondary', id: `${id}-clear` }, 'Clear'));
  const values = () => {
    const out = {};
    for (const [k, v] of new FormData(form)) {
      const s = String(v).trim();
      if (s) out[k] = s;
    }
    return out;
  };
  let timer = null;
  let applied = null;
  const apply = (force) => {
    clearTimeout(timer);
    const v = values();
    const key = JSON.stringify(v);
    if (!force && key === applied) return;
    applied = key;
    onChange(v);
  };
  form.addEventListener('submit', (e) => { e.preventDefault(); apply(true); });
  form.addEventListener('change', (e) => { if (e.target.tagName === 'SELECT') apply(false); });
  form.addEventListener('input', (e) => {
    if (e.target.tagName !== 'INPUT') return;
    clearTimeout(timer);
    timer = setTimeout(() => apply(false), TYPING_MS);
  });
  // The reset event comes before the fields are emptied.
  form.addEventListener('reset', () => setTimeout(() => apply(false), 0));
  applied = JSON.stringify(values());
  return { form, values };
}

/** The filters of a targets list. */
export const TARGET_FILTERS = [
  { name: 'q', label: 'Target id', kind: 'search', placeholder: 'part of the id' },
  { name: 'environment', label: 'Environment', kind: 'text' },
  { name: 'subnet_id', label: 'Subnet', kind: 'text' },
  { name: 'status', label: 'Status', kind: 'select', options: TARGET_STATUSES },
  { name: 'skill', label: 'Skill', kind: 'select', options: SKILL_STATES },
  { name: 'lifecycle', label: 'Lifecycle', kind: 'select', options: [['active', 'active'], ['cordoned', 'cordoned'], ['retired', 'retired']] },
  { name: 'selector', label: 'Selector', kind: 'text', placeholder: 'env=test,label:role=web' },
];

/**
 * A filtered, paged table of targets with ids under `id`: `columns` and `opts` as dom.js
 * `table` takes them (`opts.empty` said when no target is enrolled at all). Returns the
 * element; the first page loads at once.
 */
export function targetsTable(id, columns, opts = {}) {
  let filtered = false;
  const list = pagedList({
    id,
    path: '/v1/root/hubs',
    noun: 'targets',
    items: (a) => a.targets,
    summary: (a) => statusSummary(a.by_status),
    view: (rows) => table(columns, rows, { ...opts, empty: filtered ? 'No target matches these filters.' : opts.empty }),
  });
  const load = (v) => {
    filtered = Object.keys(v).length > 0;
    return list.load(v);
  };
  const { form, values } = filterForm(id, TARGET_FILTERS, load);
  load(values());
  return h('div', null, form, list.element);
}
