// Shared helpers: building DOM safely, calling the API, time formatting, toasts, the confirm
// dialog. Every string that comes from data is added as a text node, never parsed as HTML.

/** Builds an element. Children that are not nodes become text nodes. */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  append(el, children);
  for (const [key, value] of Object.entries(props || {})) {
    if (value == null || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key === 'style') Object.assign(el.style, value);
    else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'value' || key === 'checked' || key === 'selected') el[key] = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child == null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** An error answered by the API: `{"error", "field"?, "trace_id"?}`. */
export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error) || `request failed (HTTP ${status})`);
    this.status = status;
    this.field = body && body.field;
    this.traceId = body && body.trace_id;
  }

  /** True when the server does not have this endpoint (an older or newer version). */
  get unavailable() {
    return this.status === 404 && this.message === 'no such endpoint';
  }
}

async function bodyOf(response) {
  const text = await response.text();
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return { error: text.slice(0, 300) };
  }
}

const TOKEN_KEY = 'service-runtime.token';

/** The API token this browser tab signed in with: kept for the tab's session only, sent with
 * every request. A 401 forgets it and tells the shell (`dashboard:signed-out`). */
export const credential = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (token) => sessionStorage.setItem(TOKEN_KEY, token),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

/** The anti-forgery token of a session signed in with a password (`/api/me` gives it): the
 * server refuses writes made with the session cookie without it. */
let csrfToken = null;
export function setCsrfToken(token) {
  csrfToken = token || null;
}

/** The permissions of whoever this tab is signed in as (`/api/me`): controls for what the role
 * may not do are left out (the server refuses them anyway, naming the permission). `null`:
 * not known (a server that does not say), so nothing is left out. */
let permissions = null;
/** How records name whoever this tab is (`started_by`, `decided_by`): `owner`, `user:ann`. */
let ownLabel = null;
const LABEL_PREFIX = { user: 'user:', token: 'token:' };

/** Takes what `/api/me` answered (or null) as who this tab is. */
export function setSignedIn(me) {
  permissions = me && Array.isArray(me.permissions) ? new Set(me.permissions) : null;
  const principal = me && me.principal;
  ownLabel = principal ? (principal.kind === 'owner' ? 'owner' : `${LABEL_PREFIX[principal.kind] || ''}${principal.id}`) : null;
}

/** Whether this tab's role holds `permission` (`manage_agents`, `chat`, ...). */
export function may(permission) {
  return permissions === null || permissions.has(permission);
}

/** Who a record's `started_by` or `decided_by` names, as this tab says it: `you` for itself. */
export function byWhom(label) {
  return label && label === ownLabel ? 'you' : label;
}

function withCredential(headers) {
  const token = credential.get();
  if (token) headers.Authorization = `Bearer ${token}`;
  else if (csrfToken) headers['X-CSRF-Token'] = csrfToken;
  return headers;
}

function refused(response) {
  if (response.status === 401) {
    credential.clear();
    document.dispatchEvent(new CustomEvent('dashboard:signed-out'));
  }
}

/** Calls `/api{path}`; resolves with the JSON answer or rejects with an ApiError. */
export async function api(path, { method = 'GET', body, signal } = {}) {
  const init = { method, signal, headers: withCredential({ Accept: 'application/json' }) };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(`/api${path}`, init);
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { error: 'cannot reach the server' });
  }
  const data = await bodyOf(response);
  if (!response.ok) {
    refused(response);
    throw new ApiError(response.status, data);
  }
  return data;
}

/** A download link's click: the browser follows it, unless this tab signed in with a token,
 * which a link cannot carry; then the file is fetched with it and saved. */
export async function download(event) {
  if (!credential.get()) return;
  event.preventDefault();
  const link = event.currentTarget;
  const response = await fetch(link.href, { headers: withCredential({}) });
  if (!response.ok) {
    refused(response);
    throw new ApiError(response.status, await bodyOf(response));
  }
  const disposition = response.headers.get('content-disposition') || '';
  const name = (disposition.match(/filename="?([^";]+)"?/) || [])[1] || 'download';
  const url = URL.createObjectURL(await response.blob());
  const save = h('a', { href: url, download: name });
  document.body.append(save);
  save.click();
  save.remove();
  URL.revokeObjectURL(url);
}

