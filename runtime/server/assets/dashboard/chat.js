// Chat: pick an agent, send a prompt, watch the run stream in (tokens, tool calls and their
// results), then follow the trace. Each chat is a conversation the agent remembers; recent
// ones (adapters' threads too, read-only) can be reopened, and New chat starts another. The
// conversation survives switching tabs, and its id is in the address (#/chat?c=...). A tool
// call that needs approval shows Approve and Deny inline; the answer follows the decision.
// A run goes on without the page (`on_disconnect: "continue"`): a refresh in the middle of an
// answer re-joins its stream, and Stop cancels it.

import {
  ApiError, api, byWhom, dataChanged, dot, getEventStream, h, ms, postEventStream, pretty,
  traceLink, truncate,
} from './lib.js';

/** Where the tab keeps the run it streams, to re-join it after a refresh. */
const RUN_KEY = 'chat.run';

const state = {
  root: null,
  agents: [],
  busy: false,
  controller: null,
  /** The run streaming now, which Stop cancels. */
  run: null,
  /** The conversation this chat continues, once its first turn started it. */
  conversation: null,
};

let els = {};

function build() {
  els.agent = h('select', { id: 'chat-agent', name: 'agent', onchange: showAgent });
  els.dot = dot(null);
  els.agentInfo = h('span', { class: 'muted agent-info', id: 'chat-agent-info' });
  els.model = h('input', {
    id: 'chat-model', name: 'model', type: 'text', autocomplete: 'off', spellcheck: 'false',
    placeholder: 'profile or server default',
  });
  els.log = h('div', { class: 'chat-log', id: 'chat-log', role: 'log', 'aria-live': 'polite', tabindex: '0', 'aria-label': 'Conversation' },
    h('p', { class: 'empty chat-empty' },
      'Pick an agent and ask something. Tokens stream in as they arrive, tool calls and their results show inline, and the trace is linked when the run ends.'));
  els.prompt = h('textarea', {
    id: 'chat-prompt', name: 'prompt', rows: '3', required: true,
    placeholder: 'Ask the agent…  (Enter sends, Shift+Enter adds a line)',
    'aria-label': 'Prompt',
    onkeydown: (e) => {
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
        e.preventDefault();
        send();
      }
    },
  });
  els.send = h('button', { type: 'submit', id: 'chat-send', class: 'primary' }, 'Send');
  els.stop = h('button', { type: 'button', id: 'chat-stop', hidden: true, onclick: stop }, 'Stop');
  els.clear = h('button', { type: 'button', id: 'chat-new', class: 'ghost', onclick: () => newChat() }, 'New chat');
  els.recent = h('select', { id: 'chat-recent', name: 'recent', 'aria-label': 'Recent conversations', onchange: () => reopen(els.recent.value) });
  return h('section', { class: 'view chat-view' },
    h('div', { class: 'view-header' },
      h('div', null, h('h1', { tabindex: '-1' }, 'Chat'),
        h('p', { class: 'sub' }, 'Run an agent and watch it work.'))),
    h('div', { class: 'chat-controls' },
      h('div', { class: 'field inline' },
        h('label', { for: 'chat-agent' }, 'Agent'),
        h('span', { class: 'with-dot' }, els.dot, els.agent)),
      h('div', { class: 'field inline' },
        h('label', { for: 'chat-model' }, 'Model'), els.model),
      h('div', { class: 'field inline' },
        h('label', { for: 'chat-recent' }, 'Recent'), els.recent),
      els.agentInfo),
    els.log,
    h('form', { class: 'chat-form', id: 'chat-form', novalidate: true, onsubmit: (e) => { e.preventDefault(); send(); } },
      els.prompt,
      h('div', { class: 'chat-buttons' }, els.send, els.stop, els.clear)));
}

function showAgent() {
  const agent = state.agents.find((a) => a.name === els.agent.value);
  const fresh = dot(agent && agent.color);
  els.dot.replaceWith(fresh);
  els.dot = fresh;
  els.agentInfo.textContent = agent ? truncate(agent.description, 120) : '';
}

async function loadAgents(wanted) {
  const { agents } = await api('/agents');
  state.agents = agents;
  const previous = wanted || els.agent.value || 'default';
  els.agent.replaceChildren(...agents.map((a) => h('option', { value: a.name }, a.name)));
  els.agent.value = agents.some((a) => a.name === previous) ? previous : (agents[0] && agents[0].name) || '';
  showAgent();
}

/** Forgets the current conversation: the next message starts a new one. */
function newChat() {
  if (state.busy) return;
  setConversation(null);
  els.log.replaceChildren();
  els.recent.value = '';
  els.prompt.focus();
}

