// Capability usage: calls per tool and per capability profile with error rates and latency
// percentiles, over a chosen window, from `/v1/root/mcp/audit/usage`.

import { h, panel, table, fmtMs, pct } from '../dom.js';
import { get, qs } from '../api.js';
import { barChart, stackedColumns } from '../charts.js';

export const title = 'Usage';

const WINDOWS = { '15m': 15 * 60, '1h': 3600, '24h': 24 * 3600, '7d': 7 * 24 * 3600 };

export function windowParams(win) {
  const sec = WINDOWS[win] || 3600;
  const until = new Date(Date.now() + 1000);
  const since = new Date(until.getTime() - sec * 1000);
  return { since: since.toISOString(), until: until.toISOString(), bucket_sec: Math.max(10, Math.round(sec / 60)) };
}

export function windowPicker(page, current) {
  return h('div', { class: 'window-picker', role: 'group', 'aria-label': 'Time window' },
    Object.keys(WINDOWS).map((w) => h('a', { href: `#/${page}?window=${w}`, class: ['chip', w === current ? 'active' : null] }, w)));
}

function statsTable(rows, key, label) {
  return table([
    { label, cell: (r) => r[key], class: 'mono' },
    { label: 'Calls', cell: (r) => String(r.calls), class: 'num' },
    { label: 'OK', cell: (r) => String(r.ok), class: 'num' },
    { label: 'Errors', cell: (r) => String(r.error), class: 'num' },
    { label: 'Denied', cell: (r) => String(r.denied), class: 'num' },
    { label: 'Rate limited', cell: (r) => String(r.rate_limited), class: 'num' },
    { label: 'Error rate', cell: (r) => pct(r.error_rate), class: 'num' },
    { label: 'p50', cell: (r) => fmtMs(r.latency_ms.p50), class: 'num' },
    { label: 'p95', cell: (r) => fmtMs(r.latency_ms.p95), class: 'num' },
    { label: 'p99', cell: (r) => fmtMs(r.latency_ms.p99), class: 'num' },
  ], rows, { empty: 'No calls in this window.', rowAttrs: (r) => ({ dataset: { key: r[key] } }) });
}

export async function render(root, params) {
  const win = params.get('window') || '1h';
  const u = await get(`/v1/root/mcp/audit/usage${qs(windowParams(win))}`);
  const tools = u.by_tool.slice(0, 20);
  root.append(
    h('h1', null, 'Capability usage'),
    windowPicker('usage', win),
    u.truncated ? h('p', { class: 'warning' }, `Only the newest ${u.events} events of this window are counted.`) : '',
    panel('Calls over time', stackedColumns(u.series.buckets, [
      { key: 'ok', cls: 's-ok', label: 'ok' },
      { key: 'error', cls: 's-error', label: 'errors' },
      { key: 'denied', cls: 's-denied', label: 'denied' },
    ], { title: 'calls over time' })),
    h('div', { class: 'grid-2' },
      panel('Calls per tool', barChart(tools.map((t) => ({ label: t.tool_id, value: t.calls, cls: (t.error + t.denied) / Math.max(1, t.calls) > 0.2 ? 's-error' : 's-ok' })), { title: 'calls per tool' })),
      panel('p95 latency per tool', barChart(tools.filter((t) => t.latency_ms.p95 !== null).map((t) => ({ label: t.tool_id, value: t.latency_ms.p95, cls: 's-latency' })), { fmt: fmtMs, title: 'p95 latency per tool' }))),
    panel('Per tool', statsTable(u.by_tool, 'tool_id', 'Tool')),
    h('div', { class: 'grid-2' },
      panel('Calls per capability profile', barChart(u.by_profile.map((p) => ({ label: p.capability_profile, value: p.calls, cls: 's-ok' })), { title: 'calls per profile' })),
      panel('Error rate per profile', barChart(u.by_profile.map((p) => ({ label: p.capability_profile, value: Math.round(p.error_rate * 1000) / 10, cls: 's-error' })), { fmt: (v) => `${v} %`, title: 'error rate per profile' }))),
    panel('Per capability profile', statsTable(u.by_profile, 'capability_profile', 'Profile')),
  );
}
