// The sign-in page, shown instead of the tabs when the server asks every caller for a
// credential and this tab has none.

import { api, credential, h } from './lib.js';

/** Renders the form into `main`; calls `onSignedIn(me)` once a token names someone. */
export function signinView(main, onSignedIn) {
  const input = h('input', {
    id: 'signin-token', type: 'password', autocomplete: 'off', spellcheck: 'false',
    required: true, 'aria-describedby': 'signin-hint signin-error',
  });
  const error = h('p', { class: 'field-error', id: 'signin-error', role: 'alert' });
  const submit = h('button', { type: 'submit', id: 'signin-submit', class: 'primary' }, 'Sign in');
  const form = h('form', { class: 'signin', novalidate: true },
    h('div', { class: 'field' },
      h('label', { for: 'signin-token' }, 'API token'),
      input,
      h('p', { class: 'hint', id: 'signin-hint' },
        'An admin makes one on the server with ',
        h('code', null, 'service-runtime tokens create --name you --role operator'),
        '. It is kept for this browser tab only.'),
      error),
    submit);
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    error.textContent = '';
    const token = input.value.trim();
    if (!token) {
      error.textContent = 'Paste your API token.';
      return;
    }
    submit.disabled = true;
    credential.set(token);
    try {
      const me = await api('/me');
      if (!me.principal) throw new Error('the server did not accept the token');
      onSignedIn(me);
    } catch (e) {
      credential.clear();
      error.textContent = e.message;
      input.focus();
    } finally {
      submit.disabled = false;
    }
  });
  main.replaceChildren(
    h('h1', { tabindex: '-1' }, 'Sign in'),
    h('p', null, 'This server asks everyone who calls it to sign in.'),
    form);
  main.dataset.view = 'signin';
  main.dataset.ready = 'signin';
  input.focus();
}
