// Sessions: the MCP Server dialog (choose target, TTL and capability profile; get the bearer
// once with copy-ready client configuration) and the open MCP session leases (target,
// deadline, last use, use count; expired shown as expired; one filtered page at a time) with
// revoke and rotate, each with
// its place in the delegation graph (issued, minted by another lease, a run credential) and,
// one click away, its chain: where its authority came from and what it handed on. Opened as
// #/sessions?authorize=<request>, the dialog is an OAuth client's sign-in: the operator picks
// target, profile and lifetime and approves (the browser returns to the client with a code)
// or denies.

import { h, badge, clear, panel, table, fmtTime, toast } from '../dom.js';
import { get, post, ApiError } from '../api.js';
import { holds } from '../roles.js';
import { LEASE_STATUSES, filterForm, pagedList, statusSummary, targetPicker } from '../paging.js';

export const title = 'Sessions';

const TTLS = [['900', '15 minutes'], ['3600', '1 hour'], ['28800', '8 hours'], ['86400', '1 day'], ['604800', '7 days']];

function copyButton(getText, label) {
  return h('button', {
    type: 'button',
    class: 'secondary copy',
    onclick: async (e) => {
      const btn = e.currentTarget;
      try {
        await navigator.clipboard.writeText(getText());
        btn.textContent = 'Copied';
      } catch {
        btn.textContent = 'Select and copy';
      }
      setTimeout(() => { btn.textContent = label; }, 2000);
    },
  }, label);
}

/** The once-shown bearer with the client configuration `mcp-root demo` prints. */
function issuedView(issued, verb) {
  const url = `${location.origin}/mcp`;
  const token = issued.token;
  const codex = `[mcp_servers.root]\nurl = "${url}"\nbearer_token_env_var = "ROOT_MCP_TOKEN"\n\n# then, in the shell that starts Codex:\nexport ROOT_MCP_TOKEN=${token}`;
  const claude = `claude mcp add --transport http root ${url} --header "Authorization: Bearer ${token}"`;
  const lease = issued.lease || {};
  return h('div', { class: 'issued', id: 'issued' },
    h('p', { class: 'warning' }, `Lease ${verb}. This bearer is shown once: copy it now. Root keeps only its hash.`),
    h('dl', { class: 'kv' },
      h('dt', null, 'Session'), h('dd', null, h('code', { id: 'issued-session' }, issued.session_id)),
      h('dt', null, 'Target'), h('dd', null, lease.target_id || ''),
      h('dt', null, 'Profile'), h('dd', null, lease.capability_profile || ''),
      h('dt', null, 'Deadline'), h('dd', null, fmtTime(issued.deadline_at)),
      h('dt', null, 'MCP URL'), h('dd', null, h('code', null, url))),
    h('label', { for: 'issued-token' }, 'Bearer'),
    h('div', { class: 'copy-row' }, h('input', { id: 'issued-token', readonly: true, value: token, spellcheck: 'false' }), copyButton(() => token, 'Copy bearer')),
    h('h3', null, 'Codex (~/.codex/config.toml)'),
    h('pre', { class: 'config', id: 'codex-config' }, codex),
    copyButton(() => codex, 'Copy Codex config'),
    h('h3', null, 'Claude Code'),
    h('pre', { class: 'config', id: 'claude-config' }, claude),
    copyButton(() => claude, 'Copy command'));
}

/** Target (searched as it is typed), profile and lifetime, with ids under `prefix`. */
function grantFields(prefix, foundation, profile, ttl) {
  return [
    h('label', { for: `${prefix}-target` }, 'Target'),
    targetPicker({ id: `${prefix}-target`, required: true }),
    h('label', { for: `${prefix}-profile` }, 'Capability profile'),
    h('select', { id: `${prefix}-profile`, name: 'capability_profile', required: true },
      (foundation.capability_profiles || []).map((p) => h('option', { value: p.name, selected: p.name === profile }, `${p.name} — ${p.plane}`))),
    h('label', { for: `${prefix}-ttl` }, prefix === 'oauth' ? 'Sign-in lasts' : 'Time to live'),
    h('select', { id: `${prefix}-ttl`, name: 'ttl_sec' }, TTLS.map(([v, l]) => h('option', { value: v, selected: v === ttl }, l))),
  ];
}

