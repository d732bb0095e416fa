// Tasks: the task records (adapters, jobs and the scheduler create them), a status filter, a
// guarded cancel/delete, and Approve/Deny on a task whose run waits for a person.

import {
  ApiError, api, byWhom, confirmDialog, dataChanged, empty, emptyState, enc, filterTabs, h, may, pill,
  refreshTimes, report, table, timeEl, toast, traceLink,
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

/** Decides the approval a task's run waits for, then shows the task as it goes on. */
async function decide(approval, decision, reload) {
  try {
    await api(`/approvals/${enc(approval.id)}`, { method: 'POST', body: { decision } });
    toast(decision === 'approve' ? `Approved ${approval.tool}: the run goes on` : `Denied ${approval.tool}`, 'ok');
    dataChanged();
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    toast(e.message, 'error');
  }
  await reload();
}

/** A waiting task's status: the pill, what it waits for and, for an approval, the buttons. */
function waitingCell(task, approval, reload) {
  if (!approval) {
    return h('span', null, pill(task.status), ' ', h('span', { class: 'muted waiting-for' }, `waiting for ${task.waiting_for}`));
  }
  const button = (decision, label, cls) => {
    const b = h('button', { type: 'button', class: `small ${cls}`, dataset: { approval: approval.id, decision } }, label);
    b.addEventListener('click', () => {
      b.disabled = true;
      decide(approval, decision, reload).catch(report);
    });
    return b;
  };
  return h('span', { class: 'waiting' }, pill(task.status), ' ',
    h('span', { class: 'muted waiting-for', title: JSON.stringify(approval.input) }, `waiting for approval of ${approval.tool}`), ' ',
    button('approve', 'Approve', 'primary approval-approve'), ' ',
    button('deny', 'Deny', 'danger-ghost approval-deny'));
}

export async function tasksView(main, route, ctx) {
  const status = STATUSES.includes(route.params.get('status')) ? route.params.get('status') : '';
  const tabs = h('div', { id: 'task-filter' });
  const showTabs = (counts) => {
    const all = STATUSES.reduce((sum, s) => sum + (counts[s] || 0), 0);
    tabs.replaceChildren(filterTabs([
      { key: '', label: 'All', count: all, href: '#/tasks' },
      ...STATUSES.map((s) => ({ key: s, label: s, count: counts[s] || 0, href: `#/tasks?status=${s}` })),
    ], status, 'Filter by status'));
  };
  const body = h('div', { id: 'task-table' });
  let last = null;

  const load = async () => {
    const { tasks, counts } = await api(`/tasks${status ? `?status=${status}` : ''}`, { signal: ctx.signal });
    const waiting = new Map();
    if (tasks.some((t) => t.waiting_for === 'approval')) {
      const { approvals } = await api('/approvals?status=pending', { signal: ctx.signal });
      for (const approval of approvals) if (approval.task_id) waiting.set(approval.task_id, approval);
    }
    showTabs(counts);
    const json = JSON.stringify(tasks);
    if (json === last) {
      refreshTimes(body);
      return;
    }
    last = json;
    if (tasks.length === 0) {
      body.replaceChildren(status
        ? empty(`No ${status} tasks.`)
        : emptyState({
          title: 'No tasks yet',
          text: 'A task appears whenever an adapter, a job or a schedule runs an agent. Schedule a run to see one:',
          action: h('code', { class: 'empty-code' }, 'service-runtime schedule create daily --cron @daily --agent default --prompt "Summarise my notes"'),
        }));
      return;
    }
    const focused = document.activeElement?.dataset?.focusKey;
    body.replaceChildren(table(
      ['Title', 'Status', 'Agent', 'Created', 'Updated', 'Trace', ''],
      tasks.map((task) => ({
        props: { dataset: { task: task.task_id, status: task.status } },
        cells: [
          h('span', { class: 'task-title', title: task.description || null },
            task.content_hidden ? h('span', { class: 'muted' }, '(a prompt hidden from your role)') : task.title,
            task.started_by ? h('span', { class: 'muted task-by' }, ` · by ${byWhom(task.started_by)}`) : null),
          task.waiting_for ? waitingCell(task, waiting.get(task.task_id), load) : pill(task.status),
          task.agent_profile_name || h('span', { class: 'muted' }, '—'),
          timeEl(task.created_at),
          timeEl(task.updated_at),
          traceLink(task.trace_id),
          may('cancel_tasks') && h('button', {
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
        h('button', { type: 'button', id: 'task-refresh', onclick: () => load().catch(report) }, 'Refresh'))),
    tabs,
    body));
  ctx.poll(3000, load);
}
