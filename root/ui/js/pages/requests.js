// Requests log: the audit trail, newest first, filterable; new events arrive live over
// `/v1/root/mcp/audit/stream` (SSE); one click opens an event with its policy decision,
// adapter, dry-run flag, timings, redactions and the events sharing its trace id.

import { h, badge, clear, panel, fmtTime, fmtMs, latencyMs, valueView, kv } from '../dom.js';
import { get, qs } from '../api.js';
import { targetPicker } from '../paging.js';

export const title = 'Requests';
export const role = 'auditor';

const FILTERS = ['target_id', 'tool_id', 'status', 'actor', 'trace_id'];
const PAGE = 100;

function row(e, onOpen, fresh) {
  const tr = h('tr', {
    class: ['event-row', fresh ? 'fresh' : null],
    tabindex: 0,
    dataset: { eventId: e.event_id, seq: String(e.seq), tool: e.tool_id, status: e.status },
    onclick: () => onOpen(e.event_id),
    onkeydown: (k) => { if (k.key === 'Enter') onOpen(e.event_id); },
  },
  h('td', { 'data-label': 'Seq' }, String(e.seq)),
  h('td', { 'data-label': 'Time' }, fmtTime(e.started_at)),
  h('td', { 'data-label': 'Tool', class: 'mono' }, e.tool_id),
  h('td', { 'data-label': 'Target' }, e.target_id || '—'),
  h('td', { 'data-label': 'Actor', class: 'mono' }, e.actor ? e.actor.id : '—'),
  h('td', { 'data-label': 'Status' }, badge(e.status), e.dry_run ? badge('dry run', 'muted') : null),
  h('td', { 'data-label': 'Latency' }, fmtMs(latencyMs(e))),
  h('td', { 'data-label': 'Error' }, e.error ? e.error.code : ''));
  return tr;
}

/** The detail of one event, with its linked events (same trace id). */
export async function renderDetail(box, eventId) {
  clear(box);
  box.hidden = false;
  box.append(h('p', { class: 'muted' }, 'Loading…'));
  const ev = await get(`/v1/root/mcp/audit/${encodeURIComponent(eventId)}`);
  const linked = await get(`/v1/root/mcp/audit${qs({ trace_id: ev.trace_id, limit: 50 })}`);
  clear(box);
  const pd = ev.policy_decision || {};
  box.append(
    h('div', { class: 'detail-head' },
      h('h2', null, ev.tool_id, ' ', badge(ev.status)),
      h('button', { type: 'button', class: 'secondary', id: 'detail-close', onclick: () => { box.hidden = true; clear(box); } }, 'Close')),
    kv([
      ['Event', h('code', { id: 'detail-event-id' }, ev.event_id)],
      ['Sequence', String(ev.seq)],
      ['Trace', h('a', { href: `#/requests?trace_id=${encodeURIComponent(ev.trace_id)}` }, ev.trace_id)],
      ['Surface', ev.surface],
      ['Actor', `${ev.actor.id}${ev.actor.capability_profile ? ` (${ev.actor.capability_profile})` : ''}`],
      ['Target', ev.target_id || '—'],
      ['Capability', ev.capability || '—'],
    ]),
    h('h3', null, 'Policy decision'),
    kv([
      ['Decision', h('span', { id: 'detail-decision' }, badge(pd.decision, pd.decision === 'allow' ? 'ok' : 'denied'))],
      ['Reason', pd.reason || '—'],
      ['Checks', (pd.checks || []).join(' → ') || '—'],
    ]),
    h('h3', null, 'Execution'),
    kv([
      ['Adapter', h('span', { id: 'detail-adapter' }, ev.execution_adapter || '—')],
      ['Dry run', h('span', { id: 'detail-dry-run' }, ev.dry_run ? 'yes' : 'no')],
      ['Started', fmtTime(ev.started_at)],
      ['Finished', fmtTime(ev.finished_at)],
      ['Latency', fmtMs(latencyMs(ev))],
      ['Result', ev.result_summary || '—'],
      ev.error ? ['Error', `${ev.error.code}: ${ev.error.message}${ev.error.retryable ? ' (retryable)' : ''}`] : null,
    ]),
    h('h3', null, `Redactions (${(ev.redactions || []).length})`),
    (ev.redactions || []).length
      ? h('ul', { class: 'redactions' }, ev.redactions.map((r) => h('li', null, h('code', null, r.path), ` by ${r.rule}`)))
      : h('p', { class: 'muted' }, 'Nothing was redacted.'),
    h('h3', null, 'Request'),
    h('div', { id: 'detail-request' }, valueView(ev.request)),
    h('h3', null, 'Linked events (same trace)'),
    h('ul', { class: 'linked', id: 'detail-linked' }, linked.events.map((l) => h('li', null,
      l.event_id === ev.event_id ? h('strong', null, `#${l.seq} ${l.tool_id} (this event)`)
        : h('a', { href: '#', onclick: (c) => { c.preventDefault(); renderDetail(box, l.event_id); } }, `#${l.seq} ${l.tool_id}`),
      ' ', badge(l.status)))),
    h('p', { class: 'muted mono small' }, `hash ${ev.hash}`),
  );
  box.scrollIntoView({ block: 'nearest' });
}

