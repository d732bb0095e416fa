// The audit log (admins): every change and sign-in, newest first, filtered by who or what.

import { api, emptyState, h, pill, table, timeEl } from './lib.js';

export async function auditView(main, route, ctx) {
  const principal = h('input', { id: 'audit-principal', placeholder: 'user:ada, token:ci, owner', value: route.params.get('principal') || '' });
  const action = h('input', { id: 'audit-action', placeholder: 'POST /api/agents, credential refused', value: route.params.get('action') || '' });
  const body = h('div', { id: 'audit-table' });
  const load = async () => {
    const query = new URLSearchParams({ limit: '200' });
    if (principal.value.trim()) query.set('principal', principal.value.trim());
    if (action.value.trim()) query.set('action', action.value.trim());
    const { entries, total } = await api(`/audit?${query}`, { signal: ctx.signal });
    body.replaceChildren(entries.length === 0
      ? emptyState({ title: 'Nothing recorded', text: 'Changes, sign-ins and refused credentials appear here.' })
      : h('div', null,
        h('p', { class: 'sub' }, `${entries.length} of ${total}`),
        table(['When', 'Who', 'Role', 'Action', 'Target', 'Status', 'From'], entries.map((e) => [
          timeEl(e.at), e.principal || h('span', { class: 'muted' }, 'nobody'), e.role || '—', e.action, e.target,
          pill(e.status < 400 ? 'completed' : 'error', String(e.status)), `${e.peer} · ${e.replica}`,
        ]), { caption: 'Audit log' })));
  };
  const filter = h('form', { class: 'filters', id: 'audit-filter', onsubmit: (event) => { event.preventDefault(); load(); } },
    h('label', null, 'Who ', principal), h('label', null, 'Action ', action),
    h('button', { type: 'submit' }, 'Filter'));
  await load();
  main.append(h('section', { class: 'view' },
    h('div', { class: 'view-header' },
      h('div', null, h('h1', { tabindex: '-1' }, 'Audit'),
        h('p', { class: 'sub' }, 'Every change, sign-in and refused credential: who, what, from where. Never a secret.'))),
    filter, body));
  ctx.poll(5000, load);
}
