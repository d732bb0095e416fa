// Schedules: read-only; they are managed with the command line.

import {
  api, emptyState, h, pill, refreshTimes, report, table, timeEl, traceLink,
} from './lib.js';

export async function schedulesView(main, _route, ctx) {
  const body = h('div', { id: 'schedule-table' });
  const load = async () => {
    const { schedules } = await api('/schedules', { signal: ctx.signal });
    if (schedules.length === 0) {
      body.replaceChildren(emptyState({
        title: 'No schedules yet',
        text: 'A schedule runs an agent with a prompt on a cron expression. Create one from a terminal:',
        action: h('code', { class: 'empty-code' }, 'service-runtime schedule create morning --cron "0 7 * * *" --agent default --prompt "Plan my day"'),
      }));
      return;
    }
    body.replaceChildren(table(
      ['Name', 'Cron', 'Agent', 'Next run', 'Catch-up', 'Enabled', 'Last run', 'Last trace'],
      schedules.map((s) => ({
        props: { dataset: { schedule: s.name } },
        cells: [
          h('strong', { title: s.prompt }, s.name),
          h('code', null, s.cron_expression),
          s.agent_profile_name,
          s.enabled && s.next_run_human
            ? h('span', { title: s.next_run_at || null }, s.next_run_human)
            : h('span', { class: 'muted' }, s.enabled ? '—' : 'paused'),
          s.catch_up_policy,
          pill(s.enabled ? 'enabled' : 'disabled'),
          timeEl(s.last_run_at),
          traceLink(s.last_trace_id),
        ],
      })),
      { caption: 'Schedules' }));
  };
  await load();
  main.append(h('section', { class: 'view' },
    h('div', { class: 'view-header' },
      h('div', null, h('h1', { tabindex: '-1' }, 'Schedules'),
        h('p', { class: 'sub' }, 'Agent runs on a cron schedule; each run is a task with its trace.')),
      h('div', { class: 'actions' },
        h('button', { type: 'button', onclick: () => load().catch(report) }, 'Refresh'))),
    h('div', { class: 'notice', id: 'schedule-note' },
      h('strong', null, 'Read-only. '),
      'Schedules are managed with the CLI: ',
      h('code', null, 'service-runtime schedule create NAME --cron EXPR --agent PROFILE --prompt TEXT'),
      ', and ', h('code', null, 'schedule list | edit | enable | disable | delete | run'), '.'),
    body));
  ctx.poll(15000, async () => {
    await load();
    refreshTimes(body);
  });
}