/** POSTs `body` and reads the `text/event-stream` answer: `onFrame` gets each `data:` payload
 * parsed; `onOpen` gets the response (its headers) before the first frame. */
export async function postEventStream(path, body, { signal, onFrame, onOpen }) {
  await readEventStream(fetch(`/api${path}`, {
    method: 'POST',
    headers: withCredential({ 'Content-Type': 'application/json', Accept: 'text/event-stream' }),
    body: JSON.stringify(body),
    signal,
  }), { onFrame, onOpen });
}

/** GETs a `text/event-stream` (a run's, to follow or re-join it), as `postEventStream`. */
export async function getEventStream(path, { signal, onFrame, onOpen }) {
  await readEventStream(fetch(`/api${path}`, {
    headers: withCredential({ Accept: 'text/event-stream' }),
    signal,
  }), { onFrame, onOpen });
}

async function readEventStream(sent, { onFrame, onOpen }) {
  const response = await sent;
  if (!response.ok) {
    refused(response);
    throw new ApiError(response.status, await bodyOf(response));
  }
  if (onOpen) onOpen(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let data = [];
  const dispatch = () => {
    if (data.length) onFrame(JSON.parse(data.join('\n')));
    data = [];
  };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf('\n')) >= 0) {
      let line = buffer.slice(0, end);
      buffer = buffer.slice(end + 1);
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') dispatch();
      else if (line.startsWith('data:')) data.push(line.slice(line.startsWith('data: ') ? 6 : 5));
      // Comments (keep-alives) and other fields (the frames' ids) carry nothing for us.
    }
  }
  if (buffer.startsWith('data:')) data.push(buffer.slice(buffer.startsWith('data: ') ? 6 : 5));
  dispatch();
}

export const enc = encodeURIComponent;

const HEX_COLOR = /^#(?:[0-9a-f]{3}|[0-9a-f]{6})$/i;

/** A round color marker; data that is not a hex color gets the neutral one. */
export function dot(color, label) {
  const el = h('span', { class: 'dot', 'aria-hidden': label ? null : 'true' });
  if (color && HEX_COLOR.test(color)) el.style.background = color;
  if (label) {
    el.setAttribute('role', 'img');
    el.setAttribute('aria-label', label);
  }
  return el;
}

/** Chips for names; each keeps its text on one line (cut with … and shown whole on hover). */
export function chips(items, emptyText) {
  if (!items || items.length === 0) return h('span', { class: 'muted' }, emptyText);
  return h('span', { class: 'chips' }, items.map((item) => h('span', { class: 'chip', title: item }, item)));
}

/** Tool chips: those in `unavailable` (`[{name, reason}]`) are marked and say why on hover,
 * and the reasons are listed under them. */
export function toolChips(tools, unavailable, emptyText) {
  if (!tools || tools.length === 0) return h('span', { class: 'muted' }, emptyText);
  const why = new Map((unavailable || []).map((u) => [u.name, u.reason]));
  return h('div', { class: 'tool-chips' },
    h('span', { class: 'chips' }, tools.map((tool) => (why.has(tool)
      ? h('span', { class: 'chip chip-unavailable', title: `${tool}: unavailable, ${why.get(tool)}`, dataset: { unavailable: 'true' } }, tool)
      : h('span', { class: 'chip', title: tool }, tool)))),
    why.size ? unavailableReasons(why) : null);
}

/** One line per reason, naming the tools it holds back. */
function unavailableReasons(why) {
  const byReason = new Map();
  for (const [tool, reason] of why) byReason.set(reason, [...(byReason.get(reason) || []), tool]);
  return h('ul', { class: 'unavailable-reasons' }, [...byReason].map(([reason, tools]) => h('li', null,
    codeList(tools),
    ` unavailable: ${reason}`)));
}

