// The target inspector's reads: every panel loads on its own from a governed read of one tool
// (`/v1/root/hubs/{t}/read`, an operator reader lease, each read audited) and shows what went
// wrong in place. A hub that is offline or whose skill is closed is a state, not an error:
// its panels say so in one line instead of each printing a refusal.

import { h, clear, panel, fmtTime } from './dom.js';
import { get, readTool } from './api.js';
import { holds } from './roles.js';

/** Why a panel has nothing to show that is not a failure (shown as a notice). */
export class Unavailable extends Error {}

/** A panel filled by an async loader; notices and errors are shown in place. */
export function section(titleText, id, loader, ...extra) {
  const body = h('div', { id }, h('p', { class: 'muted' }, 'Loading…'));
  const p = panel(titleText, ...extra, body);
  fill(body, loader);
  return p;
}

/** Replaces `box`'s content with what `loader` resolves to, or its notice or error. */
export function fill(box, loader) {
  return loader().then((nodes) => { clear(box).append(...[nodes].flat(Infinity)); })
    .catch((e) => {
      clear(box).append(e instanceof Unavailable
        ? h('p', { class: 'notice unavailable' }, e.message)
        : h('p', { class: 'error' }, e.message));
    });
}

/**
 * The tool contracts by id (their side effect, capability and whether root executes them),
 * fetched once per page.
 */
export function contracts() {
  return get('/v1/root/mcp/contracts').then((r) => new Map((r.contracts || []).map((c) => [c.tool_id, c])));
}

/**
 * `read(tool, args)` for target `t`: the tool's result, an Unavailable when the hub cannot
 * answer (offline, or its skill closed), or an Error with the tool's error. Tools root
 * executes itself (a contract `executor`: subnet views, access tokens, logs) still answer
 * while the hub is offline, and so do the reads root answers from the evidence the hub
 * published (a contract `offline`: ProfileOps sessions, incidents, artifacts); other routed
 * ones are not tried then, so the operator gets one clear line rather than a refusal per
 * panel after root's retries.
 */
export function reader(t, contractsP) {
  const offline = () => new Unavailable(`${t.target_id} is offline (last seen ${fmtTime(t.last_seen_at)}): its hub answers this again once it reconnects.`);
  return async (tool, args) => {
    // A governed read of the hub runs under an operator's reader lease: the operator role's.
    if (!holds('operator')) throw new Unavailable("Reading the target's hub needs the operator role.");
    if (t.status === 'offline') {
      const c = (await contractsP.catch(() => new Map())).get(tool);
      if (!c || !(c.executor || c.offline)) throw offline();
    }
    const r = await readTool(t.target_id, tool, args);
    if (r.body && r.body.ok) return r.body.result;
    const e = r.body && r.body.error;
    if (e && e.code === 'target_offline') throw offline();
    if (e && e.code === 'skill_disabled') {
      // Root's reason when the skill is closed (disabled, uninstalled, switched off by the
      // hub's owner); else the hub does not publish this tool.
      const why = t.skill && t.skill.closed_because;
      throw new Unavailable(why ? `${why}: its tools are withdrawn until it is open again.` : e.message);
    }
    throw new Error(e ? `${e.code}: ${e.message}` : `HTTP ${r.status}`);
  };
}

/**
 * Where a ProfileOps answer came from, when not live from the hub: root's copy of the
 * evidence the hub published, and how old it is.
 */
export function evidenceNote(result, id) {
  const e = result && result.evidence;
  if (!e || e.source !== 'root') return [];
  return [h('p', { class: 'notice evidence', id }, `From root's copy of what the hub published, as of ${fmtTime(e.as_of)} (${e.age_seconds} s old): the hub is offline.`)];
}
