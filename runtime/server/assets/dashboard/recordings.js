// An adapter's recorded calls (its failures first), and one call whole: its input, every import
// it made on a timeline, in order, and what it answered. Reached from an adapter's card; a
// shadow build's comparisons show above the list (`shadow.js`).

import { shadowSection } from './shadow.js';
import { api, empty, emptyState, enc, filterTabs, h, ms, pill, pretty, table, timeEl } from './lib.js';

/** The tabs: failures (failed and error), then each outcome, then all. */
const TABS = [
  { key: '', label: 'Failures', keep: (r) => r.outcome !== 'ok' },
  { key: 'failed', label: 'Failed', keep: (r) => r.outcome === 'failed' },
  { key: 'error', label: 'Did not finish', keep: (r) => r.outcome === 'error' },
  { key: 'ok', label: 'Ok', keep: (r) => r.outcome === 'ok' },
  { key: 'all', label: 'All', keep: () => true },
];

const OUTCOME_PILL = { ok: 'ok', failed: 'error', error: 'error' };

function outcomePill(recording) {
  const label = recording.outcome === 'error' ? `error${recording.error_kind ? `: ${recording.error_kind}` : ''}` : recording.outcome;
  return pill(OUTCOME_PILL[recording.outcome], label);
}

function size(bytes) {
  return bytes < 1024 ? `${bytes} B` : `${(bytes / 1024).toFixed(1)} KiB`;
}

function header(name, back, title) {
  return h('div', { class: 'view-header' },
    h('div', null,
      h('a', { href: back.href, class: 'back' }, back.label),
      h('h1', { tabindex: '-1' }, title),
      h('p', { class: 'sub' }, `Calls of ${name} recorded with their imports (record in its grant: failures by default). Replay one offline with `,
        h('code', null, 'service-runtime adapters replay <id>'), '.')));
}

async function listView(main, name, route, ctx) {
  const wanted = route.params.get('outcome') || '';
  const tab = TABS.find((t) => t.key === wanted) || TABS[0];
  const [{ recordings }, shadow] = await Promise.all([
    api(`/adapters/${enc(name)}/recordings`, { signal: ctx.signal }),
    shadowSection(name, ctx.signal),
  ]);
  const shown = recordings.filter(tab.keep);
  const tabs = filterTabs(TABS.map((t) => ({
    key: t.key,
    label: t.label,
    count: recordings.filter(t.keep).length,
    href: `#/adapters/${enc(name)}${t.key ? `?outcome=${t.key}` : ''}`,
  })), tab.key, 'Filter by outcome');
  let body;
  if (recordings.length === 0) {
    body = emptyState({
      title: `No call of ${name} is recorded`,
      text: 'Failed calls are recorded by default; every call with record = "all" in its grant.',
    });
  } else if (shown.length === 0) {
    body = empty(`No ${tab.label.toLowerCase()} call is recorded.`);
  } else {
    body = table(['When', 'Export', 'Outcome', 'Took', 'Size', 'Error'], shown.map((r) => ({
      props: { dataset: { recording: r.id, outcome: r.outcome } },
      cells: [
        h('a', { href: `#/adapters/${enc(name)}/${enc(r.id)}` }, timeEl(r.at)),
        h('code', null, r.export),
        outcomePill(r),
        ms(r.duration_ms),
        r.cut ? h('span', { title: `${r.cut} imports past limits.recording_kib not kept` }, `${size(r.bytes)}, cut`) : size(r.bytes),
        r.error ? h('span', { class: 'truncate error-text', title: r.error }, r.error) : h('span', { class: 'muted' }, '—'),
      ],
    })), { caption: `Recorded calls of ${name}` });
  }
  main.append(h('section', { class: 'view recordings', dataset: { adapter: name } },
    header(name, { href: '#/adapters', label: '← All adapters' }, `Recordings of ${name}`),
    shadow,
    tabs,
    body));
}

/** One import on the timeline: its name, what it was asked and what it answered. */
function importItem(entry, index) {
  const drawn = entry.bytes != null;
  return h('li', { class: 'step card import', dataset: { import: entry.import } },
    h('div', { class: 'step-head' },
      h('span', { class: 'step-no' }, `#${index}`),
      h('code', null, entry.import),
      drawn ? h('span', { class: 'muted' }, `${entry.bytes.length / 2} bytes`) : null),
    drawn ? null : h('div', { class: 'two-col' },
      block('Asked', entry.args),
      block('Answered', entry.result)));
}

function block(label, value) {
  if (value == null) return h('div', { class: 'block' }, h('h3', null, label), h('p', { class: 'muted' }, 'nothing'));
  return h('div', { class: 'block' }, h('h3', null, label), h('pre', null, pretty(value)));
}

async function detailView(main, name, id, ctx) {
  const r = await api(`/adapters/${enc(name)}/recordings/${enc(id)}`, { signal: ctx.signal });
  const meta = [
    ['Export', h('code', null, r.export)],
    ['Outcome', outcomePill(r)],
    ['Started', timeEl(r.at)],
    ['Took', ms(r.duration_ms)],
    ['Size', r.cut ? `${size(r.bytes)} (${r.cut} imports past the bound not kept)` : size(r.bytes)],
  ];
  main.append(h('section', { class: 'view recording-detail', dataset: { recording: r.id } },
    header(name, { href: `#/adapters/${enc(name)}`, label: `← Recordings of ${name}` },
      ['Recording ', h('code', { class: 'trace-id' }, r.id)]),
    h('dl', { class: 'meta meta-grid card' }, meta.map(([k, v]) => [h('dt', null, k), h('dd', null, v)])),
    r.error ? h('div', { class: 'error-box', role: 'alert' }, `${r.error_kind}: ${r.error}`) : null,
    h('div', { class: 'two-col' }, block('Input', r.input), block('Output', r.output)),
    h('h2', null, `Imports (${r.imports.length})`),
    r.imports.length
      ? h('ol', { class: 'steps', id: 'recording-imports' }, r.imports.map(importItem))
      : empty('The call made no import.')));
}

export async function recordingsView(main, route, ctx) {
  const [name, id] = route.args;
  if (id) await detailView(main, name, id, ctx);
  else await listView(main, name, route, ctx);
}
