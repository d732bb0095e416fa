// What every JavaScript adapter needs besides its own logic, the shape of the Rust guests'
// `guest-util` crate: answers (text, JSON, `{"error": ...}`), request parts, a JSON body, a
// route table that turns thrown `HttpError`s into answers, and the contract's errors as text.
// Nothing here imports the contract: the app imports what it calls.

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** An answer with `body` (a string or bytes) as `contentType`. */
export function respond(status, contentType, body) {
  const bytes = typeof body === 'string' ? encoder.encode(body) : body;
  return { status, headers: [['content-type', contentType]], body: bytes };
}

/** A `text/plain` answer. */
export function text(status, body) {
  return respond(status, 'text/plain; charset=utf-8', body);
}

/** A JSON answer. */
export function json(status, value) {
  return respond(status, 'application/json', JSON.stringify(value));
}

/** `{"error": message}`, the shape of every error of the API. */
export function error(status, message) {
  return json(status, { error: message });
}

/** A failure a handler throws to answer `error(status, message)`. */
export class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** The first value of `key` in the query string, percent-decoded. */
export function queryParam(request, key) {
  return new URLSearchParams(request.query).get(key) ?? undefined;
}

/** The body as text; undecodable bytes are replaced rather than failing. */
export function bodyText(request) {
  return decoder.decode(request.body);
}

/** The body as a JSON object, or an `HttpError` 400 saying why not. */
export function readJson(request) {
  let value;
  try {
    value = JSON.parse(bodyText(request));
  } catch (e) {
    throw new HttpError(400, `the body is not JSON: ${e.message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new HttpError(400, 'the body must be a JSON object');
  }
  return value;
}

/**
 * A route table, `{ 'POST /echo': handler, ... }`: `routes()` is what `describe` lists, and
 * `handle(request)` calls the matching handler (which may be async, e.g. to `await fetch`;
 * componentize-js runs the event loop until the answer is there). A thrown `HttpError` becomes its answer; any
 * other exception a 500 naming it, so a bug shows in the answer rather than as a trap.
 */
export function router(table) {
  return {
    routes() {
      return Object.keys(table).map((key) => {
        const [method, path] = key.split(' ');
        return { method, path };
      });
    },
    handle(request) {
      const key = `${request.method} ${request.path}`;
      if (!Object.hasOwn(table, key)) {
        // The host sends only declared routes; this is a route declared without a handler.
        return error(404, `no route ${request.method} ${request.path}`);
      }
      // A sync handler's answer is returned as it is: only an async one costs a turn of the
      // event loop.
      try {
        const answer = table[key](request);
        return answer instanceof Promise ? answer.catch(failed) : answer;
      } catch (e) {
        return failed(e);
      }
    },
  };
}

/** The answer to what a handler threw. */
function failed(e) {
  if (e instanceof HttpError) {
    return error(e.status, e.message);
  }
  return error(500, `${e}`);
}

/**
 * What a contract import's error says. An import whose result is an error throws an `Error`
 * whose `payload` is that error: the `error` variant (`{tag: 'quota-exceeded', val: '...'}`)
 * or a record such as the agent's `run-error`.
 */
export function describeError(e) {
  const payload = e?.payload;
  if (payload === undefined) {
    return `${e}`;
  }
  if (typeof payload === 'string') {
    return payload;
  }
  if ('tag' in payload) {
    return `${payload.tag}: ${payload.val}`;
  }
  return payload.message ?? JSON.stringify(payload);
}
