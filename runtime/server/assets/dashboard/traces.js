// Traces: a chart of how long recent runs took, the recorded runs newest first, and one run in
// detail with each LLM call and tool invocation on a timeline (a run of the runs API that is
// still running is watched live there, wherever it was started).

import {
  absolute, api, byWhom, empty, emptyState, enc, getEventStream, h, ms, parseTime, pill, pretty,
  report, svg, table, timeEl, traceLink, truncate,
} from './lib.js';

const PAGE = 25;
/** Runs the chart shows. */
const CHART_RUNS = 100;
const CHART = { width: 720, narrowWidth: 360, height: 180, left: 56, right: 12, top: 12, bottom: 28 };

/** A latency-over-time chart (plain SVG) of `traces`; each point links to its trace. */
function latencyChart(traces) {
  const runs = traces
    .filter((t) => t.latency_ms != null && parseTime(t.created_at) !== null)
    .map((t) => ({ ...t, at: parseTime(t.created_at) }))
    .sort((a, b) => a.at - b.at);
  if (runs.length < 2) return null;
  const { height, left, right, top, bottom } = CHART;
  // Drawn about as wide as it is shown, so its labels keep their size on a phone.
  const width = window.matchMedia('(max-width: 760px)').matches ? CHART.narrowWidth : CHART.width;
  const first = runs[0].at;
  const span = Math.max(1, runs[runs.length - 1].at - first);
  const slowest = Math.max(...runs.map((r) => r.latency_ms));
  const ceiling = niceCeiling(slowest);
  const x = (at) => left + ((at - first) / span) * (width - left - right);
  const y = (latency) => top + (1 - latency / ceiling) * (height - top - bottom);
  const sorted = runs.map((r) => r.latency_ms).sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)];
  // Below 10 ms the middle line reads in tenths (0.5 ms), not rounded onto its neighbour.
  const grid = [0, ceiling / 2, ceiling].map((value) => [
    svg('line', { class: 'grid', x1: left, x2: width - right, y1: y(value), y2: y(value) }),
    svg('text', { class: 'axis', x: left - 6, y: y(value) + 4, 'text-anchor': 'end' }, ms(value < 10 ? Number(value.toFixed(1)) : Math.round(value))),
  ]);
  const line = svg('polyline', {
    class: 'latency-line',
    points: runs.map((r) => `${x(r.at).toFixed(1)},${y(r.latency_ms).toFixed(1)}`).join(' '),
  });
  const points = runs.map((r) => svg('a', { href: `#/traces/${enc(r.id)}` },
    svg('circle', {
      class: `point point-${r.status === 'error' ? 'error' : 'ok'}`,
      cx: x(r.at).toFixed(1), cy: y(r.latency_ms).toFixed(1), r: 3.5,
      'data-trace': r.id,
    }, svg('title', null, `${ms(r.latency_ms)} · ${r.status} · ${absolute(r.created_at)}\n${truncate(r.prompt, 80)}`))));
  const when = (at, anchor, xPos) => svg('text', { class: 'axis', x: xPos, y: height - 8, 'text-anchor': anchor },
    new Date(at).toLocaleString([], { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' }));
  const chart = svg('svg', {
    class: 'latency-chart', id: 'latency-chart', viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': `Latency of the last ${runs.length} runs: median ${ms(median)}, slowest ${ms(slowest)}`,
  }, grid, line, points, when(first, 'start', left), when(runs[runs.length - 1].at, 'end', width - right));
  return h('figure', { class: 'card chart-card' },
    h('figcaption', null,
      h('strong', null, 'Latency of recent runs'),
      h('span', { class: 'muted' }, ` · last ${runs.length} · median ${ms(median)} · slowest ${ms(slowest)}`),
      h('span', { class: 'legend' },
        h('span', { class: 'legend-dot point-ok' }), 'ok',
        h('span', { class: 'legend-dot point-error' }), 'error')),
    chart);
}

/** 1, 2 or 5 times a power of ten, at least `value`, so the axis reads in round numbers. */
function niceCeiling(value) {
  const power = 10 ** Math.floor(Math.log10(Math.max(1, value)));
  return [1, 2, 5, 10].map((m) => m * power).find((c) => c >= value);
}

async function listView(main, route, ctx) {
  const offset = Math.max(0, Number.parseInt(route.params.get('offset') || '0', 10) || 0);
  const [{ traces, total }, recent] = await Promise.all([
    api(`/traces?limit=${PAGE}&offset=${offset}`, { signal: ctx.signal }),
    offset === 0 ? api(`/traces?limit=${CHART_RUNS}`, { signal: ctx.signal }) : null,
  ]);
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' },
    offset > 0 ? h('a', { class: 'button ghost', href: `#/traces?offset=${Math.max(0, offset - PAGE)}` }, '← Newer') : null,
    h('span', { class: 'muted' }, total ? `${offset + 1}–${offset + traces.length} of ${total}` : ''),
    offset + PAGE < total ? h('a', { class: 'button ghost', href: `#/traces?offset=${offset + PAGE}` }, 'Older →') : null);
  const body = traces.length === 0
    ? emptyState({
      title: 'No runs recorded yet',
      text: 'Every chat, CLI run, delegation and scheduled run leaves a trace here, with each LLM call and tool call and their timings.',
      action: h('a', { class: 'button primary', href: '#/chat' }, 'Start a chat'),
    })
    : table(['When', 'Agent', 'Source', 'Status', 'Model', 'Latency', 'Prompt'],
      traces.map((t) => ({
        props: { dataset: { trace: t.id } },
        cells: [
          h('span', { class: 'nowrap' }, timeEl(t.created_at)),
          t.agent_profile_name || h('span', { class: 'muted' }, '—'),
          t.started_by ? [t.source, h('span', { class: 'muted trace-by' }, ` · ${byWhom(t.started_by)}`)] : t.source,
          pill(t.status),
          h('code', null, t.model),
          ms(t.latency_ms),
          h('a', { href: `#/traces/${enc(t.id)}`, class: 'trace-open', title: t.prompt }, truncate(t.prompt, 80) || (t.content_hidden ? '(content hidden from your role)' : '(empty prompt)')),
        ],
      })), { caption: 'Traces' });
  main.append(h('section', { class: 'view' },
    h('div', { class: 'view-header' },
      h('div', null, h('h1', { tabindex: '-1' }, 'Traces'),
        h('p', { class: 'sub' }, 'Every agent run, with its LLM calls and tool invocations.'))),
    recent ? latencyChart(recent.traces) : null,
    body,
    pager));
}

function block(label, text, extraClass) {
  if (text == null || text === '') return null;
  return h('div', { class: `block ${extraClass || ''}` }, h('h3', null, label), h('pre', null, text));
}

function stepCard(step, start, span) {
  const isLlm = step.kind === 'llm_call';
  const offset = Math.max(0, (parseTime(step.started_at) ?? start) - start);
  const bar = h('span', { class: `bar ${isLlm ? 'bar-llm' : 'bar-tool'}` });
  bar.style.left = `${Math.min(100, (offset / span) * 100)}%`;
  bar.style.width = `${Math.max(0.5, Math.min(100, (step.latency_ms / span) * 100))}%`;
  const title = isLlm
    ? [h('span', { class: 'step-kind' }, 'LLM call'), h('code', null, `${step.provider} · ${step.model}`)]
    : [h('span', { class: 'step-kind tool' }, 'Tool'), h('code', null, step.tool_name)];
  const tokens = isLlm && (step.input_tokens != null || step.output_tokens != null)
    ? h('span', { class: 'muted' }, `${step.input_tokens ?? '?'} in / ${step.output_tokens ?? '?'} out tokens`)
    : null;
  return h('li', { class: `step card ${isLlm ? 'step-llm' : 'step-tool'}`, dataset: { kind: step.kind } },
    h('div', { class: 'step-head' },
      h('span', { class: 'step-no' }, `#${step.step + 1}`), title, pill(step.status),
      h('span', { class: 'step-time', title: absolute(step.started_at) }, `+${ms(offset)} · ${ms(step.latency_ms)}`),
      tokens),
    h('div', { class: 'timeline', 'aria-hidden': 'true' }, bar),
    isLlm ? null : block('Input', pretty(step.input)),
    isLlm ? block('Response', step.response_text) : block('Output', step.output),
    block('Error', step.error_message, 'failed'));
}

async function detailView(main, id, ctx) {
  const trace = await api(`/traces/${enc(id)}`, { signal: ctx.signal });
  const start = parseTime(trace.created_at) ?? 0;
  const ends = trace.steps.map((s) => (parseTime(s.started_at) ?? start) - start + s.latency_ms);
  const span = Math.max(1, trace.latency_ms || 0, ...ends);
  const meta = [
    ['Status', pill(trace.status)],
    ['Agent', trace.agent_profile_name || '—'],
    ['Source', trace.source],
    trace.started_by ? ['Asked by', byWhom(trace.started_by)] : null,
    ['Provider', `${trace.provider} · ${trace.model}`],
    ['Started', timeEl(trace.created_at)],
    ['Latency', ms(trace.latency_ms)],
    ['Tokens', trace.input_tokens == null ? '—' : `${trace.input_tokens} in / ${trace.output_tokens ?? '?'} out`],
    trace.parent_trace_id ? ['Called by', traceLink(trace.parent_trace_id)] : null,
  ].filter(Boolean);
  main.append(h('section', { class: 'view trace-detail', dataset: { trace: trace.id } },
    h('div', { class: 'view-header' },
      h('div', null,
        h('a', { href: '#/traces', class: 'back' }, '← All traces'),
        h('h1', { tabindex: '-1' }, 'Trace ', h('code', { class: 'trace-id' }, trace.id)))),
    h('dl', { class: 'meta meta-grid card' }, meta.map(([k, v]) => [h('dt', null, k), h('dd', null, v)])),
    trace.warnings.length
      ? h('div', { class: 'notice' }, h('strong', null, 'Warnings'), h('ul', null, trace.warnings.map((w) => h('li', null, w))))
      : null,
    trace.error_message ? h('div', { class: 'error-box', role: 'alert' }, trace.error_message) : null,
    trace.content_hidden
      ? h('p', { class: 'notice', id: 'content-hidden' }, 'What people, models and tools wrote in this run is hidden from your role (it needs manage_conversations, unless you asked for the run).')
      : h('div', { class: 'two-col' }, block('Prompt', trace.prompt), block('Response', trace.response)),
    h('h2', null, `Steps (${trace.steps.length})`),
    trace.steps.length
      ? h('ol', { class: 'steps', id: 'trace-steps' }, trace.steps.map((s) => stepCard(s, start, span)))
      : empty('This run recorded no steps.')));
  if (trace.status === 'running') watch(main, trace.id, ctx).catch(report);
}

/** Follows a running run of the runs API (started anywhere) live under its trace's
 * header: its answer as it streams; the trace shows again, whole, once the run ends. */
async function watch(main, traceId, ctx) {
  const { runs } = await api(`/runs?trace_id=${enc(traceId)}`, { signal: ctx.signal }).catch(() => ({ runs: [] }));
  if (!runs.length || !ctx.active) return;
  const text = document.createTextNode('');
  const state = h('span', { class: 'pill pill-running' }, 'live');
  main.querySelector('.meta-grid').after(h('div', { class: 'card live-run', id: 'trace-live' },
    h('div', { class: 'tool-head' }, h('strong', null, 'Answer so far '), state),
    h('pre', { class: 'live-text' }, text)));
  let ended = false;
  await getEventStream(`/runs/${enc(runs[0].run_id)}/stream`, {
    signal: ctx.signal,
    onFrame: (frame) => {
      if (frame.type === 'token') text.appendData(frame.text);
      else if (['done', 'error', 'approval_required'].includes(frame.type)) ended = true;
    },
  });
  if (ended && ctx.active) window.dispatchEvent(new HashChangeEvent('hashchange'));
}

export async function tracesView(main, route, ctx) {
  if (route.args[0]) await detailView(main, route.args[0], ctx);
  else await listView(main, route, ctx);
}
