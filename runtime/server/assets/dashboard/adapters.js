// Adapters: the live adapter registry as cards, polled every 2 s so a new component or a fresh
// error shows up without a reload; filter tabs by status; Enable/Disable for adapters that
// have start and stop hooks; for one waiting for settings (or refusing a wrong one), what it
// needs and a link to its integration on the Settings tab. Below them, the MCP servers whose
// tools agents may use and the remote A2A agents whose skills they may call. A component's
// recorded calls open from its card (`recordings.js`).

import {
  ApiError, api, chips, empty, emptyState, enc, filterTabs, h, may, needs, pill, refreshTimes, report,
  timeEl, toast,
} from './lib.js';
import { recordingsView } from './recordings.js';

// The API's statuses are the specification's three; an adapter waiting for settings is
// `error` there (with `missing_settings`), shown here as "needs setup" in grey, not a failure.
const STATUSES = ['running', 'stopped', 'needs-setup', 'error'];

/** The status the dashboard shows: `needs-setup` for an adapter waiting for settings,
 * `loading` for a component still compiling, else the API's. */
function shownStatus(adapter) {
  if (adapter.status === 'error' && adapter.missing_settings?.length) return 'needs-setup';
  if (adapter.phase === 'loading') return 'loading';
  return adapter.status;
}

const NO_TOGGLE = 'This adapter has no start and stop hooks, so it cannot be enabled or disabled; it runs while the server runs.';

async function toggle(adapter, enable, button, reload) {
  button.disabled = true;
  button.textContent = enable ? 'Enabling…' : 'Disabling…';
  try {
    const entry = await api(`/adapters/${enc(adapter.name)}/${enable ? 'enable' : 'disable'}`, { method: 'POST' });
    toast(`${entry.name} is ${entry.status}`, 'ok');
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    toast(`${adapter.name}: ${e.message}`, 'error');
  }
  await reload(true);
  // The button was replaced while disabled; give the keyboard user its successor.
  document.querySelector(`[data-focus-key="${CSS.escape(button.dataset.focusKey)}"]`)?.focus();
}

function actionCell(adapter, reload) {
  if (!may('manage_adapters')) return null;
  // Enable is for an adapter that is off; one running, failing or waiting for settings can be
  // turned off.
  const running = adapter.status !== 'stopped';
  const label = running ? 'Disable' : 'Enable';
  if (!adapter.supports_toggle) {
    const id = `no-toggle-${adapter.name.replace(/[^A-Za-z0-9_-]/g, '_')}`;
    return h('div', { class: 'toggle' },
      h('button', { type: 'button', class: 'small', disabled: true, title: NO_TOGGLE, 'aria-describedby': id }, label),
      h('span', { class: 'hint', id }, 'No start/stop hooks'));
  }
  const button = h('button', {
    type: 'button',
    class: `small toggle-button ${running ? 'danger-ghost' : 'primary'}`,
    dataset: { focusKey: `toggle:${adapter.name}`, action: running ? 'disable' : 'enable' },
    'aria-label': `${label} ${adapter.name}`,
  }, label);
  button.addEventListener('click', () => toggle(adapter, !running, button, reload).catch(report));
  return h('div', { class: 'toggle' }, button);
}

/** What the adapter reports beyond its status: jobs waiting, imports it was granted nothing
 * of, a shadow build beside it, log lines it lost to the rate limit. */
function facts(adapter) {
  const meta = adapter.metadata || {};
  const items = [];
  if (adapter.pending_jobs > 0) {
    items.push(h('span', { class: 'pill pill-pending fact', dataset: { fact: 'pending_jobs' } },
      `${adapter.pending_jobs} job${adapter.pending_jobs === 1 ? '' : 's'} waiting`));
  }
  if (meta.ungranted_imports) {
    items.push(h('span', {
      class: 'pill pill-warn fact', dataset: { fact: 'ungranted_imports' },
      title: 'Interfaces the component imports but was granted nothing of; calls to them fail.',
    }, `ungranted: ${meta.ungranted_imports}`));
  }
  if (meta.shadow) {
    items.push(h('a', {
      class: 'pill pill-pending fact', dataset: { fact: 'shadow' }, href: `#/adapters/${enc(adapter.name)}`,
      title: 'A new build runs beside this one on its calls and is compared; see Recordings.',
    }, `shadow: ${meta.shadow}`));
  }
  if (meta.log_lines_dropped) {
    items.push(h('span', {
      class: 'pill pill-warn fact', dataset: { fact: 'log_lines_dropped' },
      title: 'Log lines over the rate limit, dropped.',
    }, `${meta.log_lines_dropped} log lines dropped`));
  }
  return items.length ? h('div', { class: 'facts' }, items) : null;
}

