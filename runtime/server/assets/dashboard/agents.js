// Agents (the team view): every profile with Chat, Edit, Export and Delete, and one form that
// creates an agent or edits the one picked. Validation errors from the API show beside their
// field; tools the agent lists but cannot use now are marked, with the reason.

import {
  ApiError, api, confirmDialog, dataChanged, dot, download, enc, formErrors, formField, h, may, report, spotlight,
  toast, toolChips,
} from './lib.js';

const DEFAULT_AGENT = 'default';
const DEFAULT_COLOR = '#4f8cff';

/** `color` as a color picker holds it (`#rrggbb`; `#rgb` spelled out), or null. */
function pickerColor(color) {
  if (/^#[0-9a-f]{6}$/i.test(color || '')) return color.toLowerCase();
  const short = /^#([0-9a-f])([0-9a-f])([0-9a-f])$/i.exec(color || '');
  return short ? `#${short.slice(1).map((d) => d + d).join('')}`.toLowerCase() : null;
}

function statusChips(agent) {
  const unavailable = agent.unavailable_tools || [];
  return h('span', { class: 'card-chips' },
    agent.name === DEFAULT_AGENT
      ? h('span', { class: 'pill pill-enabled', title: 'Answers when no agent is named' }, 'default')
      : null,
    unavailable.length
      ? h('span', { class: 'pill pill-warn unavailable-count' },
        `${unavailable.length} tool${unavailable.length === 1 ? '' : 's'} unavailable`)
      : null);
}

function agentCard(agent, { onEdit, onDelete }) {
  const tools = agent.tools ?? null;
  const manage = may('manage_agents');
  const removable = manage && agent.name !== DEFAULT_AGENT;
  return h('li', { class: 'agent card', dataset: { agent: agent.name } },
    h('div', { class: 'agent-head' },
      dot(agent.color, agent.color ? `color ${agent.color}` : null),
      h('h3', { class: 'agent-name' }, agent.name),
      statusChips(agent)),
    h('p', { class: 'agent-desc' }, agent.description || h('span', { class: 'muted' }, 'No description.')),
    h('dl', { class: 'meta' },
      h('dt', null, 'Model'),
      h('dd', null, agent.default_model
        ? h('code', null, agent.default_model)
        : h('span', { class: 'muted' }, 'server default')),
      h('dt', null, 'Tools'),
      h('dd', null, tools === null
        ? h('span', { class: 'muted' }, 'every ungated tool')
        : toolChips(tools, agent.unavailable_tools, 'no tools'))),
    h('div', { class: 'card-actions' },
      may('chat') && h('a', { class: 'button', href: `#/chat?agent=${enc(agent.name)}` }, 'Chat'),
      manage && h('button', {
        type: 'button', class: 'ghost edit', 'aria-label': `Edit ${agent.name}`,
        onclick: () => onEdit(agent),
      }, 'Edit'),
      h('a', {
        class: 'button ghost export', href: `/api/agents/${enc(agent.name)}/export`, download: '',
        'aria-label': `Export ${agent.name} as a bundle file`,
        onclick: (event) => download(event).catch(report),
      }, 'Export'),
      removable
        ? h('button', {
          type: 'button', class: 'ghost danger-ghost delete', 'aria-label': `Delete ${agent.name}`,
          onclick: () => onDelete(agent).catch(report),
        }, 'Delete')
        : null));
}

/** What still names the agent, in a sentence for the confirm dialog ('' when nothing does). */
function referencesText(refs) {
  const names = [
    ...refs.schedules.map((s) => `schedule “${s}”`),
    ...refs.adapters.map((a) => `the ${a.adapter} adapter (${a.variable})`),
  ];
  if (!names.length) return '';
  return ` Still named by ${names.join(', ')}: scheduled runs will fail with an error trace and adapters will answer with the server's default model, until you point them at another agent.`;
}

async function deleteAgent(agent, reload) {
  let refs = { schedules: [], adapters: [] };
  try {
    refs = await api(`/agents/${enc(agent.name)}/references`);
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
  }
  const ok = await confirmDialog({
    title: `Delete ${agent.name}?`,
    message: `The agent “${agent.name}” will be deleted; its traces and tasks are kept.${referencesText(refs)}`,
    confirmLabel: 'Delete agent',
  });
  if (!ok) return;
  try {
    await api(`/agents/${enc(agent.name)}`, { method: 'DELETE' });
    toast(`Deleted ${agent.name}`, 'ok');
    dataChanged();
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    toast(e.status === 403 ? `Refused: ${e.message}` : e.message, 'error');
  }
  await reload();
}

const field = (name, label, control, hint) => formField('agent', name, label, control, hint);

/** The create/edit form. `onSaved(profile)` runs after a successful save. */
function agentForm(tools, onSaved) {
  let editing = null;
  const general = h('div', { class: 'form-error', role: 'alert' });
  const title = h('h2', { id: 'agent-form-title' }, 'New agent');
  const nameHint = h('p', { class: 'hint', id: 'agent-name-hint' });
  const inputs = {
    name: h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. Researcher' }),
    description: h('input', { type: 'text', autocomplete: 'off', placeholder: 'One line about what it does' }),
    system_prompt: h('textarea', { rows: '4', placeholder: 'You are…' }),
    color: h('input', { type: 'color', value: DEFAULT_COLOR }),
    default_model: h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'blank inherits the server model' }),
    tools: h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. search_notes, create_note' }),
  };
  const toolButtons = tools.length
    ? h('div', { class: 'chips tool-picker', 'aria-label': 'Available tools' },
      h('span', { class: 'muted' }, 'Add: '),
      tools.map((t) => h('button', {
        type: 'button', class: 'chip chip-button', title: t.description,
        onclick: () => {
          const current = inputs.tools.value.split(',').map((s) => s.trim()).filter(Boolean);
          if (!current.includes(t.name)) current.push(t.name);
          inputs.tools.value = current.join(', ');
        },
      }, t.name)))
    : null;
  // The picker sits under the field, below the fold of the form's scrolling area: using the
  // field brings it into view.
  if (toolButtons) inputs.tools.addEventListener('focus', () => toolButtons.scrollIntoView({ block: 'nearest' }));
  const submit = h('button', { type: 'submit', class: 'primary', id: 'agent-submit' }, 'Create agent');
  const cancel = h('button', { type: 'button', class: 'ghost', id: 'agent-cancel', hidden: true, onclick: () => startCreate() }, 'Cancel');

  function startCreate() {
    editing = null;
    form.reset();
    errors.clear();
    inputs.color.value = DEFAULT_COLOR;
    inputs.name.readOnly = false;
    nameHint.textContent = '';
    title.textContent = 'New agent';
    submit.textContent = 'Create agent';
    cancel.hidden = true;
    form.dataset.mode = 'create';
  }

  function startEdit(agent) {
    startCreate();
    editing = agent;
    inputs.name.value = agent.name;
    inputs.name.readOnly = true;
    nameHint.textContent = 'An agent keeps its name: schedules and adapters refer to it.';
    inputs.description.value = agent.description || '';
    inputs.system_prompt.value = agent.system_prompt;
    inputs.color.value = pickerColor(agent.color) || DEFAULT_COLOR;
    // What the picker showed: a color left as it was is not sent (`#a0f` stays `#a0f`).
    inputs.color.dataset.shown = inputs.color.value;
    inputs.default_model.value = agent.default_model || '';
    inputs.tools.value = agent.tools ? agent.tools.join(', ') : '';
    title.textContent = `Edit ${agent.name}`;
    submit.textContent = 'Save changes';
    cancel.hidden = false;
    form.dataset.mode = 'edit';
    form.scrollIntoView({ block: 'nearest' });
    inputs.description.focus();
  }

  async function save(event) {
    event.preventDefault();
    errors.clear();
    const body = {
      system_prompt: inputs.system_prompt.value,
      description: inputs.description.value,
      default_model: inputs.default_model.value,
    };
    // A color picker always holds a color: an edited agent's is sent only when it changed.
    if (!editing || inputs.color.value !== inputs.color.dataset.shown) body.color = inputs.color.value;
    // Blank leaves the tool list unset (every ungated tool); anything else is the list.
    if (inputs.tools.value.trim()) body.tools = inputs.tools.value;
    else if (editing) body.tools = null;
    submit.disabled = true;
    try {
      let saved;
      if (editing) {
        saved = await api(`/agents/${enc(editing.name)}`, { method: 'PATCH', body });
        toast(`Saved ${saved.name}`, 'ok');
      } else {
        body.name = inputs.name.value;
        saved = await api('/agents', { method: 'POST', body });
        toast(`Created agent ${saved.name}`, 'ok');
      }
      startCreate();
      dataChanged();
      await onSaved(saved);
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      errors.show(e.field || (e.status === 409 && !editing ? 'name' : null), e.message);
    } finally {
      submit.disabled = false;
    }
  }

  const nameField = field('name', 'Name', inputs.name);
  inputs.name.setAttribute('aria-describedby', 'agent-name-error agent-name-hint');
  const form = h('form', {
    class: 'card agent-form', id: 'agent-form', novalidate: true, 'aria-labelledby': 'agent-form-title',
    dataset: { mode: 'create' },
    onsubmit: (event) => save(event).catch(report),
  },
  title,
  h('div', { class: 'agent-form-fields' },
    nameField,
    nameHint,
    field('description', 'Description', inputs.description),
    field('system_prompt', 'System prompt', inputs.system_prompt),
    h('div', { class: 'field-row' },
      field('color', 'Color', inputs.color),
      field('default_model', 'Model', inputs.default_model)),
    field('tools', 'Tools', inputs.tools, 'Comma-separated. Leave blank to allow every ungated tool.'),
    toolButtons),
  general,
  h('div', { class: 'form-actions' }, cancel, submit));
  const errors = formErrors(form, inputs, general);
  form.edit = startEdit;
  return form;
}