/** Which conversation the chat continues; its agent is fixed while it does, and a thread an
 * adapter holds is read here, not written to. */
function setConversation(conversation) {
  state.conversation = conversation;
  els.agent.disabled = Boolean(conversation);
  const readOnly = Boolean(conversation && conversation.source !== 'chat');
  els.prompt.disabled = readOnly;
  els.send.disabled = readOnly || state.busy;
  els.prompt.placeholder = readOnly
    ? `A ${conversation.source} thread: read-only here. New chat to talk to the agent.`
    : 'Ask the agent…  (Enter sends, Shift+Enter adds a line)';
  const wanted = conversation ? `#/chat?c=${encodeURIComponent(conversation.id)}` : '#/chat';
  if (location.hash !== wanted) history.replaceState(null, '', wanted);
}

async function loadRecent() {
  const { conversations } = await api('/conversations?limit=20');
  const by = (c) => (c.started_by && byWhom(c.started_by) !== 'you' ? ` · by ${c.started_by}` : '');
  const label = (c) => `${truncate(c.title, 48)} · ${c.agent}${c.source === 'chat' ? '' : ` · ${c.source}`}${by(c)}`;
  els.recent.replaceChildren(h('option', { value: '' }, conversations.length ? 'Reopen…' : 'none yet'),
    ...conversations.map((c) => h('option', { value: c.id }, label(c))));
  els.recent.value = state.conversation ? state.conversation.id : '';
}

/** Shows a conversation's messages and continues it. */
async function reopen(id) {
  if (state.busy || !id) return;
  const conversation = await api(`/conversations/${encodeURIComponent(id)}`);
  if (state.agents.some((a) => a.name === conversation.agent)) {
    els.agent.value = conversation.agent;
    showAgent();
  }
  const color = state.agents.find((a) => a.name === conversation.agent)?.color;
  // Someone else's conversation (an operator reading it) says whose words they are.
  const asker = conversation.started_by && byWhom(conversation.started_by) !== 'you' ? conversation.started_by : 'You';
  els.log.replaceChildren(...conversation.messages.map((m) => {
    if (m.role === 'user') {
      return h('article', { class: 'msg msg-user' }, h('div', { class: 'msg-who' }, asker), h('p', { class: 'msg-text' }, m.text));
    }
    const turn = new Turn(conversation.agent, color);
    for (const [i, call] of (m.tool_calls || []).entries()) {
      const callId = call.id || `call-${i}`;
      turn.toolCall({ id: callId, name: call.name, input: call.input });
      turn.toolResult({ id: callId, name: call.name, output: call.output, error: call.error });
    }
    turn.token(m.text);
    turn.finish(m.trace_id ? h('div', { class: 'msg-foot' }, 'Trace ', traceLink(m.trace_id)) : null);
    return turn.el;
  }));
  setConversation(conversation);
  els.recent.value = conversation.id;
  const { approvals } = await api('/approvals?status=pending');
  for (const approval of approvals.filter((a) => a.conversation_id === conversation.id)) {
    const turn = new Turn(conversation.agent, color);
    turn.awaitApproval(approval);
    els.log.append(turn.el);
  }
  scrollToEnd();
}

/** How long the chat watches for the answer after a decision before leaving it to Recent. */
const ANSWER_WAIT_MS = 120000;

/** The agent's answer to the run traced `traceId`, once it lands in `conversation`. */
async function answerOf(conversation, traceId) {
  const deadline = Date.now() + ANSWER_WAIT_MS;
  while (Date.now() < deadline) {
    const { messages } = await api(`/conversations/${encodeURIComponent(conversation)}`);
    const answer = messages.find((m) => m.role === 'assistant' && m.trace_id === traceId);
    if (answer) return answer;
    await new Promise((resolve) => { setTimeout(resolve, 500); });
  }
  return null;
}

function scrollToEnd() {
  els.log.scrollTop = els.log.scrollHeight;
}

function setBusy(busy) {
  state.busy = busy;
  els.send.disabled = busy || els.prompt.disabled;
  els.stop.hidden = !busy;
  els.clear.disabled = busy;
}

/** One agent turn in the log: text runs and tool cards in the order they happened. */
class Turn {
  constructor(agentName, color) {
    this.body = h('div', { class: 'msg-body' });
    this.el = h('article', { class: 'msg msg-agent streaming', 'aria-busy': 'true' },
      h('div', { class: 'msg-who' }, dot(color), agentName), this.body);
    this.text = null;
    this.tools = new Map();
  }

  token(text) {
    if (!this.text) {
      this.text = document.createTextNode('');
      this.body.append(h('p', { class: 'msg-text' }, this.text));
    }
    this.text.appendData(text);
  }

