// Settings: every integration (which model provider runs agents, an LLM provider's key, an
// adapter's platform, a token) with its variables. A value typed here is written through the API (to the data directory's .env, or
// sealed in the shared database) and never shown back: the page only knows whether each
// variable is set. Integrations with a live probe can be verified. `#/settings/<id>` opens the
// page at one integration; the Adapters tab links there for an adapter waiting for settings.

import {
  ApiError, api, dataChanged, enc, formErrors, formField, h, may, needs, pill, report, spotlight, toast,
} from './lib.js';

/** The integrations, and what each adapter waiting for settings lacks (by adapter name, which is
 * also the id of the integration that configures it). */
async function fetchState(signal) {
  const [{ integrations }, adapters] = await Promise.all([
    api('/integrations', { signal }),
    // Without the adapters the page still works; it just cannot say what an adapter waits for.
    api('/adapters', { signal }).then((r) => r.adapters, () => []),
  ]);
  const waiting = new Map(adapters
    .filter((a) => a.status === 'error' && a.missing_settings?.length)
    .map((a) => [a.name, a.missing_settings]));
  return { integrations, waiting };
}

function verifiedPill(verified) {
  if (verified === true) return pill('ok', 'verified');
  if (verified === false) return pill('error', 'verify failed');
  return pill('never verified');
}

/** Where an integration stands: configured or not, and how its last probe went. */
function statePills(status) {
  return [
    status.configured ? pill('configured') : pill('not configured'),
    status.verifiable ? verifiedPill(status.verified) : null,
  ];
}

/** The toast after a save: what was stored where, and what it changed. */
function savedMessage(status, saved) {
  const last = saved[saved.length - 1].answer;
  const where = last.stored_in === 'database' ? 'the shared database' : last.stored_in;
  const parts = [`${status.name}: saved ${saved.map((s) => s.variable).join(', ')} in ${where}`];
  const applied = [...new Set(saved.flatMap((s) => s.answer.applied_to || []))];
  if (applied.length) parts.push(`applied to ${applied.join(', ')}`);
  const overridden = saved.filter((s) => s.answer.overridden_by_environment).map((s) => s.variable);
  if (overridden.length) {
    parts.push(`the server's environment also sets ${overridden.join(', ')} and wins until it is unset there`);
  }
  return `${parts.join('; ')}.`;
}

/** A password-type input per variable: a stored value is never shown, so the placeholder only
 * says whether one is set. A variable that takes one of a few values (`choices`) is a select
 * whose first option keeps what is set. */
function variableInput(choices) {
  if (choices) {
    return h('select', null, h('option', { value: '' }, 'keep as set'),
      choices.map((value) => h('option', { value }, value)));
  }
  return h('input', { type: 'password', autocomplete: 'new-password', spellcheck: 'false' });
}

/** One integration's card: its state, a field per variable, Save (only the fields typed into)
 * and, when it has a live probe, Verify. `refresh()` reloads every card's state. */
