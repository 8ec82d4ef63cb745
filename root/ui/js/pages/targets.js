// Target inspector: a search for the target (part of its id, a few matches at a time; the
// fleet is never listed here), then its descriptor with transport pressure, skill state with
// enable/disable (audited admin commands), the typed feeds (operational surface, capability
// usage, activity log, subnet timeline: ./target-feeds.js), health checks, runtime summary,
// ProfileOps sessions and incidents with a memory chart, the subnet's health and pressure,
// the target's access tokens, and the action history. Hub data comes through root's governed
// path (`/v1/root/hubs/{t}/read`, an operator reader lease; every read is an audit event).

import { h, badge, clear, panel, table, fmtTime, fmtBytes, fmtMs, kv, toast } from '../dom.js';
import { get, post, qs, ApiError } from '../api.js';
import { holds } from '../roles.js';
import { MATCHES } from '../paging.js';
import { barChart, lineChart } from '../charts.js';
import { section, reader, contracts, evidenceNote } from '../inspect.js';
import { skillCell } from './overview.js';
import { surfacePanel, activityPanel, usagePanel, timelinePanel } from './target-feeds.js';

export const title = 'Targets';

// The link's counters (root/src/hubs/link.rs `Pressure`), labelled.
const PRESSURE = [
  ['queue_depth', 'Queue depth', 'Frames queued for the hub\'s socket and not yet written'],
  ['pending_calls', 'Pending calls', 'Calls sent to the hub and not yet answered'],
  ['pending_commands', 'Pending commands', 'Skill commands sent to the hub and not yet answered'],
];

function pressureView(p) {
  if (!p) return h('span', { id: 'transport-pressure', class: 'muted' }, 'no connection');
  return h('span', { id: 'transport-pressure', class: 'pressure' }, PRESSURE.map(([key, label, why], i) => [
    i ? ' · ' : null,
    h('span', { class: 'pressure-item', title: why, dataset: { key } }, `${label} `, h('strong', null, String(p[key] ?? '—'))),
  ]));
}

function memoryChart(read, sessions) {
  const withSamples = sessions.filter((s) => s.samples > 0);
  if (withSamples.length === 0) return h('p', { class: 'muted' }, 'No profiling session has samples yet.');
  const box = h('div', { id: 'memory-chart' }, h('p', { class: 'muted' }, 'Loading samples…'));
  const pick = h('select', { id: 'memory-session' }, withSamples.map((s) => h('option', { value: s.session_id }, `${s.service} · ${fmtTime(s.started_at)} · ${s.state}`)));
  async function draw() {
    const r = await read('hub.memory.get_session', { session_id: pick.value });
    const pts = (r.recent_samples || []).map((x) => ({ x: x.t_ms / 1000, y: x.rss_bytes }));
    const g = r.session.growth;
    clear(box).append(
      lineChart(pts, { fmtX: (v) => `${v.toFixed(0)} s`, fmtY: fmtBytes, title: 'RSS over the session' }),
      h('p', { class: 'muted small' }, `RSS of ${r.session.service} (pid ${r.session.pid || '—'}), last ${pts.length} samples${g ? `; growth ${fmtBytes(g.growth_bytes)}` : ''}`),
      heapView(r.session));
  }
  pick.addEventListener('change', () => draw().catch((e) => clear(box).append(h('p', { class: 'error' }, e.message))));
  draw().catch((e) => clear(box).append(h('p', { class: 'error' }, e.message)));
  return [h('label', null, 'Session ', pick), box];
}