function errorCell(adapter) {
  if (!adapter.error_message) return h('span', { class: 'muted' }, '—');
  // One line cut with an ellipsis on wide screens, the full message on hover (title); narrow
  // screens (touch, no hover) wrap it whole. An adapter no longer in error shows its last
  // error muted, as history, and so does one that only waits for settings (not a failure).
  const current = shownStatus(adapter) === 'error';
  return h('span', { class: `truncate ${current ? 'error-text' : 'muted'}`, title: adapter.error_message },
    adapter.error_at ? [timeEl(adapter.error_at), ': '] : null, adapter.error_message);
}

/** The adapters whose capabilities someone opened, kept open across live refreshes. */
const openCapabilities = new Set();

/** Capabilities behind their count (names like origin:https://slack.com:443 are long). */
function capabilities(adapter, cell) {
  const list = adapter.capabilities || [];
  const details = h('details', { class: 'capabilities', open: openCapabilities.has(adapter.name) || null },
    h('summary', { class: 'caps-label' }, 'Capabilities ', h('span', { class: 'count', dataset: { count: 'capabilities' } }, String(list.length))),
    cell('capabilities', 'div', null, chips(list, 'none')));
  details.addEventListener('toggle', () => {
    if (details.open) openCapabilities.add(adapter.name);
    else openCapabilities.delete(adapter.name);
  });
  return details;
}

/** Whether the adapter's settings keep it from working: missing, or one it refused. */
function needsSettings(adapter) {
  return adapter.status === 'error' && Boolean(adapter.error_message?.startsWith('ConfigError'));
}

/** A link to the adapter's integration on the Settings tab, when settings are what it lacks. */
function setupLink(adapter, integrations) {
  if (!needsSettings(adapter) || !integrations.has(adapter.name)) return null;
  return h('a', {
    class: 'button small primary', href: `#/settings/${enc(adapter.name)}`, dataset: { action: 'setup' },
    'aria-label': `Set up ${adapter.name}`,
  }, 'Set up');
}

/** A component's recorded calls, for those who may read them. */
function recordingsLink(adapter) {
  if (adapter.kind !== 'wasm' || !may('manage_adapters')) return null;
  return h('a', {
    class: 'button small', href: `#/adapters/${enc(adapter.name)}`, dataset: { action: 'recordings' },
    'aria-label': `Recordings of ${adapter.name}`,
  }, 'Recordings');
}

/** One adapter. Its parts carry `data-cell` in a fixed order (name, kind, status, activity,
 * errors, error, capabilities, action), whatever the layout. `integrations` holds the ids of
 * the integrations, which are also the names of the adapters they configure. */
function adapterCard(a, reload, integrations) {
  const cell = (name, tag, props, ...content) => h(tag, { ...props, dataset: { cell: name } }, ...content);
  const row = (label, name, content) => [h('dt', null, label), cell(name, 'dd', null, content)];
  const shown = shownStatus(a);
  return h('li', { class: 'card adapter-card', dataset: { adapter: a.name, status: shown } },
    h('div', { class: 'adapter-top' },
      cell('name', 'div', { class: 'adapter-title' },
        h('strong', { class: 'adapter-name' }, a.name),
        a.version ? h('span', { class: 'muted small' }, ` v${a.version}`) : null,
        a.note ? h('p', { class: 'hint adapter-note' }, a.note) : null,
        facts(a)),
      cell('kind', 'span', { class: `kind kind-${a.kind === 'wasm' ? 'wasm' : 'native'}` }, a.kind),
      cell('status', 'span', null, pill(shown, shown.replace('-', ' ')))),
    a.missing_settings?.length ? h('p', { class: 'setup' }, needs(a.missing_settings)) : null,
    h('dl', { class: 'meta' },
      row('Last activity', 'activity', timeEl(a.last_activity_at, 'never')),
      row('Errors', 'errors', h('span', { class: a.error_count > 0 && shown === 'error' ? 'error-count has-errors' : 'error-count' }, String(a.error_count))),
      row('Last error', 'error', errorCell(a))),
    capabilities(a, cell),
    cell('action', 'div', { class: 'card-actions' }, setupLink(a, integrations), recordingsLink(a), actionCell(a, reload)));
}

