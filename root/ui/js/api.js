// The REST family, as the console calls it: same-origin fetch with the session cookie; every
// state-changing request carries the session's CSRF token header.

let csrfToken = null;
let onUnauthorized = () => {};

export function setCsrf(token) { csrfToken = token; }
export function setUnauthorizedHandler(f) { onUnauthorized = f; }

export class ApiError extends Error {
  constructor(status, body) {
    const e = body && body.error;
    super(e && e.message ? `${e.code}: ${e.message}` : `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

/** A request answered with `{status, body}` whatever the status (tool results carry errors). */
export async function raw(path, { method = 'GET', body } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD') headers['X-MCP-Console-CSRF'] = csrfToken || '';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
    cache: 'no-store',
    redirect: 'error',
  });
  const text = await res.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = { raw: text }; }
  }
  if (res.status === 401 && !path.startsWith('/ui/api/login')) onUnauthorized();
  return { status: res.status, body: data };
}

/** A request that throws ApiError unless it succeeded. */
export async function api(path, opts) {
  const r = await raw(path, opts);
  if (r.status < 200 || r.status >= 300) throw new ApiError(r.status, r.body);
  return r.body;
}

export const get = (path) => api(path);
export const post = (path, body) => api(path, { method: 'POST', body: body === undefined ? {} : body });

/** Query string from an object, skipping empty values. */
export function qs(params) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') p.set(k, v);
  }
  const s = p.toString();
  return s ? `?${s}` : '';
}

/** A read of a target's tool through root's governed path (an operator reader lease). */
export function readTool(targetId, toolId, args = {}) {
  return raw(`/v1/root/hubs/${encodeURIComponent(targetId)}/read`, {
    method: 'POST',
    body: { tool_id: toolId, arguments: args },
  });
}