/** Names as code, separated by commas. */
export function codeList(names) {
  return names.map((name, i) => [i ? ', ' : '', h('code', null, name)]);
}

/** The settings something cannot work without and lacks: `Needs A, B` (`lead` replaces
 * `Needs`). */
export function needs(variables, lead = 'Needs') {
  return h('span', { class: 'needs' }, `${lead} `, codeList(variables));
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An SVG element (for icons and charts), attributes set as given. */
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value != null) el.setAttribute(key, String(value));
  }
  append(el, children);
  return el;
}

/** One of the icons of the page's sprite (`#i-<name>`). */
export function icon(name) {
  return svg('svg', { class: 'icon', 'aria-hidden': 'true' }, svg('use', { href: `#i-${name}` }));
}

/** Tabs over a list (`[{key, label, count, href}]`), the current one marked. */
export function filterTabs(tabs, current, label) {
  return h('nav', { class: 'filter-tabs', 'aria-label': label },
    tabs.map((tab) => h('a', {
      href: tab.href,
      class: 'filter-tab',
      dataset: { filter: tab.key },
      'aria-current': tab.key === current ? 'true' : null,
    }, tab.label, h('span', { class: 'filter-count' }, String(tab.count)))));
}

/** A status pill; the class comes from a fixed list so data never picks a class name. Its text
 * is the status, or `label` when given. */
export function pill(status, label) {
  const known = ['ok', 'running', 'pending', 'completed', 'error', 'cancelled', 'stopped',
    'enabled', 'disabled', 'ready', 'connecting', 'needs-setup', 'loading', 'configured'];
  const kind = known.includes(status) ? status : 'other';
  return h('span', { class: `pill pill-${kind}` }, label || status || 'unknown');
}

export function traceLink(id, label) {
  if (!id) return h('span', { class: 'muted' }, '—');
  return h('a', { href: `#/traces/${enc(id)}`, class: 'mono', title: id }, label || id.slice(0, 8));
}

// --- time ---

export function parseTime(iso) {
  const t = iso ? Date.parse(iso) : NaN;
  return Number.isNaN(t) ? null : t;
}

/** `12 s ago`, `in 5 min`, ...; `never` when there is no time. */
export function relative(iso, now = Date.now()) {
  const t = parseTime(iso);
  if (t === null) return 'never';
  const diff = Math.round((t - now) / 1000);
  const abs = Math.abs(diff);
  let text;
  if (abs < 5) return 'just now';
  if (abs < 60) text = `${abs} s`;
  else if (abs < 3600) text = `${Math.floor(abs / 60)} min`;
  else if (abs < 86400) text = `${Math.floor(abs / 3600)} h`;
  else text = `${Math.floor(abs / 86400)} d`;
  return diff < 0 ? `${text} ago` : `in ${text}`;
}

export function absolute(iso) {
  const t = parseTime(iso);
  return t === null ? '' : new Date(t).toLocaleString();
}

/** A `<time>` showing the relative time, the exact one on hover; `data-rel` lets it be updated. */
export function timeEl(iso, fallback = 'never') {
  if (!iso) return h('span', { class: 'muted' }, fallback);
  return h('time', { datetime: iso, title: absolute(iso), dataset: { rel: iso } }, relative(iso));
}

/** Refreshes the text of every relative time under `root`. */
export function refreshTimes(root) {
  for (const el of root.querySelectorAll('time[data-rel]')) {
    el.textContent = relative(el.dataset.rel);
  }
}

export function ms(value) {
  if (value == null) return '—';
  return value < 1000 ? `${value} ms` : `${(value / 1000).toFixed(2)} s`;
}

