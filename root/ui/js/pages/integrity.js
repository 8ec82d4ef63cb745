// Audit integrity: the hash-chain verification of `/v1/root/mcp/audit/verify`.

import { h, badge, panel, kv } from '../dom.js';
import { get } from '../api.js';

export const title = 'Audit integrity';

export async function render(root) {
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
  root.append(
    h('h1', null, 'Audit integrity'),
    h('p', { class: 'muted' }, 'Each audit row stores the hash of the previous one: sha256(prev_hash "\\n" canonical event). Verification walks the chain from the first row and names the first link that does not hold.'),
    panel(null, out, h('button', { type: 'button', id: 'verify-again', onclick: () => verify().catch((e) => out.replaceChildren(h('p', { class: 'error' }, e.message))) }, 'Verify again')),
  );
  await verify();
}