/** Where a session's heap grew: its snapshots' top sites, as a chart and a table. */
function heapView(session) {
  const heap = session.heap;
  if (!heap) {
    return session.heap_error
      ? h('p', { class: 'warning', id: 'heap-error' }, `No heap summary: ${session.heap_error}`)
      : null;
  }
  const sites = heap.top_sites || [];
  const span = heap.from_snapshot ? `${heap.from_snapshot} → ${heap.to_snapshot}` : `${heap.to_snapshot} (from nothing)`;
  const rss = heap.rss_from_bytes !== null && heap.rss_to_bytes !== null
    ? `; RSS ${fmtBytes(heap.rss_from_bytes)} → ${fmtBytes(heap.rss_to_bytes)}` : '';
  return h('div', { id: 'heap-summary' },
    h('h3', null, 'Where the heap grew'),
    h('p', { class: 'muted small' }, `${heap.format} snapshots ${span}: heap ${fmtBytes(heap.heap_bytes)}, grew ${fmtBytes(heap.growth_bytes)}${rss}${heap.symbolized ? '' : ' (no symbols: addresses in their mapping)'}`),
    barChart(sites.map((x) => ({ label: x.function, value: Math.max(0, x.growth_bytes), title: x.frames.join(' ← ') })),
      { fmt: fmtBytes, title: 'Growth by allocation site' }),
    table([
      { label: 'Allocation site', cell: (x) => h('code', null, x.function) },
      { label: 'Grew', cell: (x) => fmtBytes(x.growth_bytes), class: 'num' },
      { label: 'Objects', cell: (x) => (x.growth_objects === null ? '—' : String(x.growth_objects)), class: 'num' },
      { label: 'Live', cell: (x) => fmtBytes(x.bytes), class: 'num' },
      { label: 'Called from', cell: (x) => x.frames.slice(1).join(' ← ') || '—', class: 'wrap' },
    ], sites, { class: 'heap-sites', rowAttrs: (x) => ({ dataset: { site: x.function } }), empty: 'No site grew between the snapshots.' }),
    (heap.skipped || []).length ? h('p', { class: 'muted small' }, `Skipped: ${heap.skipped.join('; ')}`) : null);
}

/** The target search: a box and the first matches, links that open a target's inspector. */
function targetSearch(q, selected, first) {
  const input = h('input', {
    id: 'target-search', type: 'search', value: q, placeholder: 'part of a target id',
    autocomplete: 'off', spellcheck: 'false', 'aria-controls': 'target-matches',
  });
  const count = h('span', { class: 'muted', id: 'target-matches-count', 'aria-live': 'polite' });
  const box = h('div', { class: 'window-picker', id: 'target-matches', role: 'list' });
  let seq = 0;
  let timer = null;
  let shown = [];
  const link = (id, query) => `#/targets${qs({ t: id, q: query })}`;
  function fillMatches(answer, query) {
    shown = answer.targets || [];
    const total = answer.total ?? shown.length;
    count.textContent = query
      ? `${shown.length} of ${total} targets matching “${query}”`
      : `first ${shown.length} of ${total} targets; type part of an id to find one`;
    clear(box).append(...shown.map((x) => h('a', {
      href: link(x.target_id, query),
      role: 'listitem',
      class: ['chip', 'target-match', x.target_id === selected ? 'active' : null],
      dataset: { target: x.target_id, status: x.status },
    }, x.target_id, ' ', badge(x.status))));
    if (query && shown.length === 0) box.append(h('span', { class: 'muted' }, 'No target id contains this.'));
  }
  async function search() {
    const query = input.value.trim();
    const mine = ++seq;
    try {
      const answer = await get(`/v1/root/hubs${qs({ q: query, limit: MATCHES })}`);
      if (mine === seq) fillMatches(answer, query);
    } catch (e) {
      if (mine === seq) clear(box).append(h('p', { class: 'error' }, e.message));
    }
  }
  input.addEventListener('input', () => { clearTimeout(timer); timer = setTimeout(search, 250); });
  const form = h('form', { class: 'toolbar', id: 'target-search-form', role: 'search' },
    h('label', { for: 'target-search' }, 'Find a target'), input, count);
  // Enter opens the match whose id is what was typed, else the first match.
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clearTimeout(timer);
    await search();
    const query = input.value.trim();
    const pick = shown.find((x) => x.target_id === query) || shown[0];
    if (pick) location.hash = link(pick.target_id, query);
  });
  fillMatches(first, q);
  return [form, box];
}

const LIFECYCLE_KIND = { active: 'ok', cordoned: 'pending', retired: 'error' };

