// Schedules: an agent run on a cron expression, each run a task with its trace. Created,
// edited, enabled or disabled, run once now and deleted here (or with `service-runtime
// schedule`); a field the server refuses is marked with its reason.

import {
  ApiError, api, confirmDialog, emptyState, enc, formErrors, formField, h, may, pill, refreshTimes, report, table,
  timeEl, toast, traceLink,
} from './lib.js';

const field = (name, label, control, hint) => formField('schedule', name, label, control, hint);

/** The create/edit form; `onSaved()` runs after a save. */
function scheduleForm(agents, onSaved) {
  let editing = null;
  const general = h('div', { class: 'form-error', role: 'alert' });
  const title = h('h2', { id: 'schedule-form-title' }, 'New schedule');
  const inputs = {
    name: h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. morning' }),
    cron: h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: '0 7 * * *' }),
    agent: h('select', null, agents.map((a) => h('option', { value: a.name }, a.name))),
    prompt: h('textarea', { rows: '3', placeholder: 'Plan my day' }),
    catch_up: h('select', null, ['coalesce', 'all', 'skip'].map((p) => h('option', { value: p }, p))),
  };
  const submit = h('button', { type: 'submit', class: 'primary', id: 'schedule-submit' }, 'Create schedule');
  const cancel = h('button', { type: 'button', class: 'ghost', hidden: true, onclick: () => startCreate() }, 'Cancel');

  function startCreate() {
    editing = null;
    form.reset();
    errors.clear();
    inputs.name.readOnly = false;
    title.textContent = 'New schedule';
    submit.textContent = 'Create schedule';
    cancel.hidden = true;
    form.dataset.mode = 'create';
  }

  function startEdit(schedule) {
    startCreate();
    editing = schedule;
    inputs.name.value = schedule.name;
    inputs.name.readOnly = true;
    inputs.cron.value = schedule.cron_expression;
    // An agent that is gone is still shown, so saving keeps it unless it is changed.
    if (![...inputs.agent.options].some((o) => o.value === schedule.agent_profile_name)) {
      inputs.agent.append(h('option', { value: schedule.agent_profile_name }, schedule.agent_profile_name));
    }
    inputs.agent.value = schedule.agent_profile_name;
    inputs.prompt.value = schedule.prompt;
    inputs.catch_up.value = schedule.catch_up_policy;
    title.textContent = `Edit ${schedule.name}`;
    submit.textContent = 'Save changes';
    cancel.hidden = false;
    form.dataset.mode = 'edit';
    form.scrollIntoView({ block: 'nearest' });
    inputs.cron.focus();
  }

  async function save(event) {
    event.preventDefault();
    errors.clear();
    const body = {
      cron: inputs.cron.value.trim(),
      agent: inputs.agent.value,
      prompt: inputs.prompt.value,
      catch_up: inputs.catch_up.value,
    };
    submit.disabled = true;
    try {
      const saved = editing
        ? await api(`/schedules/${enc(editing.name)}`, { method: 'PATCH', body })
        : await api('/schedules', { method: 'POST', body: { ...body, name: inputs.name.value.trim() } });
      toast(saved.warning ? `Saved ${saved.name}: ${saved.warning}` : `Saved ${saved.name}`, saved.warning ? 'error' : 'ok');
      startCreate();
      await onSaved();
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      errors.show(e.field || (e.status === 409 && !editing ? 'name' : null), e.message);
    } finally {
      submit.disabled = false;
    }
  }

  const form = h('form', {
    class: 'card schedule-form', id: 'schedule-form', novalidate: true, 'aria-labelledby': 'schedule-form-title',
    dataset: { mode: 'create' },
    onsubmit: (event) => save(event).catch(report),
  },
  title,
  h('div', { class: 'field-row' },
    field('name', 'Name', inputs.name),
    field('cron', 'Cron', inputs.cron, '5 fields, an @alias (@hourly, @daily) or every 5m / 1h; in the server\'s zone (SERVICE_TZ).')),
  h('div', { class: 'field-row' },
    field('agent', 'Agent', inputs.agent),
    field('catch_up', 'Missed runs', inputs.catch_up, 'While the server was down: one run (coalesce), each, or none.')),
  field('prompt', 'Prompt', inputs.prompt),
  general,
  h('div', { class: 'form-actions' }, cancel, submit));
  const errors = formErrors(form, inputs, general);
  form.edit = startEdit;
  return form;
}

/** A row's buttons: edit, enable or disable, run now, delete. */
function actions(schedule, form, reload) {
  const act = async (call, done) => {
    try {
      await call();
      toast(done, 'ok');
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      toast(`${schedule.name}: ${e.message}`, 'error');
    }
    await reload();
  };
  const path = `/schedules/${enc(schedule.name)}`;
  const button = (label, action, onclick, cls = 'small ghost') => h('button', {
    type: 'button', class: cls, dataset: { action }, 'aria-label': `${label} ${schedule.name}`,
    onclick: () => onclick().catch(report),
  }, label);
  return h('div', { class: 'row-actions' },
    button('Edit', 'edit', async () => form.edit(schedule)),
    schedule.enabled
      ? button('Disable', 'disable', () => act(() => api(path, { method: 'PATCH', body: { enabled: false } }), `Disabled ${schedule.name}`))
      : button('Enable', 'enable', () => act(() => api(path, { method: 'PATCH', body: { enabled: true } }), `Enabled ${schedule.name}`)),
    button('Run now', 'run', () => act(() => api(`${path}/run`, { method: 'POST' }), `Started a run of ${schedule.name}: see Tasks`)),
    button('Delete', 'delete', async () => {
      const sure = await confirmDialog({
        title: `Delete ${schedule.name}?`,
        message: 'Its runs so far stay in Tasks and Traces.',
        confirmLabel: 'Delete',
      });
      if (sure) await act(() => api(path, { method: 'DELETE' }), `Deleted ${schedule.name}`);
    }, 'small danger-ghost'));
}

export async function schedulesView(main, _route, ctx) {
  const body = h('div', { id: 'schedule-table' });
  const { agents } = await api('/agents', { signal: ctx.signal });
  let form = null;
  const load = async () => {
    const { schedules } = await api('/schedules', { signal: ctx.signal });
    if (schedules.length === 0) {
      body.replaceChildren(emptyState({
        title: 'No schedules yet',
        text: 'A schedule runs an agent with a prompt on a cron expression. Create one above, or from a terminal:',
        action: h('code', { class: 'empty-code' }, 'service-runtime schedule create morning --cron "0 7 * * *" --agent default --prompt "Plan my day"'),
      }));
      return;
    }
    body.replaceChildren(table(
      ['Name', 'Cron', 'Agent', 'Next run', 'Catch-up', 'Enabled', 'Last run', 'Last trace', ''],
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
          form && actions(s, form, load),
        ],
      })),
      { caption: 'Schedules' }));
  };
  // Those who may not change schedules read them.
  form = may('manage_schedules') ? scheduleForm(agents, load) : null;
  await load();
  main.append(h('section', { class: 'view' },
    h('div', { class: 'view-header' },
      h('div', null, h('h1', { tabindex: '-1' }, 'Schedules'),
        h('p', { class: 'sub' }, 'Agent runs on a cron schedule; each run is a task with its trace.')),
      h('div', { class: 'actions' },
        h('button', { type: 'button', onclick: () => load().catch(report) }, 'Refresh'))),
    form,
    body));
  ctx.poll(15000, async () => {
    await load();
    refreshTimes(body);
  });
}