function integrationCard(status, refresh) {
  const { id } = status;
  const prefix = `settings-${id}`;
  const inputs = Object.fromEntries(status.env_vars.map((variable) =>
    [variable, variableInput(status.choices?.[variable])]));
  const fields = status.env_vars.map((variable) =>
    formField(prefix, variable, h('code', null, variable), inputs[variable]));
  const states = h('span', { class: 'integration-states' });
  const waiting = h('p', { class: 'hint integration-needs' });
  const general = h('div', { class: 'form-error', role: 'alert' });
  const result = h('p', { class: 'verify-result', role: 'status' });
  const save = h('button', {
    type: 'submit', class: 'primary small', dataset: { action: 'save' }, 'aria-label': `Save ${status.name}`,
  }, 'Save');
  const verify = status.verifiable
    ? h('button', {
      type: 'button', class: 'small', dataset: { action: 'verify' }, 'aria-label': `Verify ${status.name}`,
      onclick: () => runProbe().catch(report),
    }, 'Verify')
    : null;
  const form = h('form', {
    class: 'integration-form', novalidate: true, 'aria-labelledby': `${prefix}-title`,
    onsubmit: (event) => {
      event.preventDefault();
      saveTyped().catch(report);
    },
  },
  h('div', { class: 'integration-fields' }, fields),
  general,
  h('div', { class: 'form-actions' }, result, verify, save));
  const errors = formErrors(form, inputs, general);
  const card = h('li', { class: 'card integration-card', id: `integration-${id}`, dataset: { integration: id } },
    h('div', { class: 'integration-top' },
      h('h2', { class: 'integration-name', id: `${prefix}-title` }, status.name),
      h('code', { class: 'muted small' }, id),
      states),
    waiting,
    // Those who may not write settings see their state only.
    may('manage_settings') && form);

  /** Shows the state as the server last reported it; typed values stay as they are. */
  function show(current, missing = []) {
    card.dataset.configured = String(current.configured);
    card.dataset.verified = current.verified == null ? 'never' : String(current.verified);
    states.replaceChildren(...statePills(current).filter(Boolean));
    waiting.replaceChildren(missing.length ? needs(missing, `The ${id} adapter is waiting. It needs`) : '');
    for (const [variable, input] of Object.entries(inputs)) {
      const set = Boolean(current.set?.[variable]);
      if (input.tagName === 'SELECT') input.options[0].textContent = set ? 'keep as set' : 'not set';
      else input.placeholder = set ? 'set' : 'not set';
      input.dataset.set = String(set);
      input.closest('.field').dataset.needed = String(missing.includes(variable));
    }
  }

  /** Stores one typed value, which then leaves the page; a refusal is marked on its field (or
   * the form) and answers null. */
  async function store(variable, input) {
    try {
      const answer = await api(`/integrations/${enc(id)}/keys`, { method: 'POST', body: { env_var: variable, value: input.value } });
      input.value = '';
      return answer;
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      errors.show(e.field === 'value' ? variable : null, e.message);
      return null;
    }
  }

  /** Stores the typed values one by one, stopping at the first the server refuses. */
  async function saveTyped() {
    errors.clear();
    const typed = Object.entries(inputs).filter(([, input]) => input.value !== '');
    if (typed.length === 0) {
      errors.show(null, 'Nothing to save: type a value first (empty fields keep what is set).');
      return;
    }
    const saved = [];
    save.disabled = true;
    try {
      for (const [variable, input] of typed) {
        const answer = await store(variable, input);
        if (!answer) break;
        saved.push({ variable, answer });
      }
    } finally {
      save.disabled = false;
    }
    if (saved.length === 0) return;
    toast(savedMessage(status, saved), 'ok');
    // The header shows the provider runs use, which a saved setting may have changed.
    dataChanged();
    await refresh();
  }

  function showResult(outcome, text) {
    result.dataset.outcome = outcome;
    result.textContent = text;
  }

  /** Runs the live probe: its outcome shows under the form, and in the state pills. */
  async function runProbe() {
    verify.disabled = true;
    showResult('pending', 'Verifying…');
    try {
      const outcome = await api(`/integrations/${enc(id)}/verify`, { method: 'POST' });
      if (outcome.ok) showResult('ok', 'Verified: it answered.');
      else showResult('failed', `Failed: ${outcome.error || 'no reason given'}`);
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      showResult('failed', e.message);
    } finally {
      verify.disabled = false;
    }
    await refresh();
  }

  /** Arrived at from a link: brought into view, highlighted, the first unset field focused. */
  function select() {
    card.classList.add('selected');
    spotlight(card, 'start');
    const input = Object.values(inputs).find((i) => i.dataset.set !== 'true') || Object.values(inputs)[0];
    input?.focus({ preventScroll: true });
  }

  return { id, el: card, show, select };
}

export async function settingsView(main, route, ctx) {
  const first = await fetchState(ctx.signal);
  const subtitle = h('p', { class: 'sub' });
  const showAll = ({ integrations, waiting }) => {
    const configured = integrations.filter((i) => i.configured).length;
    subtitle.textContent = `${configured} of ${integrations.length} integrations configured. A value saved here applies without a restart and is never shown again.`;
    for (const status of integrations) cards.find((c) => c.id === status.id)?.show(status, waiting.get(status.id));
  };
  const refresh = async () => showAll(await fetchState(ctx.signal));
  const cards = first.integrations.map((status) => integrationCard(status, refresh));
  showAll(first);

  const wanted = route.args[0];
  const target = wanted && cards.find((c) => c.id === wanted);
  main.append(h('section', { class: 'view settings-view' },
    h('div', { class: 'view-header' },
      h('div', null, h('h1', { tabindex: '-1' }, 'Settings'), subtitle)),
    h('p', { class: 'notice' },
      'Values go to the data directory\'s ', h('code', null, '.env'),
      ' (or, with replicas on PostgreSQL, the shared database). Saving works from this machine only. A variable set in the server\'s own environment wins over one saved here.'),
    wanted && !target ? h('div', { class: 'error-box', role: 'alert' }, `No integration is called “${wanted}”.`) : null,
    h('ul', { class: 'integration-list', 'aria-label': 'Integrations' }, cards.map((c) => c.el))));
  target?.select();
}
