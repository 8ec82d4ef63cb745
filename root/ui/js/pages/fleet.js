// Fleet runs: start a read on every target a selector names, or preview a write there and
// confirm it; follow a run (progress, outcomes grouped, a line per target); pause, resume or
// cancel it. #/fleet lists the runs, #/fleet?run=ID shows one. The write's confirmation token
// lives only in this page's memory, for the one click that redeems it.

import { h, badge, clear, panel, table, fmtTime, kv, plainText, toast, valueView } from '../dom.js';
import { get, raw } from '../api.js';
import { holds } from '../roles.js';

export const title = 'Fleet runs';

const STATE_KIND = { completed: 'ok', running: 'pending', paused: 'pending', previewed: 'pending', stopped: 'error', cancelled: 'muted', expired: 'muted' };
const STATUS_KIND = { succeeded: 'ok', failed: 'error', undeliverable: 'offline', refused: 'denied', excluded: 'muted', skipped: 'muted', cancelled: 'muted', pending: 'pending', running: 'pending' };

/** The preview tokens this page issued, by run (never stored elsewhere). */
const tokens = new Map();

function field(id, label, attrs = {}) {
  return h('label', { for: id }, label, h('input', { id, ...attrs }));
}

function startForm() {
  const form = h('form', { id: 'fleet-form', class: 'form-grid' },
    field('fleet-selector', 'Selector', { placeholder: 'env=test,label:role=web', required: true, size: 40 }),
    field('fleet-tool', 'Tool', { placeholder: 'hub.get_status', required: true }),
    field('fleet-arguments', 'Arguments (JSON object)', { placeholder: '{}' }),
    field('fleet-canary', 'Canaries', { type: 'number', min: 0, max: 100, value: 1 }),
    field('fleet-window', 'At once (count or %)', { value: '10' }),
    field('fleet-errors', 'Error budget (count or %)', { value: '0' }),
    h('div', { class: 'actions' },
      h('button', { type: 'button', id: 'fleet-start-read', onclick: () => submit('read') }, 'Run a read'),
      h('button', { type: 'button', id: 'fleet-preview', onclick: () => submit('preview') }, 'Preview a write')));
  const amount = (v) => (/^\d+$/.test(v) ? Number(v) : v);
  function body() {
    const v = (id) => document.getElementById(id).value.trim();
    let args = {};
    if (v('fleet-arguments')) args = JSON.parse(v('fleet-arguments'));
    return {
      selector: v('fleet-selector'),
      tool_id: v('fleet-tool'),
      arguments: args,
      plan: { canary: Number(v('fleet-canary') || 0), max_concurrency: amount(v('fleet-window') || '10'), max_errors: amount(v('fleet-errors') || '0') },
    };
  }
  async function submit(kind) {
    let b;
    try { b = body(); } catch (e) { toast(`Arguments: ${e.message}`, 'error'); return; }
    const r = await raw(kind === 'read' ? '/v1/root/fleet/runs' : '/v1/root/fleet/previews', { method: 'POST', body: b });
    if (r.status !== 201) {
      toast(r.body && r.body.error ? r.body.error.message : `HTTP ${r.status}`, 'error');
      return;
    }
    const run = kind === 'read' ? r.body.run_id : r.body.report.run_id;
    if (kind === 'preview') tokens.set(run, { token: r.body.confirmation_token, body: b });
    location.hash = `#/fleet?run=${encodeURIComponent(run)}`;
  }
  return form;
}

async function listView(root) {
  const box = h('div', { id: 'fleet-runs' });
  // Starting runs is the operator role's; every operator sees them.
  root.append(h('h1', null, 'Fleet runs'), ...(holds('operator') ? [panel('Start', startForm())] : []), panel('Recent runs', box));
  async function refresh() {
    const { runs } = await get('/v1/root/fleet/runs?limit=50');
    clear(box).append(table([
      { label: 'Run', cell: (r) => h('a', { href: `#/fleet?run=${encodeURIComponent(r.run_id)}` }, h('code', null, r.run_id.slice(0, 13))) },
      { label: 'State', cell: (r) => badge(r.state, STATE_KIND[r.state]) },
      { label: 'Tool', cell: (r) => r.tool_id, class: 'mono' },
      { label: 'Selector', cell: (r) => h('code', null, r.selector) },
      { label: 'By', cell: (r) => r.created_by },
      { label: 'Started', cell: (r) => fmtTime(r.created_at) },
    ], runs, { empty: 'No fleet runs yet.', rowAttrs: (r) => ({ dataset: { run: r.run_id, state: r.state } }) }));
  }
  await refresh();
  const timer = setInterval(() => refresh().catch(() => {}), 5000);
  return () => clearInterval(timer);
}

async function command(run, verb) {
  const r = await raw(`/v1/root/fleet/runs/${encodeURIComponent(run)}/${verb}`, { method: 'POST', body: {} });
  if (r.status === 200) toast(`Run ${verb}: ${r.body.state}.`);
  else toast(r.body && r.body.error ? r.body.error.message : `HTTP ${r.status}`, 'error');
}

async function confirm(report) {
  const kept = tokens.get(report.run_id);
  const r = await raw('/v1/root/fleet/runs', { method: 'POST', body: { ...kept.body, confirmation_token: kept.token } });
  tokens.delete(report.run_id);
  if (r.status === 201) toast('Confirmed: the run started.');
  else toast(r.body && r.body.error ? r.body.error.message : `HTTP ${r.status}`, 'error');
}

