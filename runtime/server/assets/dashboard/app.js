// The dashboard shell: hash routing between the tabs, the header's provider status, and the
// lifecycle (polling, aborting) of the view on screen.

import { api, credential, h, may, problem, setCsrfToken, setSignedIn, toast } from './lib.js';
import { signinView } from './signin.js';
import { chatView } from './chat.js';
import { agentsView } from './agents.js';
import { storeView } from './store.js';
import { tasksView } from './tasks.js';
import { adaptersView } from './adapters.js';
import { schedulesView } from './schedules.js';
import { tracesView } from './traces.js';
import { settingsView } from './settings.js';
import { accessView } from './access.js';
import { auditView } from './audit.js';

const VIEWS = {
  chat: chatView,
  agents: agentsView,
  store: storeView,
  tasks: tasksView,
  adapters: adaptersView,
  schedules: schedulesView,
  traces: tracesView,
  settings: settingsView,
  access: accessView,
  audit: auditView,
};
const TITLES = {
  chat: 'Chat', agents: 'Agents', store: 'Store', tasks: 'Tasks', adapters: 'Adapters',
  schedules: 'Schedules', traces: 'Traces', settings: 'Settings', access: 'People & tokens',
  audit: 'Audit',
};

const main = document.getElementById('main');

/** `#/tab/arg?key=value` → `{tab, args, params}`. */
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, query] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map((p) => {
    try {
      return decodeURIComponent(p);
    } catch {
      return p;
    }
  });
  return { tab: parts[0] || 'chat', args: parts.slice(1), params: new URLSearchParams(query || '') };
}

/** What a view gets besides its container: an abort signal and timers that end with it. */
class ViewContext {
  constructor() {
    this.controller = new AbortController();
    this.timers = new Set();
  }

  get signal() {
    return this.controller.signal;
  }

  get active() {
    return !this.controller.signal.aborted;
  }

  /** Runs `fn` every `ms` (waiting for it to finish) while the view is on screen. */
  poll(ms, fn) {
    const tick = async () => {
      if (!this.active) return;
      if (!document.hidden) {
        try {
          await fn();
        } catch (e) {
          if (e.name !== 'AbortError') console.warn('refresh failed:', e.message);
        }
      }
      if (this.active) this.timers.add(setTimeout(tick, ms));
    };
    this.timers.add(setTimeout(tick, ms));
  }

  end() {
    this.controller.abort();
    for (const timer of this.timers) clearTimeout(timer);
  }
}

let context = null;
let firstRender = true;
/** What `/api/me` said: who this tab is, and whether the server asks everyone to sign in. */
let me = null;

/** Shows who is signed in, with a way out for a tab that signed in with a token. */
function showWho() {
  const who = document.getElementById('who');
  const principal = me && me.principal;
  // Tabs the role may not read are left out; the admins' until the server says who this is.
  for (const link of document.querySelectorAll('.sidebar [data-needs]')) {
    link.hidden = !may(link.dataset.needs) || (!principal && 'admin' in link.dataset);
  }
  who.hidden = !principal || principal.kind === 'owner';
  if (who.hidden) return;
  who.replaceChildren(
    h('span', { id: 'who-name', title: `role: ${principal.role}` }, `${principal.name} · ${principal.role}`),
    h('button', { type: 'button', class: 'ghost', id: 'sign-out', onclick: signOut }, 'Sign out'));
}

async function signOut() {
  if (me.principal.kind === 'user') {
    try {
      await api('/session', { method: 'DELETE' });
    } catch (e) {
      toast(`Cannot sign out: ${e.message}`, 'error');
      return;
    }
  }
  credential.clear();
  took({ principal: null, sign_in_required: true });
  showWho();
  render();
}

/** Takes what `/api/me` answered as who this tab is. */
function took(answer) {
  me = answer;
  setCsrfToken(me && me.csrf_token);
  setSignedIn(me);
}

/** The secret of a one-time link this tab was opened with (`/#link=...`), taken out of the
 * address bar and history at once. */
let link = null;
if (location.hash.startsWith('#link=')) {
  link = location.hash.slice('#link='.length);
  history.replaceState(null, '', '#/chat');
}

