// What the signed-in operator holds (the console session's `roles`): pages and controls a
// role does not allow are not shown. Root refuses them either way (403 role_required); this
// only keeps the console from offering what would be refused.

let held = new Set();

/** The roles the session holds (`admin` holds every role, every operator `viewer`). */
export function setRoles(roles) { held = new Set(roles || []); }

/** Whether the session holds `role`. */
export function holds(role) { return role === 'viewer' || held.has('admin') || held.has(role); }