/**
 * A target's lifecycle as operators run it: its state (cordon, uncordon, retire), labels (set
 * one as key=value, remove one) and narrowing (read-only). Each button is an audited admin
 * command (admin.hub.*), in force at once on every replica.
 */
function lifecycleView(t) {
  const id = t.target_id;
  const life = t.lifecycle || { state: 'active' };
  const narrowing = t.narrowing || { read_only: false, deny: [] };
  const labels = t.labels || {};
  async function act(path, body, what) {
    const r = await post(`/v1/root/hubs/${encodeURIComponent(id)}/${path}`, body);
    const ended = r.leases_ended ? `; ${r.leases_ended} leases on it ended` : '';
    toast(`${id}: ${what} (event ${r.event_id})${ended}.`);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  }
  const run = (path, body, what) => () => act(path, body, what).catch((e) => toast(e.message, 'error'));
  const retired = life.state === 'retired';
  const reason = h('input', { id: 'lifecycle-reason', type: 'text', placeholder: 'reason (optional)', maxlength: 500, disabled: retired });
  const withReason = (verb) => () => {
    if (verb === 'retire' && !window.confirm(`Retire ${id} for good? Its hub is disconnected, its token refused and the leases on it end; the id is never enrolled again.`)) return;
    const r = reason.value.trim();
    run(`lifecycle/${verb}`, r ? { reason: r } : {}, verb)();
  };
  const button = (verb, label, cls, disabled) => h('button', { type: 'button', id: `lifecycle-${verb}`, class: cls, disabled, onclick: withReason(verb) }, label);
  const labelInput = h('input', { id: 'label-input', type: 'text', placeholder: 'key=value', spellcheck: 'false', disabled: retired });
  const labelForm = h('form', { class: 'toolbar', id: 'label-form' },
    h('label', { for: 'label-input' }, 'Set a label'), labelInput,
    h('button', { type: 'submit', class: 'secondary', disabled: retired }, 'Set'));
  labelForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const text = labelInput.value.trim();
    const at = text.indexOf('=');
    if (at < 1) { toast('A label is key=value (the value may be empty).', 'error'); return; }
    run('labels', { set: { [text.slice(0, at)]: text.slice(at + 1) } }, `label ${text}`)();
  });
  const chips = Object.keys(labels).length === 0
    ? h('span', { class: 'muted' }, 'none')
    : Object.entries(labels).map(([k, v]) => h('span', { class: 'chip mono label-chip', dataset: { key: k } }, v ? `${k}=${v}` : k,
      h('button', { type: 'button', class: 'chip-remove', title: `Remove label ${k}`, disabled: retired, onclick: run('labels', { remove: [k] }, `label ${k} removed`) }, '×')));
  const narrowed = [narrowing.read_only ? 'read-only' : null, ...(narrowing.deny || []).map((x) => `denied: ${x}`)].filter(Boolean);
  return panel('Lifecycle', kv([
    ['State', h('span', { id: 'lifecycle-state' }, badge(life.state, LIFECYCLE_KIND[life.state]))],
    ['Changed by', h('span', { id: 'lifecycle-changed-by', class: 'mono' }, life.changed_by ? `${life.changed_by}${life.reason ? `: ${life.reason}` : ''} (${fmtTime(life.changed_at)})` : '—')],
    ['Labels', h('span', { class: 'chips', id: 'target-labels' }, chips)],
    ['Narrowing', h('span', { id: 'target-narrowing' }, narrowed.length ? narrowed.join(', ') : 'nothing denied')],
  ]), labelForm, h('div', { class: 'toolbar row-actions' }, reason,
    life.state === 'cordoned'
      ? button('uncordon', 'Uncordon', 'secondary', false)
      : button('cordon', 'Cordon', 'secondary', retired),
    holds('admin') ? button('retire', 'Retire', 'danger', retired) : null,
    h('button', {
      type: 'button', id: 'narrow-read-only', class: 'secondary', disabled: retired,
      onclick: run('narrowing', { read_only: !narrowing.read_only, deny: narrowing.deny || [] }, narrowing.read_only ? 'writes allowed again' : 'read-only'),
    }, narrowing.read_only ? 'Allow writes' : 'Make read-only')),
  h('p', { class: 'muted small' }, 'Cordoned: no new calls (calls in flight finish). Retired: for good. Read-only denies every write on this target, whatever leases and the hub allow. Each change is an audited admin command, in force on every replica at once.'));
}

