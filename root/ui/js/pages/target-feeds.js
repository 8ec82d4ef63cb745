// The target inspector's typed feeds, each a panel on one tool's contract: the hub's
// operational surface (`hub.get_operational_surface`), its activity log
// (`hub.get_activity_log`), its per-tool usage (`hub.get_capability_usage_summary`), and the
// subnet's timeline (`root.get_subnet_timeline`, root's own record, so it answers while the
// hub is offline). `read` is the inspector's governed reader (../inspect.js), `contractsP` the
// tool contracts, which add each tool's side effect and capability to what the hub reports.

import { h, badge, kv, table, fmtTime, fmtMs, pct } from '../dom.js';
import { section, fill } from '../inspect.js';
import { barChart } from '../charts.js';

const yesNo = (b) => (b ? 'yes' : 'no');
// The hub measures whole milliseconds: 0 means under one.
const wholeMs = (ms) => (ms === 0 ? '< 1 ms' : fmtMs(ms));
const sideEffect = (c) => (c ? badge(c.side_effect, c.side_effect === 'read' ? 'ok' : 'denied') : '—');

/** What the target's skill publishes: the surface, the skills' states, one row per tool. */
export function surfacePanel(read, contractsP) {
  return section('Operational surface', 'inspect-surface', async () => {
    const [s, cs] = await Promise.all([read('hub.get_operational_surface'), contractsP]);
    const published = new Set(s.capabilities);
    const adapters = new Map(s.adapters.map((a) => [a.tool_id, a]));
    // Published tools and the ones an adapter serves unpublished (a disabled skill).
    const tools = [...new Set([...s.capabilities, ...adapters.keys()])].sort();
    // Adapter names repeat their skill's name (listed above); the rest names the adapter.
    const adapterName = (a) => {
      const k = s.skills.find((x) => a.name.startsWith(`${x.skill}.`));
      return k ? h('span', { title: a.name }, a.name.slice(k.skill.length + 1)) : a.name;
    };
    return [
      kv([
        ['Published by', s.published_by],
        ['Surface', h('span', { id: 'surface-enabled' }, badge(s.enabled ? 'enabled' : 'disabled', s.enabled ? 'ok' : 'error'))],
        ['Environment / write scope', `${s.environment} / ${s.write_scope}`],
        ['Published tools', h('span', { id: 'surface-count' }, `${published.size} of ${tools.length} served`)],
      ]),
      h('h3', null, 'Skills'),
      table([
        { label: 'Skill', cell: (k) => k.skill, class: 'mono' },
        { label: 'Version', cell: (k) => k.version || '—' },
        { label: 'Installed', cell: (k) => yesNo(k.installed) },
        { label: 'Enabled', cell: (k) => badge(k.enabled ? 'enabled' : 'disabled', k.enabled ? 'ok' : 'error') },
        { label: 'Owner switch', cell: (k) => (k.owner_disabled ? badge('off on the hub', 'error') : 'on') },
        { label: 'Publishes', cell: (k) => String(k.published.length), class: 'num' },
        { label: 'Serves', cell: (k) => String((k.adapters || []).length), class: 'num' },
      ], s.skills, { empty: 'No skill is installed on the hub.' }),
      h('h3', null, 'Tools'),
      table([
        { label: 'Tool', cell: (r) => r, class: 'mono' },
        { label: 'Published', cell: (r) => (published.has(r) ? badge('published', 'ok') : badge('not published', 'muted')) },
        { label: 'Side effect', cell: (r) => sideEffect(cs.get(r)) },
        { label: 'Capability', cell: (r) => (cs.get(r) ? cs.get(r).required_capability : '—'), class: 'mono' },
        { label: 'Adapter', cell: (r) => (adapters.get(r) ? adapterName(adapters.get(r)) : '—'), class: 'mono' },
        { label: 'Writes', cell: (r) => (adapters.get(r) ? yesNo(adapters.get(r).writes) : '—') },
        { label: 'Concurrency', cell: (r) => (adapters.get(r) ? String(adapters.get(r).concurrency_limit) : '—'), class: 'num' },
      ], tools, { class: 'surface-tools', empty: 'The hub serves no tool.', rowAttrs: (r) => ({ dataset: { tool: r, published: String(published.has(r)) } }) }),
    ];
  });
}

const STATUS_KIND = { ok: 'ok', error: 'error', refused: 'denied' };

