// Audit integrity: the hash chain verified (`/v1/root/mcp/audit/verify`), the latest signed
// checkpoint and its witnesses' cosignatures (`/checkpoints`, `/witnesses`), and how far
// each export sink is behind the trail (`/sinks`). Refreshed every 5 seconds but the chain
// verification, which runs on demand (it reads the whole trail).

import { h, badge, panel, kv, table, fmtTime } from '../dom.js';
import { get } from '../api.js';

export const title = 'Audit integrity';
export const role = 'auditor';

const REFRESH_MS = 5000;

function chainPanel() {
  const out = h('div', { id: 'verify-result' });
  async function verify() {
    out.replaceChildren(h('p', { class: 'muted' }, 'Verifying the whole chain…'));
    const v = await get('/v1/root/mcp/audit/verify');
    const b = v.first_broken;
    out.replaceChildren(
      h('p', { class: ['verdict', v.ok ? 'verdict-ok' : 'verdict-bad'], id: 'verify-verdict' },
        v.ok ? `Chain intact: ${v.checked} events verified.` : `Chain broken at event #${b.seq}.`),
      kv([
        ['Result', badge(v.ok ? 'intact' : 'broken', v.ok ? 'ok' : 'error')],
        ['Events checked', String(v.checked)],
        ['Head hash', h('code', { class: 'wrap' }, v.head_hash)],
        b ? ['First broken link', `#${b.seq} ${b.event_id || ''}: ${b.reason}`] : null,
        ['Checked at', new Date().toLocaleString(undefined, { hour12: false })],
      ]));
  }
  const fail = (e) => out.replaceChildren(h('p', { class: 'error' }, e.message));
  const section = panel('Hash chain', out,
    h('button', { type: 'button', id: 'verify-again', onclick: () => verify().catch(fail) }, 'Verify again'));
  return { section, verify };
}

function checkpointView(latest, key) {
  if (!latest) {
    return h('p', { class: 'muted', id: 'checkpoint-none' }, 'No checkpoint signed yet: one is signed within audit.checkpoint.every_sec of the first event.');
  }
  const cosigs = latest.cosignatures || [];
  return h('div', { id: 'checkpoint' },
    kv([
      ['Tree size', h('span', { id: 'checkpoint-size' }, `${latest.tree_size} events`)],
      ['Root hash', h('code', { class: 'wrap' }, latest.root_hash)],
      ['Signed', fmtTime(latest.created_at)],
      ['Log key', h('code', { class: 'wrap', id: 'log-key' }, key.verifier_key)],
      ['Witnessed by', h('span', { id: 'checkpoint-witnesses' },
        cosigs.length ? cosigs.map((c) => c.witness).join(', ') : 'no witness yet')],
    ]),
    h('h3', null, 'Signed note, with its cosignatures'),
    h('pre', { class: 'wrap', id: 'checkpoint-note' }, latest.note + cosigs.map((c) => `${c.line}\n`).join('')));
}

function witnessState(w, latestSize) {
  if (w.alarm) return badge('another history', 'error');
  if (w.last_error) return badge('failing', 'degraded');
  if (latestSize !== null && w.cosigned_size >= latestSize) return badge('current', 'ok');
  return badge('behind', 'pending');
}

function witnessesView(witnesses, latestSize) {
  return table([
    { label: 'Witness', cell: (w) => h('code', null, w.name) },
    { label: 'State', cell: (w) => witnessState(w, latestSize) },
    { label: 'Cosigned up to', cell: (w) => (w.cosigned_size ? `${w.cosigned_size} events` : '—') },
    { label: 'Last cosignature', cell: (w) => (w.cosigned_at ? fmtTime(new Date(w.cosigned_at * 1000).toISOString()) : '—') },
    { label: 'Last error', cell: (w) => w.last_error || '—' },
  ], witnesses, {
    class: 'witnesses',
    rowAttrs: (w) => ({ dataset: { witness: w.name, alarm: String(w.alarm) } }),
    empty: 'No witness is configured ([[audit.witnesses]] in the root config).',
  });
}

function sinkState(s) {
  if (s.blocking) return badge('blocking calls', 'error');
  if (s.lag > s.max_lag) return badge('behind', 'degraded');
  if (s.lag === 0) return badge('caught up', 'ok');
  return badge('shipping', 'active');
}

function sinksView(sinks) {
  return table([
    { label: 'Sink', cell: (s) => s.name },
    { label: 'Kind', cell: (s) => `${s.kind}, ${s.format}` },
    { label: 'State', cell: sinkState },
    { label: 'Lag', cell: (s) => h('span', { class: 'sink-lag' }, `${s.lag} events`) },
    { label: 'Policy', cell: (s) => `${s.policy} past ${s.max_lag}` },
    { label: 'Delivered / errors', cell: (s) => `${s.delivered} / ${s.errors}` },
    { label: 'Endpoint', cell: (s) => h('code', { class: 'wrap' }, s.endpoint) },
  ], sinks, {
    class: 'sinks',
    rowAttrs: (s) => ({ dataset: { sink: s.name, lag: String(s.lag) } }),
    empty: 'No export sink is configured ([[audit.sinks]] in the root config).',
  });
}

export async function render(root) {
  const chain = chainPanel();
  const cp = h('div', { id: 'checkpoint-panel' });
  const wit = h('div', { id: 'witnesses-panel' });
  const snk = h('div', { id: 'sinks-panel' });
  root.append(
    h('h1', null, 'Audit integrity'),
    h('p', { class: 'muted' }, 'Each audit row stores the hash of the previous one: sha256(prev_hash "\\n" canonical event). Root also signs checkpoints of a Merkle tree over the trail (C2SP signed notes), which witnesses outside the zone cosign, and ships the trail to export sinks.'),
    chain.section,
    panel('Latest checkpoint', cp),
    panel('Witnesses', wit),
    panel('Export sinks', snk),
  );
  async function refresh() {
    const [list, key, witnesses, sinks] = await Promise.all([
      get('/v1/root/mcp/audit/checkpoints?limit=1'),
      get('/v1/root/mcp/audit/key'),
      get('/v1/root/mcp/audit/witnesses'),
      get('/v1/root/mcp/audit/sinks'),
    ]);
    const latest = list.latest || null;
    cp.replaceChildren(checkpointView(latest, key));
    wit.replaceChildren(witnessesView(witnesses, latest ? latest.tree_size : null));
    snk.replaceChildren(sinksView(sinks));
  }
  const fail = (e) => snk.replaceChildren(h('p', { class: 'error' }, `Could not refresh: ${e.message}`));
  await Promise.all([chain.verify(), refresh()]);
  const timer = setInterval(() => refresh().catch(fail), REFRESH_MS);
  return () => clearInterval(timer);
}
