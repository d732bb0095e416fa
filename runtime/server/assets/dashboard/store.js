// Store: the featured bundles as cards with an Install button, and importing a bundle file
// (what an agent's Export produced).

import { ApiError, api, chips, dataChanged, dot, enc, h, may, toast, toolChips } from './lib.js';

function installedBadge() {
  return h('span', { class: 'pill pill-completed installed' }, 'Installed');
}

function bundleCard(bundle) {
  const message = h('p', { class: 'card-msg', role: 'status' });
  const footer = h('div', { class: 'card-actions' });
  const install = h('button', {
    type: 'button', class: 'primary install', 'aria-label': `Install ${bundle.name}`,
    onclick: async () => {
      install.disabled = true;
      message.textContent = 'Installing…';
      message.className = 'card-msg';
      try {
        await api(`/store/${enc(bundle.slug)}/install`, { method: 'POST' });
        footer.replaceChildren(installedBadge(), h('a', { class: 'button ghost', href: '#/agents' }, 'See in Agents'));
        message.textContent = `${bundle.name} is now one of your agents.`;
        toast(`Installed ${bundle.name}`, 'ok');
        dataChanged();
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        if (e.status === 409) {
          footer.replaceChildren(installedBadge());
          message.textContent = `Already installed: an agent named ${bundle.name} exists.`;
          message.className = 'card-msg warn';
        } else {
          install.disabled = false;
          message.textContent = e.message;
          message.className = 'card-msg error';
        }
      }
    },
  }, 'Install');
  footer.append(bundle.installed ? installedBadge() : may('manage_agents') && install);
  return h('li', { class: 'card bundle', dataset: { slug: bundle.slug } },
    h('div', { class: 'agent-head' },
      dot(bundle.color),
      h('div', null, h('h3', { class: 'agent-name' }, bundle.name), h('p', { class: 'role' }, bundle.role))),
    h('p', { class: 'agent-desc' }, bundle.description),
    h('dl', { class: 'meta' },
      h('dt', null, 'Tools'),
      h('dd', null, bundle.recommended_tools == null
        ? h('span', { class: 'muted' }, 'every ungated tool')
        : toolChips(bundle.recommended_tools, bundle.unavailable_tools, 'no tools')),
      h('dt', null, 'Adapters'),
      h('dd', null, chips(bundle.paired_adapters, 'none')),
      bundle.recommended_model ? [h('dt', null, 'Model'), h('dd', null, h('code', null, bundle.recommended_model))] : null),
    footer,
    message);
}

function importForm(reload) {
  const status = h('p', { class: 'card-msg', role: 'status' });
  const input = h('input', {
    type: 'file', id: 'import-file', accept: '.json,application/json',
    onchange: async () => {
      const file = input.files && input.files[0];
      if (!file) return;
      status.className = 'card-msg';
      try {
        let bundle;
        try {
          bundle = JSON.parse(await file.text());
        } catch {
          throw new ApiError(400, { error: `${file.name} is not a JSON file` });
        }
        const profile = await api('/store/import', { method: 'POST', body: bundle });
        status.textContent = `Imported ${profile.name}.`;
        toast(`Imported ${profile.name}`, 'ok');
        dataChanged();
        await reload();
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        status.textContent = e.status === 409 ? `Already installed: ${e.message}` : e.message;
        status.className = 'card-msg error';
      } finally {
        input.value = '';
      }
    },
  });
  return h('section', { class: 'card import' },
    h('h2', null, 'Import a bundle'),
    h('p', { class: 'muted' }, 'A bundle file is what an agent\u2019s Export button downloads (.agent.json).'),
    h('div', { class: 'field' }, h('label', { for: 'import-file' }, 'Bundle file'), input),
    status);
}

export async function storeView(main, _route, ctx) {
  const list = h('ul', { class: 'bundle-grid', id: 'bundle-list', 'aria-label': 'Bundles' });
  const load = async () => {
    const { bundles } = await api('/store', { signal: ctx.signal });
    list.replaceChildren(...bundles.map(bundleCard));
  };
  await load();
  main.append(h('section', { class: 'view' },
    h('div', { class: 'view-header' },
      h('div', null, h('h1', { tabindex: '-1' }, 'Store'),
        h('p', { class: 'sub' }, 'Ready-made agents. Installing one adds it to your agents; it never overwrites one.'))),
    list,
    importForm(load)));
}