/** The sign-in dialog of an OAuth client's authorization request. */
async function signInDialog(sealed, foundation) {
  const dialog = h('dialog', { id: 'oauth-dialog', class: 'dialog' });
  const error = h('p', { class: 'error', id: 'oauth-error', role: 'alert' });
  let asked;
  try {
    asked = await post('/oauth/authorize/request', { request: sealed });
  } catch (err) {
    dialog.append(h('h2', null, 'MCP Server'), h('p', { class: 'error', id: 'oauth-error' }, err.message));
    return dialog;
  }
  const decide = async (path, body) => {
    error.textContent = '';
    try {
      const decided = await post(path, body);
      location.assign(decided.redirect);
    } catch (err) {
      error.textContent = err instanceof ApiError ? err.message : String(err);
    }
  };
  const form = h('form', { id: 'oauth-form', method: 'dialog' },
    ...grantFields('oauth', foundation, asked.capability_profile, '28800'),
    error,
    h('div', { class: 'actions' },
      h('button', { type: 'submit', id: 'oauth-approve' }, 'Approve sign-in'),
      h('button', { type: 'button', class: 'secondary', id: 'oauth-deny', onclick: () => decide('/oauth/authorize/deny', { request: sealed }) }, 'Deny')));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const fd = new FormData(form);
    decide('/oauth/authorize/approve', {
      request: sealed,
      target_id: fd.get('target_id'),
      capability_profile: fd.get('capability_profile'),
      ttl_sec: Number(fd.get('ttl_sec')),
    });
  });
  dialog.append(
    h('h2', null, 'MCP Server'),
    h('p', null, 'An MCP client asks to sign in to this root. Approving issues it a session lease bound to the target, profile and lifetime you choose, under your name.'),
    h('dl', { class: 'kv' },
      h('dt', null, 'Client'), h('dd', { id: 'oauth-client' }, asked.client_name),
      h('dt', null, 'Client id'), h('dd', null, h('code', null, asked.client_id)),
      h('dt', null, 'Returns to'), h('dd', null, h('code', { id: 'oauth-redirect' }, asked.redirect_uri)),
      h('dt', null, 'MCP URL'), h('dd', null, h('code', null, asked.resource)),
      h('dt', null, 'Decide by'), h('dd', null, fmtTime(asked.expires_at))),
    form);
  return dialog;
}

/** One lease of a chain: short id, kind, status, profile and deadline. */
function chainNode(l, depth, self) {
  const cls = `chain-node depth-${Math.min(depth, 9)}${self ? ' self' : ''}`;
  return h('li', { class: cls, dataset: { session: l.session_id, status: l.status } },
    h('code', { title: l.session_id }, l.session_id.slice(-12)), ' ',
    badge(l.kind || 'issued', 'muted'), ' ',
    badge(l.status, l.status === 'active' ? 'ok' : 'muted'), ' ',
    `${l.capability_profile} until ${fmtTime(l.deadline_at)}`,
    self ? h('strong', null, ' (this lease)') : '');
}

/** A lease's delegation chain: the grant and operator at the top, its ancestors, the lease,
 *  and everything below it. */
function chainView(view) {
  const top = view.ancestors.length ? view.ancestors[view.ancestors.length - 1] : view.lease;
  const source = [];
  if (view.grant) {
    const g = view.grant;
    source.push(h('p', { id: 'delegation-grant' },
      `OAuth sign-in of client ${g.client_id}, approved by ${g.approved_by} until ${fmtTime(g.expires_at)}`,
      g.ended_at ? ` (ended ${fmtTime(g.ended_at)})` : ''));
  } else if (top.issued_by) {
    source.push(h('p', { id: 'delegation-issuer' }, `Issued by ${top.issued_by}`));
  }
  const nodes = [];
  [...view.ancestors].reverse().forEach((l, i) => nodes.push(chainNode(l, i, false)));
  const depth = view.ancestors.length;
  nodes.push(chainNode(view.lease, depth, true));
  view.descendants.forEach((d) => nodes.push(chainNode(d.lease, depth + d.depth, false)));
  return h('div', null, ...source,
    h('p', { class: 'muted' }, 'A lease works only while every lease above it does; revoking or rotating one ends everything below it.'),
    h('ul', { class: 'chain' }, ...nodes));
}

