// People & tokens (admins): who may sign in, with which role, and the API tokens of machines.
// A new person's password link and a new token's secret are shown once, here, and nowhere
// else.

import {
  ApiError, api, confirmDialog, emptyState, enc, formErrors, formField, h, report, table, timeEl,
  toast,
} from './lib.js';

const ROLES = ['viewer', 'member', 'operator', 'admin'];

function roleSelect(value) {
  return h('select', null, ROLES.map((r) => h('option', { value: r, selected: r === value }, r)));
}

/** Shows a secret once, with a button that copies it. */
function once(id, label, secret) {
  const copy = h('button', {
    type: 'button', class: 'small ghost',
    onclick: () => navigator.clipboard.writeText(secret).then(() => toast('Copied', 'ok'), report),
  }, 'Copy');
  return h('div', { class: 'notice secret-once', id, role: 'status' },
    h('strong', null, label), h('code', { class: 'secret' }, secret), ' ', copy);
}

/** A create form: `send(values)` posts; `shown(answer)` returns what to show once. */
function createForm(prefix, title, fields, submitLabel, send, shown, reload) {
  const inputs = Object.fromEntries(fields.map(([name, , control]) => [name, control]));
  const general = h('p', { class: 'field-error', role: 'alert' });
  const result = h('div');
  const submit = h('button', { type: 'submit', class: 'primary', id: `${prefix}-submit` }, submitLabel);
  const form = h('form', { class: 'card', id: `${prefix}-form`, novalidate: true },
    h('h2', null, title),
    h('div', { class: 'field-row' }, fields.map(([name, label, control, hint]) => formField(prefix, name, label, control, hint))),
    general, h('div', { class: 'form-actions' }, submit), result);
  const errors = formErrors(form, inputs, general);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    errors.clear();
    submit.disabled = true;
    try {
      const values = Object.fromEntries(Object.entries(inputs).map(([k, el]) => [k, el.value.trim()]));
      result.replaceChildren(shown(await send(values)));
      for (const el of Object.values(inputs)) if (el.tagName === 'INPUT') el.value = '';
      await reload();
    } catch (e) {
      if (!(e instanceof ApiError)) throw e;
      errors.show(e.field, e.message);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

async function act(call, done, reload) {
  try {
    await call();
    toast(done, 'ok');
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    toast(e.message, 'error');
  }
  await reload();
}

/** The people, each with a role to change, a new password link, and removal; a new link shows
 * in `shown`. */
function peopleTable(users, shown, reload) {
  if (users.length === 0) {
    return emptyState({ title: 'Nobody yet', text: 'Add a person below; they get a link to set a password.' });
  }
  return table(['Name', 'Role', 'Sign-in', 'Last sign-in', ''], users.map((user) => {
    const path = `/users/${enc(user.name)}`;
    const role = roleSelect(user.role);
    role.setAttribute('aria-label', `Role of ${user.name}`);
    role.addEventListener('change', () => act(
      () => api(path, { method: 'PATCH', body: { role: role.value } }), `${user.name} is now ${role.value}`, reload,
    ).catch(report));
    const link = h('button', {
      type: 'button', class: 'small ghost', 'aria-label': `New password link for ${user.name}`,
      onclick: () => api(`${path}/link`, { method: 'POST' })
        .then((answer) => shown.replaceChildren(once('link-once', `${user.name}'s new link (7 days, once):`, answer.link)))
        .catch(report),
    }, 'New link');
    const remove = h('button', {
      type: 'button', class: 'small danger-ghost', 'aria-label': `Remove ${user.name}`,
      onclick: async () => {
        const sure = await confirmDialog({ title: `Remove ${user.name}?`, message: 'Their sessions end now.', confirmLabel: 'Remove' });
        if (sure) await act(() => api(path, { method: 'DELETE' }), `Removed ${user.name}`, reload);
      },
    }, 'Remove');
    return {
      props: { dataset: { user: user.name } },
      cells: [
        user.name, role,
        user.source === 'oidc' ? 'single sign-on' : (user.has_password ? 'password' : 'link not used yet'),
        timeEl(user.last_sign_in_at),
        h('div', { class: 'row-actions' }, user.source === 'local' ? link : null, remove),
      ],
    };
  }), { caption: 'People' });
}

function tokensTable(tokens, reload) {
  if (tokens.length === 0) {
    return emptyState({ title: 'No tokens', text: 'Scripts and other machines send a token as Authorization: Bearer.' });
  }
  return table(['Name', 'Role', 'Starts', 'Expires', 'Last used', ''], tokens.map((token) => ({
    props: { dataset: { token: token.name } },
    cells: [
      token.name, token.role, h('code', null, `${token.hint}…`), timeEl(token.expires_at, 'never'), timeEl(token.last_used_at),
      h('button', {
        type: 'button', class: 'small danger-ghost', 'aria-label': `Revoke ${token.name}`,
        onclick: async () => {
          const sure = await confirmDialog({ title: `Revoke ${token.name}?`, message: 'It is refused from then on, on every replica.', confirmLabel: 'Revoke' });
          if (sure) await act(() => api(`/tokens/${enc(token.name)}`, { method: 'DELETE' }), `Revoked ${token.name}`, reload);
        },
      }, 'Revoke'),
    ],
  })), { caption: 'API tokens' });
}

export async function accessView(main, route, ctx) {
  const people = h('div', { id: 'people' });
  const shown = h('div');
  const tokens = h('div', { id: 'tokens' });
  const load = async () => {
    const [u, t] = await Promise.all([api('/users', { signal: ctx.signal }), api('/tokens', { signal: ctx.signal })]);
    people.replaceChildren(peopleTable(u.users, shown, load));
    tokens.replaceChildren(tokensTable(t.tokens, load));
  };
  await load();
  const addPerson = createForm('user', 'Add a person', [
    ['name', 'Name', h('input', { autocomplete: 'off', spellcheck: 'false' }), 'Letters, digits, - _ . @'],
    ['role', 'Role', roleSelect('member')],
  ], 'Add', (v) => api('/users', { method: 'POST', body: v }),
  (answer) => once('user-link', `Send ${answer.user.name} this link to set a password (7 days, once):`, answer.link), load);
  const addToken = createForm('token', 'Create an API token', [
    ['name', 'Name', h('input', { autocomplete: 'off', spellcheck: 'false' })],
    ['role', 'Role', roleSelect('viewer')],
    ['expires', 'Expires', h('input', { placeholder: '30d', autocomplete: 'off' }), 'e.g. 30d, 12h; empty: until revoked'],
  ], 'Create', (v) => api('/tokens', { method: 'POST', body: { ...v, expires: v.expires || undefined } }),
  (answer) => once('token-secret', `The token ${answer.name}, shown this once:`, answer.token), load);
  main.append(h('section', { class: 'view' },
    h('div', { class: 'view-header' },
      h('div', null, h('h1', { tabindex: '-1' }, 'People & tokens'),
        h('p', { class: 'sub' }, 'Who may sign in, with which role, and the tokens of scripts and machines.'))),
    h('h2', null, 'People'), shown, people, addPerson,
    h('h2', null, 'API tokens'), tokens, addToken));
}
