// An adapter's shadow build beside its serving one (`adapters install --shadow`): how many live
// calls it was run on, how many it answered the same, and its latest differences, each with
// what the live build and the shadow answered and the imports the shadow was refused. Shown
// above the adapter's recordings.

import { ApiError, api, empty, enc, h, pill, pretty, timeEl } from './lib.js';

function block(label, value) {
  return h('div', { class: 'block' }, h('h3', null, label), h('pre', null, pretty(value)));
}

function side(label, said) {
  return h('div', { class: 'block' },
    h('h3', null, label, ' ', pill(said.outcome === 'ok' ? 'ok' : 'error', said.outcome)),
    said.error ? h('p', { class: 'error-text' }, said.error) : null,
    h('pre', null, pretty(said.output)));
}

function difference(d) {
  const refused = d.refused || [];
  return h('li', { class: 'step card difference', dataset: { difference: d.id } },
    h('div', { class: 'step-head' }, timeEl(d.at), h('code', null, d.export),
      d.input && d.input.path ? h('code', null, `${d.input.method} ${d.input.path}`) : null),
    h('div', { class: 'two-col' }, side('Live build answered', d.live), side('Shadow answered', d.shadow)),
    refused.length
      ? h('div', { class: 'refused' }, h('h3', null, `Refused to the shadow (${refused.length})`),
        h('ul', null, refused.map((r) => h('li', null, h('code', null, r.import), ' ', h('span', { class: 'muted' }, JSON.stringify(r.args))))))
      : null,
    h('details', null, h('summary', null, 'Input'), block('Input', d.input)));
}

/** The shadow section of adapter `name`, or null when it has none (its registry entry says
 * whether it has one: no request is made for a shadow that is not there). */
export async function shadowSection(name, signal) {
  const { adapters } = await api('/adapters', { signal });
  const shadow = adapters.find((a) => a.name === name)?.metadata?.shadow;
  if (!shadow || shadow.startsWith('cannot load')) return null;
  let s;
  try {
    s = await api(`/adapters/${enc(name)}/shadow`, { signal });
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return null;
    throw e;
  }
  const rate = s.compared ? `${Math.round((100 * s.matched) / s.compared)}%` : '—';
  const counts = [
    ['Compared', String(s.compared)],
    ['Matched', `${s.matched} (${rate})`],
    ['Differed', String(s.compared - s.matched)],
    ['Skipped (no free instance)', String(s.skipped)],
    ['Since', timeEl(s.since)],
  ];
  return h('section', { class: 'shadow card', dataset: { shadow: s.version } },
    h('h2', null, 'Shadow build ', h('code', null, s.version), ' ', h('span', { class: 'muted' }, `${s.sha256.slice(0, 12)}…`)),
    h('p', { class: 'sub' }, 'Runs on live calls with their imports answered from the live call; nothing it does leaves. ',
      h('code', null, `service-runtime adapters promote ${name}`), ' makes it serve; ',
      h('code', null, `adapters unshadow ${name}`), ' drops it.'),
    h('dl', { class: 'meta meta-grid' }, counts.map(([k, v]) => [h('dt', null, k), h('dd', null, v)])),
    h('h3', null, 'Latest differences'),
    s.differences.length
      ? h('ol', { class: 'steps', id: 'shadow-differences' }, s.differences.map(difference))
      : empty('It answered every compared call as the live build did.'));
}
