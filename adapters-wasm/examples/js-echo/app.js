// js-echo: an adapter written in JavaScript, built with componentize-js for the contract's
// `adapter-with-tools` world (`service:adapter@0.2.3`).
//
// Under /api/adapters/js-echo/ it serves `GET /hello`, `POST /echo`, `GET /fetch?url=...`
// (the standard `fetch`, which the host sends only to the origins its grant names), and
// `POST /ask`, which runs an agent once per event id (a kv claim turns a retried event away).
// It offers agents one tool, `js_word_count`. It needs the `agent` and `kv` grants
// (grant.toml), and `outbound_hosts` for `/fetch`; every other import componentize-js brings
// in is never called.

import { run } from 'service:adapter/agent@0.2.3';
import { claim, delete as forget } from 'service:adapter/kv@0.2.3';
import { touch } from 'service:adapter/registry@0.2.3';

import {
  HttpError,
  bodyText,
  describeError,
  json,
  queryParam,
  readJson,
  router,
  text,
} from './guest-util.js';

const NAME = 'js-echo';
const VERSION = '0.1.0';

// An event id is remembered this long; a retry within it gets `{"duplicate": true}`.
const SEEN_FOR_MS = 24n * 60n * 60n * 1000n;
const MAX_ID_CHARS = 200;

// The HTTP status for each way an agent run fails.
const RUN_FAILURE_STATUS = {
  invalid: 400,
  'unknown-agent': 404,
  limited: 429,
  'not-configured': 503,
  denied: 503,
  cancelled: 502,
  failed: 502,
};

// The HTTP status for each of the contract's `error` cases (here, from kv).
const HOST_ERROR_STATUS = {
  invalid: 400,
  'quota-exceeded': 429,
  denied: 503,
  failed: 503,
};

const WORD_COUNT_PARAMETERS = {
  type: 'object',
  properties: { text: { type: 'string', description: 'The text whose words to count' } },
  required: ['text'],
  additionalProperties: false,
};

function hello(request) {
  touch();
  const name = queryParam(request, 'name');
  const greeting = name ? `hello ${name}, from` : 'hello from';
  return text(200, `${greeting} ${NAME} ${VERSION}`);
}

function echo(request) {
  touch();
  return text(200, `${NAME} got: ${bodyText(request)}`);
}

// `fetch` goes out through `wasi:http`: the host sends it only to a granted origin (anything
// else fails as a `TypeError` here, and shows on the adapter's entry), and fills a
// `{{secret:NAME}}` header placeholder for the origins that secret is bound to.
async function fetchUrl(request) {
  const url = queryParam(request, 'url');
  if (!url) {
    throw new HttpError(400, 'url is required');
  }
  let response;
  try {
    response = await fetch(url);
  } catch (e) {
    throw new HttpError(502, `fetch failed: ${e.message ?? e}`);
  }
  return text(200, `${response.status}\n${await response.text()}`);
}

// `{"id": "...", "prompt": "...", "agent": "..."}` → `{"reply", "trace_id"}`.
function ask(request) {
  const { id, prompt, agent } = readJson(request);
  if (typeof id !== 'string' || id.length === 0 || id.length > MAX_ID_CHARS) {
    throw new HttpError(400, `id must be a string of 1 to ${MAX_ID_CHARS} characters`);
  }
  if (typeof prompt !== 'string' || prompt.trim() === '') {
    throw new HttpError(400, 'prompt must be a non-empty string');
  }
  if (agent !== undefined && typeof agent !== 'string') {
    throw new HttpError(400, 'agent must be a string');
  }
  const key = `ask:${id}`;
  let first;
  try {
    first = claim(key, SEEN_FOR_MS);
  } catch (e) {
    throw new HttpError(HOST_ERROR_STATUS[e.payload?.tag] ?? 503, describeError(e));
  }
  touch();
  if (!first) {
    return json(200, { duplicate: true });
  }
  try {
    const reply = run({ prompt, profile: agent, profileRequired: agent !== undefined, history: [] });
    return json(200, { reply: reply.text, trace_id: reply.traceId });
  } catch (e) {
    // A failed run leaves the event unhandled, so a retry may run it again.
    try {
      forget(key);
    } catch {
      // Kept until it expires: a retry is then answered as a duplicate.
    }
    const failure = e.payload ?? { kind: 'failed', message: `${e}` };
    return json(RUN_FAILURE_STATUS[failure.kind] ?? 502, {
      error: failure.message,
      trace_id: failure.traceId ?? null,
    });
  }
}

const routes = router({
  'GET /hello': hello,
  'POST /echo': echo,
  'GET /fetch': fetchUrl,
  'POST /ask': ask,
});

export const handler = {
  describe() {
    return {
      name: NAME,
      version: VERSION,
      routes: routes.routes(),
      requiredSecrets: [],
      metadata: [
        ['language', 'javascript'],
        ['auth', 'none'],
      ],
    };
  },

  handleHttp(request) {
    return routes.handle(request);
  },

  runJob() {
    // It never enqueues jobs, so the host has no reason to call this.
    throw { message: `${NAME} has no jobs`, retryAfterMs: undefined };
  },
};

export const toolProvider = {
  listTools() {
    return [
      {
        name: 'js_word_count',
        description: 'Counts the words of a text',
        parametersJson: JSON.stringify(WORD_COUNT_PARAMETERS),
      },
    ];
  },

  callTool(name, argsJson) {
    if (name !== 'js_word_count') {
      throw `unknown tool ${name}`;
    }
    // The host checks the arguments against the schema first; checking again turns a host
    // bug into an error the model can read instead of a trap.
    let args;
    try {
      args = JSON.parse(argsJson);
    } catch (e) {
      throw `arguments are not JSON: ${e.message}`;
    }
    if (typeof args?.text !== 'string') {
      throw 'expected {"text": <string>}';
    }
    const words = args.text.split(/\s+/).filter((word) => word !== '');
    return `${words.length}`;
  },
};