  toolCall({ id, name, input }) {
    this.text = null;
    const status = h('span', { class: 'pill pill-running tool-status' }, 'running');
    const card = h('div', { class: 'tool-card', dataset: { tool: name } },
      h('div', { class: 'tool-head' },
        h('span', { class: 'tool-label' }, 'Tool call'), h('code', { class: 'tool-name' }, name), status),
      h('details', { class: 'tool-input' }, h('summary', null, 'Input'), h('pre', null, pretty(input))));
    this.tools.set(id, { card, status });
    this.body.append(card);
  }

  toolResult({ id, name, output, error }) {
    let entry = this.tools.get(id);
    if (!entry) {
      this.toolCall({ id, name, input: {} });
      entry = this.tools.get(id);
    }
    const failed = error != null;
    entry.status.className = `pill tool-status pill-${failed ? 'error' : 'ok'}`;
    entry.status.textContent = failed ? 'error' : 'ok';
    const text = failed ? error : output ?? '';
    entry.card.append(h('div', { class: `tool-result${failed ? ' failed' : ''}` },
      h('span', { class: 'tool-label' }, failed ? 'Error' : 'Result'),
      h('pre', null, truncate(text, 4000))));
  }

  /** A call waiting for a person: its input, Approve and Deny; the answer follows. */
  awaitApproval({ id, approval_id: approvalId, tool, input, trace_id: traceId, conversation_id: conversation }) {
    const approval = approvalId || id;
    const note = h('p', { class: 'muted approval-state', role: 'status' }, 'Waiting for your approval.');
    const decide = async (decision) => {
      for (const button of buttons.querySelectorAll('button')) button.disabled = true;
      let decided;
      try {
        decided = await api(`/approvals/${encodeURIComponent(approval)}`, { method: 'POST', body: { decision } });
      } catch (e) {
        note.textContent = `Not decided: ${e.message}`;
        for (const button of buttons.querySelectorAll('button')) button.disabled = false;
        return;
      }
      buttons.remove();
      const by = decided && decided.decided_by ? ` by ${byWhom(decided.decided_by)}` : '';
      note.textContent = decision === 'approve' ? `Approved${by}: the run goes on.` : `Denied${by}: the agent is told.`;
      dataChanged();
      const answer = await answerOf(conversation, traceId).catch(() => null);
      if (answer) this.token(answer.text);
      this.finish(h('div', { class: 'msg-foot' }, answer ? 'Answered · trace ' : 'Still running · trace ', traceLink(traceId)));
      scrollToEnd();
    };
    const buttons = h('div', { class: 'approval-actions' },
      h('button', { type: 'button', class: 'primary approval-approve', onclick: () => decide('approve') }, 'Approve'),
      h('button', { type: 'button', class: 'danger approval-deny', onclick: () => decide('deny') }, 'Deny'));
    for (const { card, status } of this.tools.values()) {
      if (card.dataset.tool === tool && status.textContent === 'running') {
        status.className = 'pill tool-status pill-other';
        status.textContent = 'waiting';
      }
    }
    this.text = null;
    this.body.append(h('div', { class: 'approval-card', dataset: { approval } },
      h('div', { class: 'tool-head' },
        h('span', { class: 'tool-label' }, 'Needs approval'), h('code', { class: 'tool-name' }, tool)),
      h('pre', null, pretty(input)), note, buttons));
  }

  finish(footer) {
    this.el.classList.remove('streaming');
    this.el.removeAttribute('aria-busy');
    for (const { status } of this.tools.values()) {
      if (status.textContent === 'running') {
        status.className = 'pill tool-status pill-other';
        status.textContent = 'no result';
      }
    }
    if (footer) this.el.append(footer);
  }
}

function errorBox(message, traceId) {
  return h('div', { class: 'error-box msg-error', role: 'alert' },
    h('strong', null, 'Error: '), message,
    traceId ? h('span', null, ' · trace ', traceLink(traceId)) : null);
}

async function send() {
  const prompt = els.prompt.value.trim();
  if (state.busy) return;
  if (!prompt) {
    els.prompt.focus();
    return;
  }
  const agent = els.agent.value;
  const model = els.model.value.trim();
  const body = { prompt, agent, on_disconnect: 'continue' };
  if (model) body.model = model;
  if (state.conversation) body.conversation_id = state.conversation.id;
  const turn = startTurn(agent, prompt);
  await stream(turn, agent, prompt, (signal, onFrame, onOpen) => postEventStream('/chat/stream', body, {
    signal,
    onFrame,
    onOpen: (response) => {
      onOpen(response);
      const conversation = response.headers.get('X-Conversation-Id');
      keep(conversation, agent, prompt);
      sessionStorage.setItem(RUN_KEY, JSON.stringify({ run: state.run, conversation, agent, prompt }));
    },
  }));
}