/** The tools, with `mcp__<server>__*` (every tool of that MCP server) before each server's. */
function withWildcards(tools) {
  const out = [];
  for (const tool of tools) {
    const server = tool.name.startsWith('mcp__') ? tool.name.split('__')[1] : null;
    const wildcard = server && `mcp__${server}__*`;
    if (wildcard && !out.some((t) => t.name === wildcard)) {
      out.push({ name: wildcard, description: `Every tool of the MCP server ${server}, as it offers them` });
    }
    out.push(tool);
  }
  return out;
}

export async function agentsView(main, _route, ctx) {
  const [{ agents }, toolList] = await Promise.all([
    api('/agents', { signal: ctx.signal }),
    api('/tools', { signal: ctx.signal }).then((r) => withWildcards(r.tools.filter((t) => !t.gated)), () => []),
  ]);
  const list = h('ul', { class: 'agent-list', id: 'agent-list', 'aria-label': 'Agents' });
  const subtitle = h('p', { class: 'sub' });
  let form;
  const reload = async (highlight) => {
    const fresh = await api('/agents', { signal: ctx.signal });
    show(fresh.agents, highlight);
  };
  const actions = {
    onEdit: (agent) => form.edit(agent),
    onDelete: (agent) => deleteAgent(agent, () => reload()),
  };
  const show = (all, highlight) => {
    subtitle.textContent = `${all.length} agent${all.length === 1 ? '' : 's'}. The default agent answers when none is picked.`;
    list.replaceChildren(...all.map((agent) => agentCard(agent, actions)));
    if (highlight) {
      const item = [...list.children].find((li) => li.dataset.agent === highlight);
      if (item) spotlight(item);
    }
  };
  show(agents);
  // Those who may not change agents read them.
  form = may('manage_agents') ? agentForm(toolList, (saved) => reload(saved.name)) : null;
  main.append(
    h('section', { class: 'view agents-view' },
      h('div', { class: 'view-header' },
        h('div', null, h('h1', { tabindex: '-1' }, 'Agents'), subtitle),
        h('div', { class: 'actions' }, h('a', { class: 'button ghost', href: '#/store' }, 'Browse the store'))),
      h('div', { class: 'agents-layout' }, h('div', { class: 'agent-list-pane' }, list), form)));
}
