// Agents (the team view): every profile, and a form to create one whose validation errors
// from the API show beside their field.

import { ApiError, api, chips, dataChanged, dot, enc, h, toast } from './lib.js';

function agentCard(agent) {
  const tools = agent.tools ?? null;
  return h('li', { class: 'agent card', dataset: { agent: agent.name } },
    h('div', { class: 'agent-head' },
      dot(agent.color, agent.color ? `color ${agent.color}` : null),
      h('h3', { class: 'agent-name' }, agent.name)),
    h('p', { class: 'agent-desc' }, agent.description || h('span', { class: 'muted' }, 'No description.')),
    h('dl', { class: 'meta' },
      h('dt', null, 'Model'),
      h('dd', null, agent.default_model
        ? h('code', null, agent.default_model)
        : h('span', { class: 'muted' }, 'server default')),
      h('dt', null, 'Tools'),
      h('dd', null, tools === null
        ? h('span', { class: 'muted' }, 'every ungated tool')
        : chips(tools, 'no tools'))),
    h('div', { class: 'card-actions' },
      h('a', { class: 'button', href: `#/chat?agent=${enc(agent.name)}` }, 'Chat'),
      h('a', {
        class: 'button ghost export', href: `/api/agents/${enc(agent.name)}/export`, download: '',
        'aria-label': `Export ${agent.name} as a bundle file`,
      }, 'Export')));
}

function field(name, label, control, hint) {
  const errorId = `agent-${name}-error`;
  control.id = `agent-${name}`;
  control.name = name;
  control.setAttribute('aria-describedby', hint ? `${errorId} agent-${name}-hint` : errorId);
  return h('div', { class: 'field', dataset: { field: name } },
    h('label', { for: control.id }, label),
    control,
    hint ? h('p', { class: 'hint', id: `agent-${name}-hint` }, hint) : null,
    h('p', { class: 'field-error', id: errorId, dataset: { errorFor: name } }));
}

function createForm(tools, onCreated) {
  const general = h('div', { class: 'form-error', role: 'alert' });
  const inputs = {
    name: h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false', placeholder: 'e.g. Researcher' }),
    description: h('input', { type: 'text', autocomplete: 'off', placeholder: 'One line about what it does' }),
    system_prompt: h('textarea', { rows: '5', placeholder: 'You are…' }),
    color: h('input', { type: 'color', value: '#4f8cff' }),
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
  const submit = h('button', { type: 'submit', class: 'primary', id: 'agent-submit' }, 'Create agent');

  function clearErrors() {
    general.textContent = '';
    for (const el of form.querySelectorAll('.field-error')) el.textContent = '';
    for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
  }

  function showError(fieldName, message) {
    const target = fieldName && form.querySelector(`[data-error-for="${fieldName}"]`);
    if (!target) {
      general.textContent = message;
      return;
    }
    target.textContent = message;
    inputs[fieldName].setAttribute('aria-invalid', 'true');
    inputs[fieldName].focus();
  }

  const form = h('form', {
    class: 'card agent-form', id: 'agent-form', novalidate: true, 'aria-labelledby': 'agent-form-title',
    onsubmit: async (event) => {
      event.preventDefault();
      clearErrors();
      const body = {
        name: inputs.name.value,
        system_prompt: inputs.system_prompt.value,
        description: inputs.description.value,
        color: inputs.color.value,
        default_model: inputs.default_model.value,
      };
      // Blank leaves the tool list unset (every ungated tool); anything else is the list.
      if (inputs.tools.value.trim()) body.tools = inputs.tools.value;
      submit.disabled = true;
      try {
        const created = await api('/agents', { method: 'POST', body });
        form.reset();
        inputs.color.value = '#4f8cff';
        toast(`Created agent ${created.name}`, 'ok');
        dataChanged();
        await onCreated(created);
      } catch (e) {
        if (!(e instanceof ApiError)) throw e;
        showError(e.field || (e.status === 409 ? 'name' : null), e.message);
      } finally {
        submit.disabled = false;
      }
    },
  },
  h('h2', { id: 'agent-form-title' }, 'New agent'),
  field('name', 'Name', inputs.name),
  field('description', 'Description', inputs.description),
  field('system_prompt', 'System prompt', inputs.system_prompt),
  h('div', { class: 'field-row' },
    field('color', 'Color', inputs.color),
    field('default_model', 'Model', inputs.default_model)),
  field('tools', 'Tools', inputs.tools, 'Comma-separated. Leave blank to allow every ungated tool.'),
  toolButtons,
  general,
  h('div', { class: 'form-actions' }, submit));
  return form;
}

export async function agentsView(main, _route, ctx) {
  const [{ agents }, toolList] = await Promise.all([
    api('/agents', { signal: ctx.signal }),
    api('/tools', { signal: ctx.signal }).then((r) => r.tools.filter((t) => !t.gated), () => []),
  ]);
  const list = h('ul', { class: 'agent-list', id: 'agent-list', 'aria-label': 'Agents' });
  const subtitle = h('p', { class: 'sub' });
  const show = (all, highlight) => {
    subtitle.textContent = `${all.length} agent${all.length === 1 ? '' : 's'}. The default agent answers when none is picked.`;
    list.replaceChildren(...all.map(agentCard));
    if (highlight) {
      const item = [...list.children].find((li) => li.dataset.agent === highlight);
      if (item) {
        item.classList.add('flash');
        item.scrollIntoView({ block: 'nearest' });
      }
    }
  };
  show(agents);
  const form = createForm(toolList, async (created) => {
    const fresh = await api('/agents');
    show(fresh.agents, created.name);
  });
  main.append(
    h('section', { class: 'view' },
      h('div', { class: 'view-header' },
        h('div', null, h('h1', { tabindex: '-1' }, 'Agents'), subtitle),
        h('div', { class: 'actions' }, h('a', { class: 'button ghost', href: '#/store' }, 'Browse the store'))),
      h('div', { class: 'agents-layout' }, list, form)));
}