export async function render(root, params) {
  const filter = {};
  for (const f of FILTERS) filter[f] = params.get(f) || '';
  const live = document.getElementById('live');
  const tbody = h('tbody', { id: 'events-body' });
  const detail = h('aside', { class: 'panel detail', id: 'event-detail', hidden: true });
  const count = h('span', { class: 'muted', id: 'events-count' });
  const more = h('button', { type: 'button', class: 'secondary', id: 'events-more', hidden: true }, 'Older events');
  let nextCursor = null;
  let maxSeq = 0;
  let source = null;
  let shown = 0;
  const open = (id) => renderDetail(detail, id).catch((e) => { clear(detail); detail.append(h('p', { class: 'error' }, e.message)); });

  const input = (name, label, attrs = {}) => h('label', null, label, h('input', { name, id: `filter-${name}`, value: filter[name], ...attrs }));
  const form = h('form', { class: 'filters', id: 'filters' },
    h('label', null, 'Target', targetPicker({ id: 'filter-target_id', value: filter.target_id, placeholder: 'any' })),
    input('tool_id', 'Tool', { placeholder: 'hub.get_status', list: 'tool-ids' }),
    h('label', null, 'Status', h('select', { name: 'status', id: 'filter-status' },
      ['', 'ok', 'error', 'denied'].map((v) => h('option', { value: v, selected: v === filter.status }, v || 'any')))),
    input('actor', 'Actor', { placeholder: 'operator or lease:<id>' }),
    input('trace_id', 'Trace id'),
    h('button', { type: 'submit' }, 'Apply'),
    h('button', { type: 'button', class: 'secondary', onclick: () => { location.hash = '#/requests'; } }, 'Clear'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const fd = new FormData(form);
    const p = {};
    for (const f of FILTERS) p[f] = (fd.get(f) || '').toString().trim();
    location.hash = `#/requests${qs(p)}`;
  });

  function updateCount() { count.textContent = `${shown} events shown`; }

  async function load(cursor) {
    const page = await get(`/v1/root/mcp/audit${qs({ ...filter, limit: PAGE, cursor })}`);
    for (const e of page.events) {
      tbody.append(row(e, open, false));
      maxSeq = Math.max(maxSeq, e.seq);
      shown += 1;
    }
    nextCursor = page.next_cursor;
    more.hidden = !nextCursor;
    updateCount();
  }
  more.addEventListener('click', () => load(nextCursor));

  function connect() {
    const url = `/v1/root/mcp/audit/stream${qs({ ...filter, after_seq: maxSeq })}`;
    source = new EventSource(url);
    source.addEventListener('open', () => { live.hidden = false; live.classList.remove('off'); live.textContent = 'live'; });
    source.addEventListener('error', () => { live.classList.add('off'); live.textContent = 'reconnecting'; });
    source.addEventListener('audit', (m) => {
      const e = JSON.parse(m.data);
      if (e.seq <= maxSeq) return;
      maxSeq = e.seq;
      tbody.prepend(row(e, open, true));
      shown += 1;
      updateCount();
    });
  }

  root.append(
    h('h1', null, 'Requests log'),
    form,
    h('datalist', { id: 'tool-ids' }),
    h('div', { class: 'split' },
      panel(null, h('div', { class: 'table-head' }, count),
        h('div', { class: 'table-wrap' }, h('table', { class: 'data events' },
          h('thead', null, h('tr', null, ['Seq', 'Time', 'Tool', 'Target', 'Actor', 'Status', 'Latency', 'Error'].map((c) => h('th', null, c)))),
          tbody)),
        more),
      detail));
  await load(undefined);
  connect();
  const ev = params.get('event');
  if (ev) open(ev);
  return () => { if (source) source.close(); live.hidden = true; };
}