/** One MCP server: its state, what it offers, and its last error. */
function mcpCard(server) {
  const row = (label, name, content) => [h('dt', null, label), h('dd', { dataset: { cell: name } }, content)];
  const offered = server.state === 'ready' || server.tools > 0
    ? `${server.tools} tool${server.tools === 1 ? '' : 's'}`
    : '—';
  return h('li', { class: 'card mcp-card', dataset: { mcpServer: server.name, state: server.state } },
    h('div', { class: 'mcp-top' },
      h('div', null, h('strong', null, server.name), h('span', { class: 'muted small' }, ` ${server.transport}`)),
      pill(server.state)),
    h('dl', { class: 'meta' },
      row('Tools', 'tools', h('span', { title: `named mcp__${server.name}__<tool>; an agent gets them by listing them, or mcp__${server.name}__*` }, offered)),
      row('Server', 'server', server.server
        ? h('span', null, server.server, h('span', { class: 'muted small' }, ` · MCP ${server.protocol_version}`))
        : h('span', { class: 'muted' }, '—')),
      row('Restarts', 'restarts', String(server.restarts)),
      row('Last error', 'error', server.error
        ? h('span', null, h('span', { class: 'truncate error-text', title: server.error }, server.error), ' ', timeEl(server.error_at))
        : h('span', { class: 'muted' }, '—'))),
    server.skipped.length
      ? h('p', { class: 'hint' }, `Not used: ${server.skipped.join('; ')}`)
      : null);
}

function mcpSection(servers) {
  if (servers.length === 0) return null;
  return h('section', { class: 'mcp-section', 'aria-labelledby': 'mcp-title' },
    h('h2', { id: 'mcp-title' }, 'MCP servers'),
    h('p', { class: 'sub' }, 'Tools from Model Context Protocol servers ([mcp.servers] in config.toml). Agents get them only by naming them.'),
    h('ul', { class: 'mcp-grid', 'aria-label': 'MCP servers' }, servers.map(mcpCard)));
}

/** One remote A2A agent: its state, its skills offered as tools, its card's or last call's error. */
function a2aCard(agent) {
  const row = (label, name, content) => [h('dt', null, label), h('dd', { dataset: { cell: name } }, content)];
  const failure = (error, at) => (error
    ? h('span', null, h('span', { class: 'truncate error-text', title: error }, error), ' ', timeEl(at))
    : h('span', { class: 'muted' }, '—'));
  const offered = agent.state === 'ready' || agent.tools > 0
    ? `${agent.tools} skill${agent.tools === 1 ? '' : 's'}`
    : '—';
  return h('li', { class: 'card mcp-card a2a-card', dataset: { a2aAgent: agent.name, state: agent.state } },
    h('div', { class: 'mcp-top' },
      h('div', null, h('strong', null, agent.name), h('span', { class: 'muted small' }, agent.streaming ? ' streams' : '')),
      pill(agent.state)),
    h('dl', { class: 'meta' },
      row('Skills', 'tools', h('span', { title: `named a2a__${agent.name}__<skill>; an agent gets them by listing them, or a2a__${agent.name}__*` }, offered)),
      row('Agent', 'agent', agent.agent ? h('span', { title: agent.endpoint }, agent.agent) : h('span', { class: 'muted' }, '—')),
      row('Calls', 'calls', `${agent.calls} (${agent.failed_calls} failed)`),
      row('Card error', 'error', failure(agent.error, agent.error_at)),
      row('Last failed call', 'call-error', failure(agent.last_call_error, agent.last_call_error_at))),
    agent.skipped.length
      ? h('p', { class: 'hint' }, `Not used: ${agent.skipped.join('; ')}`)
      : null);
}