/** The calls the hub finished, newest first, optionally of one tool or one outcome. */
export function activityPanel(read, tools) {
  const tool = h('select', { id: 'activity-tool', 'aria-label': 'Tool' },
    h('option', { value: '' }, 'every tool'), [...tools].sort().map((x) => h('option', { value: x }, x)));
  const status = h('select', { id: 'activity-status', 'aria-label': 'Outcome' },
    ['', 'ok', 'error', 'refused'].map((v) => h('option', { value: v }, v || 'every outcome')));
  const load = async () => {
    const args = { limit: 50 };
    if (tool.value) args.tool_id = tool.value;
    if (status.value) args.status = status.value;
    const r = await read('hub.get_activity_log', args);
    return [
      table([
        { label: 'Started', cell: (e) => fmtTime(e.started_at) },
        { label: 'Tool', cell: (e) => e.tool_id, class: 'mono' },
        { label: 'Outcome', cell: (e) => [badge(e.status, STATUS_KIND[e.status]), e.dry_run ? [' ', badge('dry run', 'muted')] : null] },
        { label: 'Error', cell: (e) => e.error_code || '' },
        { label: 'Adapter', cell: (e) => e.adapter || 'refused before any adapter', class: 'mono' },
        { label: 'Duration', cell: (e) => wholeMs(e.duration_ms), class: 'num' },
        { label: 'Trace', cell: (e) => h('a', { href: `#/requests?trace_id=${encodeURIComponent(e.trace_id)}`, title: e.trace_id }, e.trace_id.slice(0, 8)), class: 'mono' },
      ], r.entries, { empty: 'The hub has finished no call of this kind since it started.', rowAttrs: (e) => ({ dataset: { tool: e.tool_id, status: e.status } }) }),
      h('p', { class: 'muted small' }, `Newest ${r.entries.length} shown; the hub keeps its last ${r.capacity} calls in memory (${r.retained} now, since it started). A trace opens root's audit events of the call.`),
    ];
  };
  const p = section('Activity log', 'inspect-activity', load, h('div', { class: 'toolbar' }, tool, status));
  const reload = () => fill(p.querySelector('#inspect-activity'), load);
  tool.addEventListener('change', reload);
  status.addEventListener('change', reload);
  return p;
}

/** Per-tool and per-capability usage of the hub over its retained calls, with a chart. */
export function usagePanel(read, contractsP) {
  return section('Capability usage on this target', 'inspect-usage', async () => {
    const [u, cs] = await Promise.all([read('hub.get_capability_usage_summary'), contractsP]);
    const cap = (tool) => (cs.get(tool) ? cs.get(tool).required_capability : 'unknown');
    const sum = (rows, k) => rows.reduce((a, r) => a + r[k], 0);
    const byCap = new Map();
    for (const t of u.tools) {
      const c = byCap.get(cap(t.tool_id)) || { capability: cap(t.tool_id), tools: 0, calls: 0, ok: 0, errors: 0, refused: 0 };
      c.tools += 1;
      for (const k of ['calls', 'ok', 'errors', 'refused']) c[k] += t[k];
      byCap.set(c.capability, c);
    }
    const caps = [...byCap.values()].sort((a, b) => b.calls - a.calls);
    const top = [...u.tools].sort((a, b) => b.calls - a.calls).slice(0, 15);
    const failing = (r) => (r.errors + r.refused) / Math.max(1, r.calls) > 0.2;
    return [
      h('p', { id: 'usage-totals' }, `${sum(u.tools, 'calls')} calls of ${u.tools.length} tools since ${fmtTime(u.since)}: `,
        `${sum(u.tools, 'errors')} failed in an adapter, ${sum(u.tools, 'refused')} refused by the hub.`),
      h('div', { class: 'grid-2' },
        h('div', { id: 'usage-chart' }, h('h3', null, 'Calls per tool'),
          barChart(top.map((t) => ({ label: t.tool_id, value: t.calls, cls: failing(t) ? 's-error' : 's-ok', title: `${t.tool_id}: ${t.calls} calls, ${pct(t.error_rate)} failed` })), { title: 'calls per tool on this target' })),
        h('div', null, h('h3', null, 'Per capability'), table([
          { label: 'Capability', cell: (c) => c.capability, class: 'mono' },
          { label: 'Tools', cell: (c) => String(c.tools), class: 'num' },
          { label: 'Calls', cell: (c) => String(c.calls), class: 'num' },
          { label: 'Failed', cell: (c) => String(c.errors), class: 'num' },
          { label: 'Refused', cell: (c) => String(c.refused), class: 'num' },
          { label: 'Error rate', cell: (c) => pct((c.errors + c.refused) / Math.max(1, c.calls)), class: 'num' },
        ], caps, { empty: 'No calls yet.', rowAttrs: (c) => ({ dataset: { capability: c.capability } }) }))),
      h('h3', null, 'Per tool'),
      table([
        { label: 'Tool', cell: (t) => t.tool_id, class: 'mono' },
        { label: 'Capability', cell: (t) => cap(t.tool_id), class: 'mono' },
        { label: 'Calls', cell: (t) => h('span', { class: 'calls' }, String(t.calls)), class: 'num' },
        { label: 'OK', cell: (t) => String(t.ok), class: 'num' },
        { label: 'Failed', cell: (t) => String(t.errors), class: 'num' },
        { label: 'Refused', cell: (t) => String(t.refused), class: 'num' },
        { label: 'Error rate', cell: (t) => pct(t.error_rate), class: 'num' },
        { label: 'p50', cell: (t) => wholeMs(t.p50_ms), class: 'num' },
        { label: 'p99', cell: (t) => wholeMs(t.p99_ms), class: 'num' },
      ], u.tools, { empty: 'The hub has finished no call since it started.', rowAttrs: (t) => ({ dataset: { tool: t.tool_id } }) }),
      h('p', { class: 'muted small' }, 'Counted by the hub over the calls it keeps in memory (its last 1000); root\'s view over any window is on the Usage page.'),
    ];
  });
}

