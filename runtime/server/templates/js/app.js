// {{name}}: a service-runtime adapter written in JavaScript (componentize-js).
//
// Under /api/adapters/{{name}}/ it serves `GET /hello`, `POST /ask`, which runs an agent with
// the request body as its prompt and answers the agent's reply, and `GET /upstream`, which
// answers what the standard `fetch` got from UPSTREAM. Its grant (grant.toml) allows agent runs
// and requests to UPSTREAM's origin: the host sends `fetch` nowhere else. The plumbing
// (answers, errors, the route table) is in guest-util.js.

import { run } from 'service:adapter/agent@0.2.3';
import { touch } from 'service:adapter/registry@0.2.3';

import { HttpError, bodyText, router, text } from './guest-util.js';

const NAME = '{{name}}';
const VERSION = '0.1.0';
// Its origin is in grant.toml (`outbound_hosts`); change both together.
const UPSTREAM = 'https://example.com/';

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

function hello() {
  return text(200, `hello from ${NAME} ${VERSION}`);
}

// Runs the `default` agent with the body as the prompt.
function ask(request) {
  const prompt = bodyText(request);
  if (prompt.trim() === '') {
    throw new HttpError(400, 'the body is the prompt, and it is empty');
  }
  let reply;
  try {
    reply = run({ prompt, profile: undefined, profileRequired: false, history: [] });
  } catch (e) {
    const failure = e.payload ?? { kind: 'failed', message: `${e}` };
    throw new HttpError(RUN_FAILURE_STATUS[failure.kind] ?? 502, failure.message);
  }
  return text(200, reply.text);
}

// Routes may be async: componentize-js runs the event loop until the answer is there.
async function upstream() {
  let response;
  try {
    response = await fetch(UPSTREAM);
  } catch (e) {
    throw new HttpError(502, `${UPSTREAM} could not be reached: ${e.message ?? e}`);
  }
  return text(200, `${UPSTREAM} answered ${response.status}: ${await response.text()}`);
}

// `describe` lists these and `handleHttp` serves exactly these.
const routes = router({
  'GET /hello': hello,
  'POST /ask': ask,
  'GET /upstream': upstream,
});

export const handler = {
  describe() {
    return {
      name: NAME,
      version: VERSION,
      routes: routes.routes(),
      requiredSecrets: [],
      metadata: [['language', 'javascript']],
    };
  },

  handleHttp(request) {
    // Shows as `last_activity_at` on the adapter's registry entry.
    touch();
    return routes.handle(request);
  },

  runJob() {
    // It never enqueues jobs, so the host has no reason to call this.
    throw { message: `${NAME} has no jobs`, retryAfterMs: undefined };
  },
};
