// The sign-in page, shown instead of the tabs when the server asks every caller to sign in
// and this tab is nobody yet; and the page a one-time link opens to set a password.

import { api, credential, h } from './lib.js';

function field(id, label, attrs, ...hint) {
  const input = h('input', { id, name: id, required: true, ...attrs });
  return {
    input,
    element: h('div', { class: 'field' },
      h('label', { for: id }, label), input,
      hint.length ? h('p', { class: 'hint' }, ...hint) : null),
  };
}

/** A form that posts what `send` returns; `onDone` gets the answer. Errors show beside the
 * field the server names, else under the form. */
function form(id, fields, submitLabel, send, onDone) {
  const error = h('p', { class: 'field-error', id: `${id}-error`, role: 'alert' });
  const submit = h('button', { type: 'submit', id: `${id}-submit`, class: 'primary' }, submitLabel);
  const element = h('form', { class: 'signin', id, novalidate: true },
    ...fields.map((f) => f.element), error, submit);
  element.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    submit.disabled = true;
    try {
      onDone(await send());
    } catch (e) {
      error.textContent = e.message;
      const named = e.field && fields.find((f) => f.input.name === e.field);
      (named ? named.input : fields[0].input).focus();
    } finally {
      submit.disabled = false;
    }
  });
  return element;
}

/** Renders sign-in into `main`; calls `onSignedIn(me)` once someone is signed in. With
 * `link` (the secret of a one-time link) it asks for a new password instead; with
 * `singleSignOn` (the button's words) it offers the identity provider first. */
export function signinView(main, onSignedIn, { link, singleSignOn } = {}) {
  const signedIn = async () => {
    const me = await api('/me');
    if (!me.principal) throw new Error('the server did not take the credential');
    onSignedIn(me);
  };
  main.dataset.view = 'signin';
  if (link) {
    const name = field('link-name', 'Name (first admin only)', { autocomplete: 'username', required: false },
      'Leave empty when an admin invited you: the link knows your name.');
    const password = field('link-password', 'New password', { type: 'password', autocomplete: 'new-password', minlength: 12 },
      'At least 12 characters.');
    main.replaceChildren(
      h('h1', { tabindex: '-1' }, 'Set your password'),
      form('link-form', [name, password], 'Set password and sign in',
        () => api('/session/link', {
          method: 'POST',
          body: { link, name: name.input.value.trim() || undefined, password: password.input.value },
        }),
        signedIn));
    main.dataset.ready = 'link';
    password.input.focus();
    return;
  }
  const name = field('signin-name', 'Name', { autocomplete: 'username', spellcheck: 'false' });
  const password = field('signin-password', 'Password', { type: 'password', autocomplete: 'current-password' });
  const token = field('signin-token', 'API token', { type: 'password', autocomplete: 'off', spellcheck: 'false' },
    'An admin makes one with ', h('code', null, 'service-runtime tokens create --name you --role operator'),
    '. It is kept for this browser tab only.');
  // The provider sends the browser back here, at the tab it left.
  const next = `/${location.hash || '#/chat'}`;
  const sso = singleSignOn
    ? h('p', null, h('a', {
      class: 'button primary', id: 'signin-sso', href: `/api/session/oidc?next=${encodeURIComponent(next)}`,
    }, singleSignOn))
    : null;
  main.replaceChildren(
    h('h1', { tabindex: '-1' }, 'Sign in'),
    h('p', null, 'This server asks everyone who calls it to sign in.'),
    sso,
    form('signin-form', [name, password], 'Sign in',
      () => api('/session', { method: 'POST', body: { name: name.input.value.trim(), password: password.input.value } }),
      signedIn),
    h('details', { class: 'signin-token' },
      h('summary', null, 'Sign in with an API token'),
      form('token-form', [token], 'Use token',
        async () => {
          credential.set(token.input.value.trim());
          try {
            await signedIn();
          } catch (e) {
            credential.clear();
            throw e;
          }
        },
        () => {})));
  main.dataset.ready = 'signin';
  name.input.focus();
}