export async function render(root, params) {
  const foundation = await get('/v1/root/mcp/foundation');
  const chainBox = h('div', { id: 'delegation' }, h('p', { class: 'muted' }, 'Choose Chain on a lease to see where its authority came from and what it handed on.'));
  const dialog = h('dialog', { id: 'mcp-dialog', class: 'dialog' });
  const result = h('div', { id: 'dialog-result' });
  const error = h('p', { class: 'error', id: 'dialog-error', role: 'alert' });

  const form = h('form', { id: 'lease-form', method: 'dialog' },
    ...grantFields('lease', foundation, null, '3600'),
    error,
    h('div', { class: 'actions' },
      h('button', { type: 'submit', id: 'lease-create' }, 'Create lease'),
      h('button', { type: 'button', class: 'secondary', id: 'dialog-close', onclick: () => closeDialog() }, 'Close')));

  function closeDialog() {
    clear(result); // the bearer leaves the page with the dialog
    error.textContent = '';
    form.hidden = false;
    if (dialog.open) dialog.close();
  }
  dialog.addEventListener('close', () => { clear(result); form.hidden = false; });
  dialog.append(h('h2', null, 'MCP Server'), h('p', { class: 'muted' }, 'Issue an MCP session lease: a bearer bound to one target, one capability profile and a deadline.'), form, result);

  function showIssued(issued, verb) {
    clear(result);
    form.hidden = true;
    result.append(issuedView(issued, verb), h('div', { class: 'actions' }, h('button', { type: 'button', id: 'issued-done', onclick: () => closeDialog() }, 'Done')));
    if (!dialog.open) dialog.showModal();
  }

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    error.textContent = '';
    const fd = new FormData(form);
    try {
      const issued = await post('/v1/root/mcp/sessions', {
        target_id: fd.get('target_id'),
        capability_profile: fd.get('capability_profile'),
        ttl_sec: Number(fd.get('ttl_sec')),
      });
      showIssued(issued, 'created');
      await leases.load(filters.values()); // the first page, where the new lease is
    } catch (err) {
      error.textContent = err instanceof ApiError ? err.message : String(err);
    }
  });

  function actionButton(label, id, run) {
    let armed = false;
    return h('button', {
      type: 'button',
      class: 'secondary small-button',
      id,
      onclick: async (e) => {
        const btn = e.currentTarget;
        if (!armed) {
          armed = true;
          btn.textContent = `Confirm ${label.toLowerCase()}`;
          btn.classList.add('armed');
          setTimeout(() => { armed = false; btn.textContent = label; btn.classList.remove('armed'); }, 6000);
          return;
        }
        btn.disabled = true;
        try { await run(); } catch (err) { toast(err.message, 'error'); }
        await refresh();
      },
    }, label);
  }

  async function showChain(id) {
    const view = await get(`/v1/root/mcp/sessions/${encodeURIComponent(id)}/delegation`);
    clear(chainBox).append(chainView(view));
  }

  function kindCell(s) {
    const kind = s.kind || 'issued';
    if (s.parent_session_id) return h('span', null, kind, ' of ', h('code', { title: s.parent_session_id }, s.parent_session_id.slice(-12)));
    return h('span', null, kind, s.issued_by ? ` by ${s.issued_by.replace(/^operator:/, '')}` : '');
  }

  const leases = pagedList({
    id: 'sessions-list',
    path: '/v1/root/mcp/sessions',
    noun: 'leases',
    items: (a) => a.sessions,
    summary: (a) => statusSummary(a.by_status),
    view: (sessions) => table([
      { label: 'Session', cell: (s) => h('code', { title: s.session_id }, s.session_id.slice(-12)) },
      { label: 'Kind', cell: kindCell },
      { label: 'Target', cell: (s) => s.target_id },
      { label: 'Profile', cell: (s) => s.capability_profile },
      { label: 'Audience', cell: (s) => s.audience },
      { label: 'Deadline', cell: (s) => fmtTime(s.deadline_at) },
      { label: 'Last use', cell: (s) => fmtTime(s.last_used_at) },
      { label: 'Uses', cell: (s) => h('span', { class: 'use-count' }, String(s.use_count)), class: 'num' },
      { label: 'Status', cell: (s) => h('span', { class: 'lease-status' }, badge(s.status, s.status === 'active' ? 'ok' : 'muted')) },
      {
        label: '',
        cell: (s) => h('span', { class: 'row-actions' },
          h('button', { type: 'button', class: 'secondary small-button', id: `chain-${s.session_id}`, onclick: () => showChain(s.session_id).catch((err) => toast(err.message, 'error')) }, 'Chain'),
          ...(s.status === 'active' ? [
            actionButton('Revoke', `revoke-${s.session_id}`, async () => { await post(`/v1/root/mcp/sessions/${encodeURIComponent(s.session_id)}/revoke`); toast('Lease revoked with everything it handed on.'); }),
            actionButton('Rotate', `rotate-${s.session_id}`, async () => { const issued = await post(`/v1/root/mcp/sessions/${encodeURIComponent(s.session_id)}/rotate`); showIssued(issued, 'rotated'); })] : [])),
      },
    ], sessions, { class: 'sessions-table', empty: 'No lease matches.', rowAttrs: (s) => ({ dataset: { session: s.session_id, status: s.status } }) }),
  });
  const refresh = () => leases.refresh();
  const filters = filterForm('sessions-list', [
    { name: 'status', label: 'Status', kind: 'select', options: LEASE_STATUSES },
    { name: 'target_id', label: 'Target', kind: 'target' },
    { name: 'capability_profile', label: 'Profile', kind: 'select', options: (foundation.capability_profiles || []).map((p) => [p.name, p.name]) },
  ], (v) => leases.load(v));

  root.append(
    h('h1', null, 'MCP sessions'),
    h('div', { class: 'toolbar' },
      holds('operator') ? h('button', { type: 'button', id: 'open-mcp-dialog', onclick: () => { closeDialog(); dialog.showModal(); } }, 'New MCP session…') : null,
      h('button', { type: 'button', class: 'secondary', onclick: () => refresh() }, 'Refresh')),
    dialog,
    panel('Leases', filters.form, leases.element),
    panel('Delegation chain', chainBox),
  );
  await leases.load(filters.values());
  const sealed = params && params.get('authorize');
  if (sealed && holds('approver')) {
    const signIn = await signInDialog(sealed, foundation);
    root.append(signIn);
    signIn.showModal();
  }
  const timer = setInterval(() => { if (!dialog.open) refresh().catch(() => {}); }, 15000);
  return () => { clearInterval(timer); closeDialog(); };
}