/** Shows the prompt and an agent turn to stream into. */
function startTurn(agent, prompt) {
  const profile = state.agents.find((a) => a.name === agent);
  els.log.querySelector('.chat-empty')?.remove();
  els.log.append(h('article', { class: 'msg msg-user' },
    h('div', { class: 'msg-who' }, 'You'), h('p', { class: 'msg-text' }, prompt)));
  const turn = new Turn(agent, profile && profile.color);
  els.log.append(turn.el);
  els.prompt.value = '';
  scrollToEnd();
  return turn;
}

/** Streams a run's frames into `turn` through `open(signal, onFrame, onOpen)` until it ends. */
async function stream(turn, agent, prompt, open) {
  setBusy(true);
  state.controller = new AbortController();
  let ended = false;
  let traceId = null;
  const onOpen = (response) => {
    traceId = response.headers.get('X-Trace-Id') || traceId;
    state.run = response.headers.get('X-Run-Id') || state.run;
  };
  const onFrame = (frame) => {
    switch (frame.type) {
      case 'token': turn.token(frame.text); break;
      case 'tool_call': turn.toolCall(frame); break;
      case 'tool_result': turn.toolResult(frame); break;
      case 'done':
        ended = true;
        keep(frame.conversation_id, agent, prompt);
        turn.finish(h('div', { class: 'msg-foot' },
          'Done in ', ms(frame.latency_ms), ' · trace ', traceLink(frame.trace_id)));
        break;
      case 'approval_required':
        ended = true;
        keep(frame.conversation_id, agent, prompt);
        turn.awaitApproval(frame);
        dataChanged();
        break;
      case 'error':
        ended = true;
        keep(frame.conversation_id, agent, prompt);
        turn.finish(errorBox(frame.message, frame.trace_id));
        break;
      default: break;
    }
    scrollToEnd();
  };
  try {
    await open(state.controller.signal, onFrame, onOpen);
    if (!ended) turn.finish(errorBox('the stream ended before the run finished'));
  } catch (e) {
    if (e.name === 'AbortError') {
      turn.finish(h('div', { class: 'msg-foot muted' }, 'Stopped. The run was cancelled',
        traceId ? [' · trace ', traceLink(traceId)] : null, '.'));
    } else turn.finish(errorBox(e instanceof ApiError ? e.message : `the stream broke: ${e.message}`, e.traceId));
  } finally {
    sessionStorage.removeItem(RUN_KEY);
    state.run = null;
    setBusy(false);
    state.controller = null;
    scrollToEnd();
    dataChanged();
    loadRecent().catch(() => {});
    if (document.activeElement === document.body || document.activeElement === els.stop) els.prompt.focus();
  }
}

/** Stops the stream here and cancels its run, which would otherwise go on without the page. */
function stop() {
  const { run } = state;
  state.controller?.abort();
  if (run) api(`/runs/${encodeURIComponent(run)}/cancel`, { method: 'POST', body: {} }).catch(() => {});
}

/** Re-joins the run this tab streamed before a refresh, from its first frame, if it still
 * runs; one that ended meanwhile is in its conversation already. */
async function rejoin() {
  const saved = JSON.parse(sessionStorage.getItem(RUN_KEY) || 'null');
  if (!saved || state.busy) return;
  const run = await api(`/runs/${encodeURIComponent(saved.run)}`).catch(() => null);
  if (!run || run.status !== 'running') {
    sessionStorage.removeItem(RUN_KEY);
    if (run && saved.conversation) await reopen(saved.conversation);
    return;
  }
  if (saved.conversation && state.conversation?.id !== saved.conversation) await reopen(saved.conversation);
  state.run = saved.run;
  const turn = startTurn(saved.agent, saved.prompt);
  await stream(turn, saved.agent, saved.prompt, (signal, onFrame, onOpen) => getEventStream(
    `/runs/${encodeURIComponent(saved.run)}/stream`, { signal, onFrame, onOpen }));
}

/** Continues the conversation a turn was kept in (the first turn starts it). */
function keep(id, agent, prompt) {
  if (id && (!state.conversation || state.conversation.id !== id)) {
    setConversation({ id, agent, source: 'chat', title: prompt });
  }
}

export async function chatView(main, route) {
  if (!state.root) state.root = build();
  main.append(state.root);
  await loadAgents(route.params.get('agent'));
  await loadRecent();
  const wanted = route.params.get('c');
  if (wanted && wanted !== state.conversation?.id) await reopen(wanted);
  // Not awaited: the view is ready while the answer streams in.
  rejoin().catch(() => {});
  if (!state.busy && !els.prompt.disabled) els.prompt.focus({ preventScroll: true });
}