const WINDOWS = [[60, 'last hour'], [1440, 'last 24 hours'], [10080, 'last 7 days']];
const KIND = {
  connected: ['connected', 'ok'],
  disconnected: ['disconnected', 'error'],
  surface_changed: ['surface changed', 'pending'],
};

/** The subnet's lifecycle events (and, on demand, its governed calls), newest first. */
export function timelinePanel(read, targetId) {
  const win = h('select', { id: 'timeline-window', 'aria-label': 'Window' },
    WINDOWS.map(([m, l]) => h('option', { value: String(m), selected: m === 1440 }, l)));
  const calls = h('input', { type: 'checkbox', id: 'timeline-calls' });
  // One read per window and switch: lifecycle events only unless calls are asked for, so
  // calls (the console's own reads among them) never crowd the lifecycle out.
  let asked = null;
  let answer = null;
  const load = async () => {
    const key = `${win.value}/${calls.checked}`;
    if (asked !== key) {
      asked = key;
      const kinds = ['connected', 'disconnected', 'surface_changed', ...(calls.checked ? ['call'] : [])];
      answer = read('root.get_subnet_timeline', { since_minutes: Number(win.value), limit: 500, kinds });
    }
    const r = await answer.catch((e) => { asked = null; throw e; });
    const lifecycle = r.events.filter((e) => e.kind !== 'call');
    const shown = r.events;
    return [
      h('p', { id: 'timeline-summary' }, `Subnet ${r.subnet_id} since ${fmtTime(r.since)}: ${lifecycle.length} lifecycle events${calls.checked ? `, ${r.events.length - lifecycle.length} governed calls` : ''}.`),
      r.truncated ? h('p', { class: 'warning' }, 'Only the newest 500 events of this window are shown; older ones are cut off. A shorter window shows them.') : null,
      table([
        { label: 'Time', cell: (e) => fmtTime(e.at) },
        { label: 'Target', cell: (e) => (e.target_id === targetId ? h('strong', null, e.target_id) : h('a', { href: `#/targets?t=${encodeURIComponent(e.target_id)}` }, e.target_id)), class: 'mono' },
        { label: 'Event', cell: (e) => (KIND[e.kind] ? badge(...KIND[e.kind]) : [badge('call', 'muted'), ' ', badge(e.status)]) },
        { label: 'Tool', cell: (e) => (e.event_id ? h('a', { href: `#/requests?event=${encodeURIComponent(e.event_id)}` }, e.tool_id) : e.tool_id || ''), class: 'mono' },
        { label: 'Detail', cell: (e) => [e.error_code ? `${e.error_code}: ` : '', e.detail], class: 'wrap' },
      ], shown, { empty: 'Nothing happened in this subnet in this window.', rowAttrs: (e) => ({ dataset: { kind: e.kind, target: e.target_id } }) }),
    ];
  };
  const p = section('Subnet timeline', 'inspect-timeline', load,
    h('div', { class: 'toolbar' }, win, h('label', { class: 'check' }, calls, ' Include governed calls')));
  const reload = () => fill(p.querySelector('#inspect-timeline'), load);
  win.addEventListener('change', reload);
  calls.addEventListener('change', reload);
  return p;
}
