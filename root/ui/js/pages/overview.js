// Overview: zone, connected hubs and active leases (counted by root: the lists' `total` and
// `by_status`), the targets with status, environment, skill state and published capabilities
// (one filtered page at a time), and recent failures.

import { h, badge, panel, table, fmtTime, kv } from '../dom.js';
import { get } from '../api.js';
import { holds } from '../roles.js';
import { firstOf, statusSummary, targetsTable } from '../paging.js';

export const title = 'Overview';

// The target's infra_access_skill as root governs it: root's desired state, and the hub
// owner's switch (which root shows and cannot override).
export function skillCell(t) {
  const s = t.skill;
  if (!s) return badge('unknown', 'muted');
  if (s.open) return badge('enabled', 'ok');
  if (!s.desired.installed) return badge('uninstalled', 'error');
  if (!s.desired.enabled) return badge('disabled', 'error');
  return badge('off on the hub', 'error');
}

/** A target's labels under its id (nothing when it has none). */
function labelsLine(t) {
  const labels = Object.entries(t.labels || {});
  if (labels.length === 0) return null;
  return h('div', { class: 'mono small muted target-labels' }, labels.map(([k, v]) => (v ? `${k}=${v}` : k)).join(', '));
}

/** A cordoned or retired target's state beside its status (nothing while active). */
function lifecycleBadge(t) {
  const state = (t.lifecycle || {}).state;
  if (!state || state === 'active') return null;
  return [' ', badge(state, state === 'cordoned' ? 'pending' : 'error')];
}

export async function render(root) {
  const [foundation, hubs, leases, errors, denied, breakglass] = await Promise.all([
    get('/v1/root/mcp/foundation'),
    firstOf('/v1/root/hubs'),
    firstOf('/v1/root/mcp/sessions', { status: 'active' }),
    // Recent failures come from the audit trail: an auditor's read.
    holds('auditor') ? get('/v1/root/mcp/audit?status=error&limit=10') : { events: [] },
    holds('auditor') ? get('/v1/root/mcp/audit?status=denied&limit=10') : { events: [] },
    get('/v1/root/operators/breakglass'),
  ]);
  const total = hubs.total ?? 0;
  const connected = total - ((hubs.by_status || {}).offline || 0);
  const active = leases.total ?? 0;
  const failures = [...errors.events, ...denied.events].sort((a, b) => b.seq - a.seq).slice(0, 10);
  root.append(
    h('h1', null, 'Overview'),
    h('div', { class: 'cards' },
      h('div', { class: 'card stat' }, h('span', { class: 'stat-label' }, 'Zone'), h('span', { class: 'stat-value', id: 'ov-zone' }, foundation.zone)),
      h('div', { class: 'card stat', title: statusSummary(hubs.by_status) || 'no target is enrolled' }, h('span', { class: 'stat-label' }, 'Connected hubs'),
        h('span', { class: 'stat-value', id: 'ov-connected', dataset: { connected: String(connected), total: String(total) } }, `${connected} / ${total}`)),
      h('div', { class: 'card stat' }, h('span', { class: 'stat-label' }, 'Active leases'), h('span', { class: 'stat-value', id: 'ov-leases' }, String(active))),
      h('div', { class: 'card stat' }, h('span', { class: 'stat-label' }, 'Tools'), h('span', { class: 'stat-value' }, String(foundation.tools)))),
    panel('Targets', targetsTable('ov-targets', [
      { label: 'Target', cell: (t) => [h('a', { href: `#/targets?t=${encodeURIComponent(t.target_id)}` }, t.target_id), labelsLine(t)] },
      { label: 'Status', cell: (t) => [badge(t.status), lifecycleBadge(t)] },
      { label: 'Environment', cell: (t) => t.environment },
      { label: 'Subnet', cell: (t) => t.subnet_id },
      { label: 'Skill', cell: skillCell },
      { label: 'Published', cell: (t) => h('span', { class: 'published-count' }, String((t.published_capabilities || []).length)) },
      { label: 'Last seen', cell: (t) => fmtTime(t.last_seen_at) },
    ], { class: 'targets-table', empty: 'No target is enrolled. Enrol one with mcp-root admin hub enroll.', rowAttrs: (t) => ({ dataset: { target: t.target_id, status: t.status } }) })),
    panel('Recent failures', table([
      { label: 'Time', cell: (e) => fmtTime(e.started_at) },
      { label: 'Tool', cell: (e) => h('a', { href: `#/requests?event=${encodeURIComponent(e.event_id)}` }, e.tool_id) },
      { label: 'Target', cell: (e) => e.target_id || '—' },
      { label: 'Status', cell: (e) => badge(e.status) },
      { label: 'Code', cell: (e) => (e.error ? e.error.code : '—') },
      { label: 'Message', cell: (e) => (e.error ? e.error.message : ''), class: 'wrap' },
    ], failures, { empty: holds('auditor') ? 'No failures recorded.' : 'Reading the audit trail needs the auditor role.' })),
    panel('Root', kv([
      // The bootstrap admin token is break-glass: its uses are in the trail, and here.
      ['Break-glass admin token', h('span', { id: 'ov-breakglass' }, breakglass.last_used_at
        ? `last used ${fmtTime(breakglass.last_used_at)} from ${breakglass.last_address || 'an unknown address'} (${breakglass.last_request}); ${breakglass.uses_since_start} requests since root started`
        : 'not used since root started')],
      ['Version', foundation.version],
      ['MCP endpoint', `${location.origin}${foundation.mcp_endpoint}`],
      ['Protocol versions', (foundation.protocol_versions || []).join(', ')],
      ['Planes', (foundation.planes || []).join(', ')],
    ])),
  );
}
