// Failures and errors: error codes over a window (chart), recent errors and denials.

import { h, badge, panel, table, fmtTime, pct } from '../dom.js';
import { get, qs } from '../api.js';
import { barChart, stackedColumns } from '../charts.js';
import { windowPicker, windowParams } from './usage.js';

export const title = 'Failures';
export const role = 'auditor';

export async function render(root, params) {
  const win = params.get('window') || '1h';
  const [u, errors, denied] = await Promise.all([
    get(`/v1/root/mcp/audit/usage${qs(windowParams(win))}`),
    get('/v1/root/mcp/audit?status=error&limit=50'),
    get('/v1/root/mcp/audit?status=denied&limit=50'),
  ]);
  const cols = [
    { label: 'Time', cell: (e) => fmtTime(e.started_at) },
    { label: 'Tool', cell: (e) => h('a', { href: `#/requests?event=${encodeURIComponent(e.event_id)}` }, e.tool_id), class: 'mono' },
    { label: 'Target', cell: (e) => e.target_id || '—' },
    { label: 'Actor', cell: (e) => e.actor.id, class: 'mono' },
    { label: 'Code', cell: (e) => (e.error ? badge(e.error.code, e.status) : '—') },
    { label: 'Message', cell: (e) => (e.error ? e.error.message : e.policy_decision.reason || ''), class: 'wrap' },
  ];
  const t = u.totals;
  root.append(
    h('h1', null, 'Failures and errors'),
    windowPicker('failures', win),
    h('div', { class: 'cards' },
      h('div', { class: 'card stat' }, h('span', { class: 'stat-label' }, 'Calls'), h('span', { class: 'stat-value' }, String(t.calls))),
      h('div', { class: 'card stat' }, h('span', { class: 'stat-label' }, 'Errors'), h('span', { class: 'stat-value', id: 'fail-errors' }, `${t.error} (${pct(t.error_rate)})`)),
      h('div', { class: 'card stat' }, h('span', { class: 'stat-label' }, 'Denied'), h('span', { class: 'stat-value', id: 'fail-denied' }, `${t.denied} (${pct(t.denied_rate)})`))),
    panel('Failures over time', stackedColumns(u.series.buckets, [
      { key: 'error', cls: 's-error', label: 'errors' },
      { key: 'denied', cls: 's-denied', label: 'denied' },
    ], { title: 'errors and denials over time' })),
    panel('By error code', barChart(u.by_error_code.map((c) => ({ label: c.code, value: c.count, cls: 's-error' })), { title: 'failures by error code' })),
    panel('Recent errors', table(cols, errors.events, { empty: 'No errors.' })),
    panel('Recent denials', table(cols, denied.events, { empty: 'No denials.' })),
  );
}
