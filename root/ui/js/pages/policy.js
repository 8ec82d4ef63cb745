// Policy and profile state: capability profiles with their capabilities and tools, the tool
// contracts, targets' write scopes (one filtered page at a time), and root's limits.

import { h, badge, panel, table, kv } from '../dom.js';
import { get } from '../api.js';
import { targetsTable } from '../paging.js';

export const title = 'Policy';

export async function render(root) {
  const [foundation, contracts] = await Promise.all([
    get('/v1/root/mcp/foundation'),
    get('/v1/root/mcp/contracts'),
  ]);
  const all = contracts.contracts || [];
  const toolsOf = (p) => all.filter((c) => p.capabilities.includes(c.required_capability) && c.side_effect !== 'destructive');
  const limits = foundation.limits || {};
  root.append(
    h('h1', null, 'Policy and profile state'),
    panel('Capability profiles', h('div', { class: 'profiles' }, (foundation.capability_profiles || []).map((p) => {
      const tools = toolsOf(p);
      const writes = tools.filter((c) => c.side_effect === 'write').length;
      return h('article', { class: 'card profile', dataset: { profile: p.name } },
        h('h3', null, p.name, ' ', h('span', { class: 'muted small' }, p.plane)),
        h('p', null, p.description || ''),
        h('div', { class: 'chips' }, p.capabilities.map((c) => h('span', { class: 'chip' }, c))),
        h('p', { class: 'muted small' }, `${tools.length} tools, ${writes} of them writes`));
    }))),
    panel('Targets and write scopes', targetsTable('policy-targets', [
      { label: 'Target', cell: (t) => t.target_id },
      { label: 'Environment', cell: (t) => t.environment },
      { label: 'Status', cell: (t) => badge(t.status) },
      { label: 'Write scope', cell: (t) => (t.descriptor && t.descriptor.policy ? t.descriptor.policy.write_scope : 'none') },
      { label: 'Published by', cell: (t) => (t.descriptor && t.descriptor.operational_surface ? t.descriptor.operational_surface.published_by : '—') },
    ], { empty: 'No target is enrolled.', rowAttrs: (t) => ({ dataset: { target: t.target_id } }) })),
    panel('Limits', kv([
      ['Longest lease', `${limits.max_lease_ttl_sec} s`],
      ['Calls in flight per lease', String(limits.per_lease_in_flight)],
      ['Calls in flight per target', String(limits.per_target_in_flight)],
      ['Write confirmation token', `${limits.confirmation_ttl_sec} s`],
      ['Approval wait', `${limits.approval_ttl_sec} s`],
      ['Request body', `${limits.max_body_bytes} bytes`],
    ])),
    panel('Tool contracts', table([
      { label: 'Tool', cell: (c) => c.tool_id, class: 'mono' },
      { label: 'Routing', cell: (c) => c.routing },
      { label: 'Side effect', cell: (c) => badge(c.side_effect, c.side_effect === 'read' ? 'ok' : 'denied') },
      { label: 'Capability', cell: (c) => c.required_capability, class: 'mono' },
      { label: 'Approval', cell: (c) => (c.requires_approval ? 'operator approval' : '') },
      { label: 'Description', cell: (c) => c.summary || '', class: 'wrap' },
    ], all)),
  );
}
