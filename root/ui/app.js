// The console's entry point: login, navigation and the hash router (#/page?param=value).
// Pages are modules under js/pages/ exporting `title` and `render(container, params)`, which
// may return a function to call when the page is left (closing live streams, timers).

import { h, clear, toast } from './js/dom.js';
import { raw, setCsrf, setUnauthorizedHandler } from './js/api.js';
import { holds, setRoles } from './js/roles.js';
import * as overview from './js/pages/overview.js';
import * as requests from './js/pages/requests.js';
import * as failures from './js/pages/failures.js';
import * as usage from './js/pages/usage.js';
import * as policy from './js/pages/policy.js';
import * as targets from './js/pages/targets.js';
import * as sessions from './js/pages/sessions.js';
import * as approvals from './js/pages/approvals.js';
import * as fleet from './js/pages/fleet.js';
import * as integrity from './js/pages/integrity.js';

const PAGES = { overview, requests, failures, usage, policy, targets, fleet, sessions, approvals, integrity };

const $ = (id) => document.getElementById(id);
let cleanup = null;
let loggedIn = false;
let renderSeq = 0;

/** The pages the session's roles allow (a page's `role`, `viewer` when it names none). */
function allowed() {
  return Object.fromEntries(Object.entries(PAGES).filter(([, mod]) => holds(mod.role || 'viewer')));
}

function parseHash() {
  const hash = location.hash.replace(/^#\/?/, '');
  const [name, query] = hash.split('?');
  return { name: allowed()[name] ? name : 'overview', params: new URLSearchParams(query || '') };
}

function buildNav(active) {
  const nav = $('nav');
  clear(nav);
  nav.append(h('ul', null, Object.entries(allowed()).map(([name, mod]) => h('li', null,
    h('a', { href: `#/${name}`, id: `nav-${name}`, class: name === active ? 'active' : null, 'aria-current': name === active ? 'page' : null }, mod.title)))));
}

async function route() {
  if (!loggedIn) return;
  const { name, params } = parseHash();
  if (cleanup) { try { cleanup(); } catch { /* the page is gone anyway */ } cleanup = null; }
  buildNav(name);
  document.body.classList.remove('nav-open');
  $('nav-toggle').setAttribute('aria-expanded', 'false');
  const page = $('page');
  clear(page);
  const container = h('div', { class: 'page', id: `page-${name}`, dataset: { page: name } });
  page.append(container);
  document.title = `${PAGES[name].title} · Root MCP console`;
  const mine = ++renderSeq;
  try {
    const c = await PAGES[name].render(container, params);
    if (mine === renderSeq) cleanup = typeof c === 'function' ? c : null;
    else if (typeof c === 'function') c();
  } catch (e) {
    container.append(h('p', { class: 'error' }, `Could not load this page: ${e.message}`));
  }
}

function showLogin(message) {
  loggedIn = false;
  if (cleanup) { try { cleanup(); } catch { /* ignore */ } cleanup = null; }
  setCsrf(null);
  clear($('page'));
  $('nav').hidden = true;
  $('logout').hidden = true;
  $('nav-toggle').hidden = true;
  $('live').hidden = true;
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  $('login-token').focus();
  // Sign-in with the organization's identity provider, when root offers it.
  raw('/ui/api/signin').then((r) => {
    $('oidc-signin').hidden = !(r.status === 200 && r.body && r.body.oidc);
  });
}

function showApp(session) {
  loggedIn = true;
  setCsrf(session.csrf_token);
  setRoles(session.roles);
  $('login').hidden = true;
  $('nav').hidden = false;
  $('logout').hidden = false;
  $('nav-toggle').hidden = false;
  const who = session.operator ? `operator ${session.operator} (${(session.roles || []).join(', ')})` : '';
  $('zone').textContent = [session.zone ? `zone ${session.zone}` : '', who].filter(Boolean).join(' · ');
  route();
}

async function checkSession() {
  const r = await raw('/ui/api/session');
  if (r.status === 200) showApp(r.body);
  else showLogin();
}

async function login(ev) {
  ev.preventDefault();
  const input = $('login-token');
  const token = input.value;
  $('login-submit').disabled = true;
  try {
    const r = await raw('/ui/api/login', { method: 'POST', body: { token } });
    input.value = '';
    if (r.status !== 200) {
      showLogin(r.body && r.body.error ? r.body.error.message : `login failed (HTTP ${r.status})`);
      return;
    }
    await checkSession();
  } finally {
    $('login-submit').disabled = false;
  }
}

async function logout() {
  await raw('/ui/api/logout', { method: 'POST', body: {} });
  history.replaceState(null, '', '#/overview');
  showLogin('Logged out.');
}

setUnauthorizedHandler(() => {
  if (loggedIn) {
    toast('The console session ended; log in again.', 'error');
    showLogin('Your session ended; log in again.');
  }
});

window.addEventListener('hashchange', route);
document.addEventListener('DOMContentLoaded', () => {
  $('login-form').addEventListener('submit', login);
  $('logout').addEventListener('click', logout);
  $('nav-toggle').addEventListener('click', () => {
    const open = document.body.classList.toggle('nav-open');
    $('nav-toggle').setAttribute('aria-expanded', String(open));
  });
  checkSession();
});