export async function render(root, params) {
  const q = params.get('q') || '';
  const first = await get(`/v1/root/hubs${qs({ q, limit: MATCHES })}`);
  root.append(h('h1', null, 'Target inspector'));
  if (!q && (first.total ?? 0) === 0) {
    root.append(h('p', { class: 'muted' }, 'No target is enrolled.'));
    return undefined;
  }
  const id = params.get('t') || (first.targets && first.targets.length ? first.targets[0].target_id : '');
  root.append(...targetSearch(q, id, first));
  if (!id) return undefined;
  let t;
  try {
    t = await get(`/v1/root/hubs/${encodeURIComponent(id)}`);
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 404)) throw e;
    root.append(h('p', { class: 'error' }, `No target ${id}.`));
    return undefined;
  }
  const d = t.descriptor || {};
  const surf = d.operational_surface || {};
  const gate = t.skill || { skill: 'infra_access_skill', desired: { installed: true, enabled: true }, hub: null };
  const skills = [gate];
  const contractsP = contracts();
  const read = reader(t, contractsP);

  async function command(skill, verb) {
    const r = await post(`/v1/root/hubs/${encodeURIComponent(id)}/skills/${encodeURIComponent(skill)}/${verb}`);
    toast(`${skill}: ${verb} (event ${r.event_id}). ${r.skill && r.skill.hub_push ? r.skill.hub_push : ''}`);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  }

  const button = (s, verb, label, cls, disabled) => h('button', {
    type: 'button', id: `skill-${verb}-${s.skill}`, class: cls, disabled,
    onclick: () => command(s.skill, verb).catch((e) => toast(e.message, 'error')),
  }, label);
  const skillPanel = panel('Skill', table([
    { label: 'Skill', cell: (s) => s.skill, class: 'mono' },
    { label: 'State', cell: () => h('span', { id: 'skill-state' }, skillCell(t)) },
    { label: 'Changed by', cell: (s) => h('span', { id: 'skill-changed-by', class: 'mono' }, s.desired.changed_by || '—') },
    { label: 'Hub', cell: (s) => h('span', { id: 'skill-hub' }, s.hub ? `${s.hub.version || '?'}${s.owner_disabled ? ', switched off by its owner' : ''}` : 'never connected') },
    { label: 'Published tools', cell: () => h('span', { id: 'published-count' }, String((t.published_capabilities || []).length)) },
    {
      label: '',
      cell: (s) => h('span', { class: 'row-actions' },
        s.desired.installed
          ? button(s, 'uninstall', 'Uninstall', 'danger', false)
          : button(s, 'install', 'Install', 'secondary', false),
        button(s, 'enable', 'Enable', 'secondary', s.desired.enabled),
        button(s, 'disable', 'Disable', 'danger', !s.desired.enabled)),
    },
  ], skills), h('p', { class: 'muted small' }, gate.closed_because || 'Install, enable, disable and uninstall are root\'s desired state: in force at root at once (also while the hub is offline), pushed to the hub, and recorded in the audit trail (admin.skill.*). The hub\'s owner can switch the skill off on the hub; root shows it and cannot override it.'));

  // Lifecycle, labels and narrowing are the operator role's (retiring, admin's).
  const lifecyclePanel = holds('operator') ? lifecycleView(t) : '';

  if (t.status === 'offline') {
    root.append(h('p', { class: 'warning', id: 'inspect-offline' }, `${id} is offline (last seen ${fmtTime(t.last_seen_at)}). Panels that read its hub wait for it to reconnect; root's own records below (subnet health and timeline, access tokens, action history) are current, and ProfileOps shows what the hub published until it went offline.`));
  }
  root.append(
    h('div', { class: 'grid-2' },
      panel('Descriptor', kv([
        ['Target', h('code', { id: 'inspect-target' }, t.target_id)],
        ['Status', h('span', { id: 'inspect-status' }, badge(t.status))],
        ['Environment', t.environment],
        ['Subnet / zone', `${t.subnet_id} / ${t.zone}`],
        ['Transport', d.transport ? d.transport.channel : '—'],
        ['Write scope', d.policy ? d.policy.write_scope : 'none'],
        ['Published by', surf.published_by || '—'],
        ['Enrolled', fmtTime(t.enrolled_at)],
        ['Last seen', fmtTime(t.last_seen_at)],
        ['Transport pressure', pressureView(t.pressure)],
      ]), h('details', null, h('summary', null, `Published capabilities (${(t.published_capabilities || []).length})`),
        h('div', { class: 'chips', id: 'published-chips' }, (t.published_capabilities || []).map((c) => h('span', { class: 'chip mono' }, typeof c === 'string' ? c : c.tool_id || 'unnamed'))))),
      skillPanel),
    lifecyclePanel,
    h('div', { class: 'grid-2' },
      section('Health', 'inspect-health', async () => {
        const r = await read('hub.run_healthchecks');
        return [h('p', null, 'Overall ', h('span', { id: 'health-status' }, badge(r.status, r.status === 'healthy' ? 'ok' : 'error')), ` · checked ${fmtTime(r.checked_at)}`),
          table([
            { label: 'Check', cell: (c) => c.name },
            { label: 'Kind', cell: (c) => c.kind },
            { label: 'Service', cell: (c) => c.service || '—' },
            { label: 'Result', cell: (c) => badge(c.ok ? 'ok' : 'failed', c.ok ? 'ok' : 'error') },
            { label: 'Latency', cell: (c) => fmtMs(c.latency_ms) },
            { label: 'Detail', cell: (c) => c.detail, class: 'wrap' },
          ], r.checks || [], { empty: 'No health checks are configured.' })];
      }),
      section('Runtime', 'inspect-runtime', async () => {
        const r = await read('hub.get_runtime_summary');
        return [kv([
          ['OS', `${r.os.pretty_name || r.os.kernel} ${r.os.kernel_release} (${r.os.arch})`],
          ['CPUs / load', `${r.cpu_count} / ${r.load_average.one} ${r.load_average.five} ${r.load_average.fifteen}`],
          ['Memory available', `${fmtBytes(r.memory.available_bytes)} of ${fmtBytes(r.memory.total_bytes)}`],
          ['Disk (state dir)', `${fmtBytes(r.disk.available_bytes)} free of ${fmtBytes(r.disk.total_bytes)}`],
          ['Hub process', `pid ${r.hub_process.pid}, RSS ${fmtBytes(r.hub_process.rss_bytes)}, up ${r.hub_process.uptime_sec} s`],
          ['Machine uptime', `${r.machine_uptime_sec} s`],
        ]), table([
          { label: 'Service', cell: (x) => x.name },
          { label: 'State', cell: (x) => badge(x.state, x.state === 'running' ? 'ok' : 'error') },
          { label: 'Mode', cell: (x) => x.mode },
          { label: 'PID', cell: (x) => String(x.pid || '—') },
          { label: 'RSS', cell: (x) => fmtBytes(x.rss_bytes) },
          { label: 'Restarts', cell: (x) => String(x.restarts) },
        ], r.services || [], { empty: 'No managed services.' })];
      })),
    surfacePanel(read, contractsP),
    usagePanel(read, contractsP),
    activityPanel(read, t.published_capabilities || []),
    h('div', { class: 'grid-2' },
      section('ProfileOps sessions', 'inspect-profiles', async () => {
        const r = await read('hub.memory.list_sessions', { limit: 20 });
        const sessions = r.sessions || [];
        return [...evidenceNote(r, 'profiles-source'), table([
          { label: 'Service', cell: (x) => x.service },
          { label: 'State', cell: (x) => badge(x.state, x.state === 'completed' ? 'ok' : x.state === 'running' ? 'pending' : 'muted') },
          { label: 'Mode', cell: (x) => x.mode },
          { label: 'Started', cell: (x) => fmtTime(x.started_at) },
          { label: 'Samples', cell: (x) => String(x.samples), class: 'num' },
          { label: 'Incidents', cell: (x) => String((x.incident_ids || []).length), class: 'num' },
        ], sessions, { empty: 'No profiling sessions.' }), memoryChart(read, sessions)];
      }),
      section('Incidents', 'inspect-incidents', async () => {
        const r = await read('hub.memory.list_incidents', { limit: 20 });
        return [...evidenceNote(r, 'incidents-source'), table([
          { label: 'Raised', cell: (x) => fmtTime(x.raised_at) },
          { label: 'Service', cell: (x) => x.service },
          { label: 'Kind', cell: (x) => x.kind },
          { label: 'Growth', cell: (x) => `${fmtBytes(x.growth_bytes)}${x.growth_percent !== null ? ` (${x.growth_percent.toFixed(1)} %)` : ''}` },
          { label: 'Top growing site', cell: (x) => (x.top_site ? h('code', null, x.top_site) : '—') },
          { label: 'Detail', cell: (x) => x.detail, class: 'wrap' },
        ], r.incidents || [], { empty: 'No incidents.' })];
      })),
    h('div', { class: 'grid-2' },
      section('Subnet health', 'inspect-subnet', async () => {
        const [r, p] = await Promise.all([read('root.get_subnet_analysis_health'), read('root.get_subnet_diagnostics')]);
        const pressure = new Map((p.targets || []).map((x) => [x.target_id, x]));
        return [h('p', null, `Subnet ${r.subnet_id}: `, h('span', { id: 'subnet-health' }, badge(r.health, r.health === 'healthy' ? 'ok' : 'error')), ` · ${r.summary}`),
          table([
            { label: 'Target', cell: (x) => x.target_id, class: 'mono' },
            { label: 'Status', cell: (x) => badge(x.status) },
            { label: 'Calls (15 min)', cell: (x) => String(x.recent_calls.total), class: 'num' },
            { label: 'Error rate', cell: (x) => `${(x.recent_calls.error_rate * 100).toFixed(0)} %`, class: 'num' },
            { label: 'Backlog / acks', cell: (x) => { const q = pressure.get(x.target_id); return q ? `${q.route_backlog} / ${q.pending_acks}` : '—'; }, class: 'num' },
            { label: 'Transport', cell: (x) => { const q = pressure.get(x.target_id); return q ? badge(q.transport.pressure, q.transport.pressure === 'low' ? 'ok' : 'error') : '—'; } },
          ], r.targets || [], { empty: 'No target in this subnet.' }),
          h('p', { class: 'muted small' }, `${(p.memory_profiles || []).length} memory-profile summaries published to root in this subnet.`)];
      }),
      section('Access tokens', 'inspect-tokens', async () => {
        const r = await read('hub.list_access_tokens', { include_inactive: true, limit: 50 });
        return table([
          { label: 'Session', cell: (x) => x.session_id, class: 'mono' },
          { label: 'Audience', cell: (x) => x.audience },
          { label: 'Profile', cell: (x) => x.capability_profile },
          { label: 'Status', cell: (x) => badge(x.status) },
          { label: 'Deadline', cell: (x) => fmtTime(x.deadline_at) },
          { label: 'Uses', cell: (x) => String(x.use_count), class: 'num' },
        ], r.tokens || [], { empty: 'No leases for this target.' });
      })),
    timelinePanel(read, id),
    section('Action history', 'inspect-history', async () => {
      const r = await get(`/v1/root/mcp/audit${qs({ target_id: id, limit: 25 })}`);
      return table([
        { label: 'Time', cell: (e) => fmtTime(e.started_at) },
        { label: 'Tool', cell: (e) => h('a', { href: `#/requests?event=${encodeURIComponent(e.event_id)}` }, e.tool_id), class: 'mono' },
        { label: 'Actor', cell: (e) => e.actor.id, class: 'mono' },
        { label: 'Status', cell: (e) => badge(e.status) },
        { label: 'Summary', cell: (e) => e.result_summary || (e.error ? `${e.error.code}: ${e.error.message}` : ''), class: 'wrap' },
      ], r.events, { empty: 'No actions yet.' });
    }),
  );
  return undefined;
}