export function truncate(text, max) {
  if (!text) return '';
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export function pretty(value) {
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

// --- page furniture ---

/** A form's error display: `clear()` empties every message; `show(field, message)` puts it under
 * that field's control (marked invalid, focused), or in `general` when no field is named. */
export function formErrors(form, inputs, general) {
  return {
    clear() {
      general.textContent = '';
      for (const el of form.querySelectorAll('.field-error')) el.textContent = '';
      for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
    },
    show(name, message) {
      const target = name && form.querySelector(`[data-error-for="${name}"]`);
      if (!target) {
        general.textContent = message;
        return;
      }
      target.textContent = message;
      inputs[name].setAttribute('aria-invalid', 'true');
      inputs[name].focus();
    },
  };
}

/** A labelled form control with its hint and a place for its error (`data-error-for`), ids
 * prefixed by the form's `prefix`. */
export function formField(prefix, name, label, control, hint) {
  const errorId = `${prefix}-${name}-error`;
  control.id = `${prefix}-${name}`;
  control.name = name;
  control.setAttribute('aria-describedby', hint ? `${errorId} ${prefix}-${name}-hint` : errorId);
  return h('div', { class: 'field', dataset: { field: name } },
    h('label', { for: control.id }, label),
    control,
    hint ? h('p', { class: 'hint', id: `${prefix}-${name}-hint` }, hint) : null,
    h('p', { class: 'field-error', id: errorId, dataset: { errorFor: name } }));
}

/** The box shown when loading failed, or when the server lacks the endpoint. */
export function problem(error) {
  if (error instanceof ApiError && error.unavailable) {
    return h('div', { class: 'notice', role: 'status' },
      h('strong', null, 'Not available'),
      ' — this server version does not offer this section yet.');
  }
  return h('div', { class: 'error-box', role: 'alert' }, error.message || String(error));
}

/** Draws the eye to an element just arrived at: scrolled into view, its border flashing. */
export function spotlight(el, block = 'nearest') {
  el.classList.add('flash');
  el.scrollIntoView({ block });
}

export function empty(text) {
  return h('p', { class: 'empty' }, text);
}

/** An empty list that says what to do next: a title, a line, and an action (a link or code). */
export function emptyState({ title, text, action }) {
  return h('div', { class: 'empty empty-state', role: 'status' },
    icon('empty'),
    h('p', { class: 'empty-title' }, title),
    text ? h('p', { class: 'empty-text' }, text) : null,
    action || null);
}

export function toast(message, kind = 'info') {
  const region = document.getElementById('toasts');
  const el = h('div', { class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status' }, message);
  region.append(el);
  setTimeout(() => el.remove(), kind === 'error' ? 8000 : 4000);
}

/** A modal confirm dialog; resolves true when the user confirms. */
export function confirmDialog({ title, message, confirmLabel = 'Confirm' }) {
  const dialog = document.getElementById('confirm');
  dialog.querySelector('#confirm-title').textContent = title;
  dialog.querySelector('#confirm-message').textContent = message;
  dialog.querySelector('#confirm-ok').textContent = confirmLabel;
  dialog.returnValue = '';
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'confirm'), { once: true });
    dialog.showModal();
    dialog.querySelector('#confirm-cancel').focus();
  });
}

/** A table that turns into labelled cards on narrow screens. A row is a list of cells or
 * `{cells, props}` (props for the `<tr>`). */
export function table(columns, rows, { caption } = {}) {
  return h('div', { class: 'table-wrap' },
    h('table', { class: 'data' },
      caption ? h('caption', { class: 'sr-only' }, caption) : null,
      h('thead', null, h('tr', null, columns.map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, rows.map((row) => {
        const { cells, props } = Array.isArray(row) ? { cells: row } : row;
        const tr = h('tr', props);
        cells.forEach((cell, i) => tr.append(h('td', { 'data-label': columns[i] }, cell)));
        return tr;
      }))));
}

/** Tells the shell that counts may have changed (it refreshes the header). */
export function dataChanged() {
  document.dispatchEvent(new Event('dashboard:changed'));
}

/** For promises nobody awaits (event handlers): shows a failure, ignores an aborted view. */
export function report(error) {
  if (error && error.name === 'AbortError') return;
  toast(error && error.message ? error.message : String(error), 'error');
}