async function render() {
  if (link || (me && !me.principal)) {
    if (context) context.end();
    context = null;
    document.title = 'Sign in · service-runtime';
    signinView(main, (signedIn) => {
      link = null;
      took(signedIn);
      showWho();
      refreshHealth();
      render();
    }, { link, singleSignOn: me && me.single_sign_on });
    return;
  }
  const route = parseHash();
  const offered = [...document.querySelectorAll('.sidebar a[data-tab]')].filter((a) => !a.hidden);
  if (!VIEWS[route.tab] || !offered.some((a) => a.dataset.tab === route.tab)) {
    // Chat, or the first tab the role may read (a viewer's: Tasks).
    location.replace(`#/${offered[0] ? offered[0].dataset.tab : 'chat'}`);
    return;
  }
  if (context) context.end();
  const ctx = new ViewContext();
  context = ctx;
  for (const link of document.querySelectorAll('.sidebar a[data-tab]')) {
    if (link.dataset.tab === route.tab) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  document.title = `${TITLES[route.tab]} · service-runtime`;
  main.replaceChildren();
  main.dataset.view = route.tab;
  delete main.dataset.ready;
  try {
    await VIEWS[route.tab](main, route, ctx);
  } catch (e) {
    if (e.name === 'AbortError' || !ctx.active) return;
    main.append(problem(e));
  }
  if (!ctx.active) return;
  main.dataset.ready = route.tab;
  // Moving focus to the new heading tells keyboard and screen reader users the page changed.
  if (!firstRender && !main.contains(document.activeElement)) {
    const heading = main.querySelector('h1');
    if (heading) heading.focus({ preventScroll: true });
  }
  firstRender = false;
}

// --- header ---

/** What to do about the provider, said to those who may do it (others ask an admin). */
const providerHelp = () => (may('manage_settings')
  ? 'Choose a provider and set its key on the Settings tab (or set SERVICE_PROVIDER); the next run uses it.'
  : 'An admin chooses the provider and sets its key on the Settings tab.');

async function refreshHealth() {
  const text = document.getElementById('provider-text');
  const state = document.getElementById('provider-state');
  const banner = document.getElementById('provider-warning');
  try {
    const health = await api('/health');
    if (!health.provider) {
      text.textContent = 'sign in to see the provider';
      state.className = 'provider-state';
      return;
    }
    const { name, model, configured } = health.provider;
    text.textContent = name === model ? name : `${name} · ${model}`;
    const offline = name === 'offline';
    state.className = `provider-state ${offline || !configured ? 'warn' : 'ok'}`;
    document.getElementById('provider').title = `LLM provider: ${name}, model: ${model}`;
    const candidates = health.provider.with_settings || [];
    if (offline && candidates.length > 1) {
      banner.textContent = `Offline provider: several providers have settings (${candidates.join(', ')}); choose one on the Settings tab (Model provider).`;
    } else if (offline) {
      banner.textContent = `Offline provider: answers are canned, not from a real model. ${providerHelp()}`;
    } else if (!configured) {
      banner.textContent = `The ${name} provider is not configured, so agent runs will fail. Set its API key or base URL (see the documentation, LLM providers).`;
    }
    banner.hidden = !(offline || !configured);
    document.getElementById('version').textContent =
      `v${health.version} · schema ${health.schema_version}`;
    for (const el of document.querySelectorAll('[data-count]')) {
      const count = health.counts[el.dataset.count];
      el.textContent = count == null || (count === 0 && 'hideZero' in el.dataset) ? '' : String(count);
    }
  } catch (e) {
    text.textContent = 'server unreachable';
    state.className = 'provider-state error';
  }
}

// --- start ---

window.addEventListener('error', (event) => toast(`Dashboard error: ${event.message}`, 'error'));
window.addEventListener('unhandledrejection', (event) => {
  if (event.reason && event.reason.name === 'AbortError') return;
  toast(`Dashboard error: ${event.reason && event.reason.message}`, 'error');
});
document.getElementById('skip').addEventListener('click', () => {
  const heading = main.querySelector('h1');
  (heading || main).focus();
});
window.addEventListener('hashchange', render);
if (!location.hash || location.hash === '#' || location.hash === '#/') {
  history.replaceState(null, '', '#/chat');
}
document.addEventListener('dashboard:changed', refreshHealth);
// A request refused for want of a credential (a token revoked or expired meanwhile).
document.addEventListener('dashboard:signed-out', () => {
  if (!me || !me.principal) return;
  took({ principal: null, sign_in_required: true });
  showWho();
  render();
});
(async () => {
  try {
    took(await api('/me'));
  } catch {
    took(null);
  }
  showWho();
  refreshHealth();
  setInterval(refreshHealth, 15000);
  render();
})();