function a2aSection(agents) {
  if (agents.length === 0) return null;
  return h('section', { class: 'mcp-section', 'aria-labelledby': 'a2a-title' },
    h('h2', { id: 'a2a-title' }, 'A2A agents'),
    h('p', { class: 'sub' }, 'Skills of remote agents reached over Agent2Agent ([a2a.agents] in config.toml). Agents get them only by naming them.'),
    h('ul', { class: 'mcp-grid', 'aria-label': 'A2A agents' }, agents.map(a2aCard)));
}

export async function adaptersView(main, route, ctx) {
  if (route.args[0]) {
    await recordingsView(main, route, ctx);
    return;
  }
  const wanted = route.params.get('status');
  const status = STATUSES.includes(wanted) ? wanted : '';
  const tabs = h('div', { id: 'adapter-filter' });
  const body = h('div', { id: 'adapter-table' });
  const mcp = h('div', { id: 'mcp-servers' });
  let lastMcp = null;
  const updated = h('span', { class: 'muted live', 'aria-live': 'off' });
  let last = null;
  // Fetched once: which adapters an integration on the Settings tab configures.
  const integrations = await api('/integrations', { signal: ctx.signal })
    .then((r) => new Set(r.integrations.map((i) => i.id)), () => new Set());

  const load = async (force = false) => {
    const [{ adapters }, { servers }, { agents }] = await Promise.all([
      api('/adapters', { signal: ctx.signal }),
      api('/mcp/servers', { signal: ctx.signal }),
      api('/a2a/agents', { signal: ctx.signal }),
    ]);
    const mcpJson = JSON.stringify([servers, agents]);
    if (mcpJson !== lastMcp) {
      lastMcp = mcpJson;
      mcp.replaceChildren(...[mcpSection(servers), a2aSection(agents)].filter(Boolean));
    } else {
      refreshTimes(mcp);
    }
    updated.textContent = `Live · updated ${new Date().toLocaleTimeString()}`;
    const json = JSON.stringify(adapters);
    if (json === last && !force) {
      refreshTimes(body);
      return;
    }
    last = json;
    // A loading component counts as stopped, which it is.
    const filterOf = (a) => (shownStatus(a) === 'loading' ? 'stopped' : shownStatus(a));
    const count = (s) => adapters.filter((a) => filterOf(a) === s).length;
    tabs.replaceChildren(filterTabs([
      { key: '', label: 'All', count: adapters.length, href: '#/adapters' },
      ...STATUSES.map((s) => ({ key: s, label: s.replace('-', ' '), count: count(s), href: `#/adapters?status=${s}` })),
    ], status, 'Filter by status'));
    const shown = status ? adapters.filter((a) => filterOf(a) === status) : adapters;
    if (adapters.length === 0) {
      body.replaceChildren(emptyState({
        title: 'No adapters are registered',
        text: 'Drop a WebAssembly component and its grant into the adapters folder of the data directory, or install one:',
        action: h('code', { class: 'empty-code' }, 'service-runtime adapters install my-adapter.wasm --grant my-adapter.toml'),
      }));
      return;
    }
    if (shown.length === 0) {
      body.replaceChildren(empty(status === 'needs-setup' ? 'No adapter needs setting up.' : `No adapter is ${status}.`));
      return;
    }
    const focused = document.activeElement?.dataset?.focusKey;
    body.replaceChildren(h('ul', { class: 'adapter-grid', 'aria-label': 'Adapters' },
      shown.map((a) => adapterCard(a, load, integrations))));
    if (focused) body.querySelector(`[data-focus-key="${CSS.escape(focused)}"]`)?.focus();
  };

  await load();
  main.append(h('section', { class: 'view' },
    h('div', { class: 'view-header' },
      h('div', null, h('h1', { tabindex: '-1' }, 'Adapters'),
        h('p', { class: 'sub' }, 'Adapters route outside events into agent runs. Native ones are built in; WebAssembly ones are components in the adapters folder.')),
      h('div', { class: 'actions' }, updated)),
    tabs,
    body,
    mcp));
  ctx.poll(2000, load);
}
