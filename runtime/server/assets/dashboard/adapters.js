// Adapters: the live adapter registry, polled every 2 s so a new component or a fresh error
// shows up without a reload; Enable/Disable for adapters that have start and stop hooks.

import {
  ApiError, api, chips, empty, enc, h, pill, refreshTimes, report, table, timeEl, toast,
} from './lib.js';

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
  const running = adapter.status === 'running';
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

function errorCell(adapter) {
  if (!adapter.error_message) return h('span', { class: 'muted' }, '—');
  // One line cut with an ellipsis on wide screens, the full message on hover (title); narrow
  // screens (touch, no hover) wrap it whole.
  return h('span', { class: 'truncate error-text', title: adapter.error_message }, adapter.error_message);
}

export async function adaptersView(main, _route, ctx) {
  const body = h('div', { id: 'adapter-table' });
  const updated = h('span', { class: 'muted live', 'aria-live': 'off' });
  let last = null;

  const load = async (force = false) => {
    const { adapters } = await api('/adapters', { signal: ctx.signal });
    updated.textContent = `Live · updated ${new Date().toLocaleTimeString()}`;
    const json = JSON.stringify(adapters);
    if (json === last && !force) {
      refreshTimes(body);
      return;
    }
    last = json;
    if (adapters.length === 0) {
      body.replaceChildren(empty('No adapters are registered. Drop a WebAssembly component into the adapters folder and it shows up here.'));
      return;
    }
    const focused = document.activeElement?.dataset?.focusKey;
    body.replaceChildren(table(
      ['Name', 'Kind', 'Status', 'Last activity', 'Errors', 'Last error', 'Capabilities', ''],
      adapters.map((a) => ({
        props: { dataset: { adapter: a.name, status: a.status } },
        cells: [
          h('div', null,
            h('strong', { class: 'adapter-name' }, a.name),
            a.version ? h('span', { class: 'muted small' }, ` v${a.version}`) : null,
            a.note ? h('p', { class: 'hint adapter-note' }, a.note) : null),
          h('span', { class: `kind kind-${a.kind === 'wasm' ? 'wasm' : 'native'}` }, a.kind),
          pill(a.status),
          timeEl(a.last_activity_at, 'never'),
          h('span', { class: a.error_count > 0 ? 'error-count has-errors' : 'error-count' }, String(a.error_count)),
          errorCell(a),
          chips(a.capabilities, 'none'),
          actionCell(a, load),
        ],
      })),
      { caption: 'Adapters' }));
    if (focused) body.querySelector(`[data-focus-key="${CSS.escape(focused)}"]`)?.focus();
  };

  await load();
  main.append(h('section', { class: 'view' },
    h('div', { class: 'view-header' },
      h('div', null, h('h1', { tabindex: '-1' }, 'Adapters'),
        h('p', { class: 'sub' }, 'Adapters route outside events into agent runs. Native ones are built in; WebAssembly ones are components in the adapters folder.')),
      h('div', { class: 'actions' }, updated)),
    body));
  ctx.poll(2000, load);
}