function runHead(r, refresh) {
  const done = r.total - (r.counts.pending || 0) - (r.counts.running || 0);
  const act = (id, label, f, cls) => h('button', { type: 'button', id, class: cls, onclick: async () => { await f(); await refresh(); } }, label);
  const buttons = [];
  if (r.state === 'previewed' && tokens.has(r.run_id)) buttons.push(act('fleet-confirm', `Confirm and run on ${r.counts.pending} targets`, () => confirm(r), 'approve'));
  if (r.state === 'running') buttons.push(act('fleet-pause', 'Pause', () => command(r.run_id, 'pause')));
  if (r.state === 'paused') buttons.push(act('fleet-resume', 'Resume', () => command(r.run_id, 'resume')));
  if (['previewed', 'running', 'paused'].includes(r.state)) buttons.push(act('fleet-cancel', 'Cancel', () => command(r.run_id, 'cancel'), 'danger'));
  return [
    h('h1', null, h('span', { class: 'mono' }, r.tool_id), ' on ', h('code', null, r.selector), ' ', h('span', { id: 'fleet-run-state' }, badge(r.state, STATE_KIND[r.state]))),
    h('p', { id: 'fleet-summary' }, r.summary, `; errors ${r.errors} of budget ${r.error_budget}`),
    r.state === 'previewed' ? null : h('progress', { id: 'fleet-progress', max: r.total, value: done }),
    kv([
      ['Run', h('code', null, r.run_id)],
      ['By', r.created_by],
      ['Started', fmtTime(r.created_at)],
      ['Finished', fmtTime(r.finished_at)],
      ['Set', h('code', null, r.set_hash.slice(0, 16))],
      r.capability_profile ? ['Profile', r.capability_profile] : null,
      r.confirmation_expires_at ? ['Confirm before', fmtTime(r.confirmation_expires_at)] : null,
      ['Trace', h('a', { href: `#/requests?trace_id=${encodeURIComponent(r.trace_id)}` }, h('code', null, r.trace_id))],
    ]),
    h('div', { class: 'actions' }, holds('operator') ? buttons : []),
  ];
}

/** A group's outcome, readable: its fields (a long one folded), or a note when it was cut. */
function outcome(g) {
  if (g.truncated) return h('span', { class: 'muted' }, 'Longer than the report shows: open a target below for its full result.');
  let v;
  try { v = JSON.parse(g.sample); } catch { return g.sample; }
  if (v === null || typeof v !== 'object') return valueView(v);
  return h('details', null, h('summary', null, plainText(v).slice(0, 120)), valueView(v));
}

async function runView(root, runId) {
  const head = h('div', { id: 'fleet-head' });
  const groups = h('div', { id: 'fleet-groups' });
  const targets = h('div', { id: 'fleet-targets' });
  root.append(h('p', null, h('a', { href: '#/fleet' }, '← all runs')), head, panel('Outcomes', groups), panel('Targets', targets));
  const detail = h('div', { id: 'fleet-target-result' });
  root.append(detail);
  async function showTarget(target) {
    const t = await get(`/v1/root/fleet/runs/${encodeURIComponent(runId)}/targets/${encodeURIComponent(target)}`);
    clear(detail).append(panel(`Target ${t.target_id}`, kv([
      ['Status', badge(t.status, STATUS_KIND[t.status])],
      t.code ? ['Code', t.code] : null,
      t.event_id ? ['Event', h('code', null, t.event_id)] : null,
      t.preview ? ['Preview', valueView(t.preview)] : null,
      ['Result', valueView(t.result)],
    ])));
    detail.scrollIntoView({ block: 'nearest' });
  }
  let timer = null;
  async function refresh() {
    const r = await get(`/v1/root/fleet/runs/${encodeURIComponent(runId)}`);
    clear(head).append(...runHead(r, refresh));
    clear(groups).append(table([
      { label: 'Status', cell: (g) => badge(g.status, STATUS_KIND[g.status]) },
      { label: 'Code', cell: (g) => g.code || '' },
      { label: 'Targets', cell: (g) => String(g.count) },
      { label: 'Which', cell: (g) => g.targets.join(', ') + (g.count > g.targets.length ? ` and ${g.count - g.targets.length} more` : ''), class: 'wrap' },
      { label: 'Outcome', cell: outcome, class: 'wrap' },
    ], r.groups, { empty: 'No outcome yet.', rowAttrs: (g) => ({ dataset: { status: g.status } }) }));
    clear(targets).append(table([
      { label: 'Target', cell: (t) => h('button', { type: 'button', class: 'link', onclick: () => showTarget(t.target_id) }, t.target_id) },
      { label: 'Status', cell: (t) => badge(t.status, STATUS_KIND[t.status]) },
      { label: 'Code', cell: (t) => t.code || '' },
      { label: 'Started', cell: (t) => fmtTime(t.started_at) },
      { label: 'Finished', cell: (t) => fmtTime(t.finished_at) },
    ], r.targets, { rowAttrs: (t) => ({ dataset: { target: t.target_id, status: t.status } }) }));
    const live = ['running', 'paused'].includes(r.state);
    if (live && !timer) timer = setInterval(() => refresh().catch(() => {}), 1000);
    if (!live && timer) { clearInterval(timer); timer = null; }
  }
  await refresh();
  return () => { if (timer) clearInterval(timer); };
}

export async function render(root, params) {
  const run = params.get('run');
  return run ? runView(root, run) : listView(root);
}
