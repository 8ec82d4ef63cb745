// Approvals: pending writes that need an operator (NLU changes and any contract with
// `requires_approval`) with their preview (the diff when there is one); approve or reject.

import { h, badge, clear, panel, table, fmtTime, plainText, valueView, toast } from '../dom.js';
import { get, raw } from '../api.js';

export const title = 'Approvals';
export const role = 'approver';

function diffLine(text, cls) {
  return h('span', { class: ['diff-line', cls] }, text, '\n');
}

/** A line diff of two lists: removed lines first, then added ones, unchanged kept. */
function listDiff(label, before, after) {
  const b = new Set(before);
  const a = new Set(after);
  return [
    ...before.map((x) => (a.has(x) ? diffLine(`  ${label}: ${plainText(x)}`, null) : diffLine(`- ${label}: ${plainText(x)}`, 'del'))),
    ...after.filter((x) => !b.has(x)).map((x) => diffLine(`+ ${label}: ${plainText(x)}`, 'add')),
  ];
}

/**
 * The preview of an approval: a unified diff string, or a before/after diff (an NLU change:
 * its template's text and examples, with the change lines), or the effect's fields.
 */
export function effectView(effect) {
  const diff = effect && effect.diff;
  if (typeof diff === 'string') {
    return h('pre', { class: 'diff' }, diff.split('\n').map((line) => {
      const cls = line.startsWith('+') && !line.startsWith('+++') ? 'add'
        : line.startsWith('-') && !line.startsWith('---') ? 'del'
          : line.startsWith('@@') ? 'hunk' : null;
      return diffLine(line, cls);
    }));
  }
  if (diff && typeof diff === 'object' && diff.before && diff.after) {
    const { before, after } = diff;
    const lines = [diffLine(`@@ ${effect.template_id || before.template_id || ''} ${effect.base_fingerprint || ''} → ${effect.new_fingerprint || ''}`, 'hunk')];
    for (const k of Object.keys(after)) {
      if (Array.isArray(after[k]) || Array.isArray(before[k])) {
        lines.push(...listDiff(k, before[k] || [], after[k] || []));
      } else if (JSON.stringify(before[k]) !== JSON.stringify(after[k])) {
        lines.push(diffLine(`- ${k}: ${plainText(before[k])}`, 'del'), diffLine(`+ ${k}: ${plainText(after[k])}`, 'add'));
      } else {
        lines.push(diffLine(`  ${k}: ${plainText(after[k])}`, null));
      }
    }
    const { diff: _shown, ...rest } = effect;
    return h('div', null,
      Array.isArray(diff.changes) ? h('ul', { class: 'changes' }, diff.changes.map((c) => h('li', null, plainText(c)))) : null,
      h('pre', { class: 'diff' }, lines),
      h('details', null, h('summary', null, 'The rest of the effect'), valueView(rest)));
  }
  return h('div', { class: 'effect' }, valueView(effect));
}

export async function render(root) {
  const pendingBox = h('div', { id: 'approvals-pending' });
  const recentBox = h('div', { id: 'approvals-recent' });

  async function decide(a, decision, reasonInput) {
    const reason = reasonInput.value.trim();
    const r = await raw(`/v1/root/mcp/approvals/${encodeURIComponent(a.approval_id)}/${decision}`, { method: 'POST', body: reason ? { reason } : {} });
    if (r.status === 200) toast(`${a.approval_id} ${decision === 'approve' ? 'approved' : 'rejected'}.`);
    else toast(r.body && r.body.error ? r.body.error.message : `HTTP ${r.status}`, 'error');
    await refresh();
  }

  async function refresh() {
    const [pending, all] = await Promise.all([
      get('/v1/root/mcp/approvals?status=pending'),
      get('/v1/root/mcp/approvals?status=all&limit=30'),
    ]);
    clear(pendingBox);
    if (pending.approvals.length === 0) pendingBox.append(h('p', { class: 'muted empty', id: 'no-pending' }, 'No approval is waiting.'));
    for (const a of pending.approvals) {
      const reason = h('input', { placeholder: 'reason (optional)', class: 'reason', maxlength: 1000 });
      pendingBox.append(h('article', { class: 'card approval', dataset: { approval: a.approval_id } },
        h('h3', null, a.tool_id, ' ', badge(a.status, 'pending')),
        h('p', { class: 'muted small' }, `${a.approval_id} · target ${a.target_id} · lease ${a.session_id} · requested ${fmtTime(a.requested_at)} · expires ${fmtTime(a.expires_at)}`),
        h('h4', null, 'Preview'),
        effectView(a.effect),
        h('details', { class: 'arguments' }, h('summary', null, 'Arguments'), valueView(a.arguments)),
        h('div', { class: 'actions' },
          reason,
          h('button', { type: 'button', class: 'approve', id: `approve-${a.approval_id}`, onclick: () => decide(a, 'approve', reason) }, 'Approve'),
          h('button', { type: 'button', class: 'danger', id: `reject-${a.approval_id}`, onclick: () => decide(a, 'reject', reason) }, 'Reject'))));
    }
    clear(recentBox).append(table([
      { label: 'Approval', cell: (a) => h('code', null, a.approval_id) },
      { label: 'Tool', cell: (a) => a.tool_id, class: 'mono' },
      { label: 'Target', cell: (a) => a.target_id },
      { label: 'Status', cell: (a) => h('span', { class: 'approval-status' }, badge(a.status, a.status === 'approved' || a.status === 'applied' ? 'ok' : a.status === 'pending' ? 'pending' : 'muted')) },
      { label: 'Requested', cell: (a) => fmtTime(a.requested_at) },
      { label: 'Decided', cell: (a) => fmtTime(a.decided_at) },
      { label: 'Reason', cell: (a) => a.reason || '', class: 'wrap' },
    ], all.approvals, { empty: 'No approvals yet.', rowAttrs: (a) => ({ dataset: { approval: a.approval_id, status: a.status } }) }));
  }

  root.append(
    h('h1', null, 'Approvals'),
    panel('Waiting for a decision', pendingBox),
    panel('Recent', recentBox),
  );
  await refresh();
  const timer = setInterval(() => {
    // Not while the operator is typing a reason.
    if (!pendingBox.contains(document.activeElement)) refresh().catch(() => {});
  }, 10000);
  return () => clearInterval(timer);
}
