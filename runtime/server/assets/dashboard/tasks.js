// Tasks: the task records (adapters, jobs and the scheduler create them), a status filter, and a
// guarded cancel/delete.

import {
  ApiError, api, confirmDialog, dataChanged, empty, enc, h, pill, refreshTimes, report, table,
  timeEl, toast, traceLink,
} from './lib.js';

const STATUSES = ['pending', 'running', 'completed', 'error', 'cancelled'];
const ACTIVE = ['pending', 'running'];

async function remove(task, reload) {
  const active = ACTIVE.includes(task.status);
  const ok = await confirmDialog({
    title: active ? 'Cancel this task?' : 'Delete this task?',
    message: active
      ? `“${task.title}” is ${task.status}. Cancelling stops its run; the record stays, marked cancelled.`
      : `“${task.title}” and its record will be deleted. Its trace is kept.`,
    confirmLabel: active ? 'Cancel task' : 'Delete task',
  });
  if (!ok) return;
  try {
    const answer = await api(`/tasks/${enc(task.task_id)}`, { method: 'DELETE' });
    toast(answer.result === 'cancelled' ? `Cancelled “${task.title}”` : `Deleted “${task.title}”`, 'ok');
    dataChanged();
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    toast(e.status === 403 ? `Refused: ${e.message}` : e.message, 'error');
  }
  await reload();
}

export async function tasksView(main, route, ctx) {
  const status = STATUSES.includes(route.params.get('status')) ? route.params.get('status') : '';
  const filter = h('select', {
    id: 'task-filter', name: 'status',
    onchange: () => {
      location.hash = filter.value ? `#/tasks?status=${filter.value}` : '#/tasks';
    },
  },
  h('option', { value: '' }, 'All'),
  STATUSES.map((s) => h('option', { value: s }, s)));
  filter.value = status;
  const body = h('div', { id: 'task-table' });
  let last = null;

  const load = async () => {
    const { tasks } = await api(`/tasks${status ? `?status=${status}` : ''}`, { signal: ctx.signal });
    const json = JSON.stringify(tasks);
    if (json === last) {
      refreshTimes(body);
      return;
    }
    last = json;
    if (tasks.length === 0) {
      body.replaceChildren(empty(status
        ? `No ${status} tasks.`
        : 'No tasks yet. Adapters, jobs and schedules create tasks when they run agents.'));
      return;
    }
    const focused = document.activeElement?.dataset?.focusKey;
    body.replaceChildren(table(
      ['Title', 'Status', 'Agent', 'Created', 'Updated', 'Trace', ''],
      tasks.map((task) => ({
        props: { dataset: { task: task.task_id, status: task.status } },
        cells: [
          h('span', { class: 'task-title', title: task.description || null }, task.title),
          pill(task.status),
          task.agent_profile_name || h('span', { class: 'muted' }, '—'),
          timeEl(task.created_at),
          timeEl(task.updated_at),
          traceLink(task.trace_id),
          h('button', {
            type: 'button', class: 'small danger-ghost task-remove',
            dataset: { focusKey: `remove:${task.task_id}` },
            'aria-label': `${ACTIVE.includes(task.status) ? 'Cancel' : 'Delete'} task ${task.title}`,
            onclick: () => remove(task, load).catch(report),
          }, ACTIVE.includes(task.status) ? 'Cancel' : 'Delete'),
        ],
      })),
      { caption: 'Tasks' }));
    if (focused) body.querySelector(`[data-focus-key="${CSS.escape(focused)}"]`)?.focus();
  };

  await load();
  main.append(h('section', { class: 'view' },
    h('div', { class: 'view-header' },
      h('div', null, h('h1', { tabindex: '-1' }, 'Tasks'),
        h('p', { class: 'sub' }, 'Work that adapters, jobs and schedules started. Refreshes every few seconds.')),
      h('div', { class: 'actions' },
        h('div', { class: 'field inline' }, h('label', { for: 'task-filter' }, 'Status'), filter),
        h('button', { type: 'button', id: 'task-refresh', onclick: () => load().catch(report) }, 'Refresh'))),
    body));
  ctx.poll(3000, load);
}
