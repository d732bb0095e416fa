"""{{name}}: a service-runtime adapter written in Python (componentize-py).

Under `/api/adapters/{{name}}/` it serves `GET /hello` and `POST /ask`, which runs an agent with
the request body as its prompt and answers the agent's reply. Its grant (grant.toml) allows
agent runs. The plumbing (answers, errors, the route table) is in `guest_util.py`.
"""

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.handler import Job, JobFailure
from wit_world.imports import agent, registry
from wit_world.imports.agent import FailureKind, RunRequest
from wit_world.imports.types import Description, HttpRequest, HttpResponse

from guest_util import HttpError, Router, body_text, text

NAME = "{{name}}"
VERSION = "0.1.0"

# The HTTP status for each way an agent run fails.
RUN_FAILURE_STATUS = {
    FailureKind.INVALID: 400,
    FailureKind.UNKNOWN_AGENT: 404,
    FailureKind.LIMITED: 429,
    FailureKind.NOT_CONFIGURED: 503,
    FailureKind.DENIED: 503,
    FailureKind.CANCELLED: 502,
    FailureKind.FAILED: 502,
}


def hello(request: HttpRequest) -> HttpResponse:
    return text(200, f"hello from {NAME} {VERSION}")


def ask(request: HttpRequest) -> HttpResponse:
    """Runs the `default` agent with the body as the prompt."""
    prompt = body_text(request)
    if not prompt.strip():
        raise HttpError(400, "the body is the prompt, and it is empty")
    try:
        reply = agent.run(
            RunRequest(prompt=prompt, profile=None, profile_required=False, history=[])
        )
    except Err as e:
        raise HttpError(RUN_FAILURE_STATUS[e.value.kind], e.value.message) from None
    return text(200, reply.text)


# `describe` lists these and `handle_http` serves exactly these.
ROUTES = Router({("GET", "/hello"): hello, ("POST", "/ask"): ask})


class Handler(exports.Handler):
    def describe(self) -> Description:
        return Description(
            name=NAME,
            version=VERSION,
            routes=ROUTES.routes(),
            required_secrets=[],
            metadata=[("language", "python")],
        )

    def handle_http(self, request: HttpRequest) -> HttpResponse:
        # Shows as `last_activity_at` on the adapter's registry entry.
        registry.touch()
        return ROUTES.handle(request)

    def run_job(self, job: Job) -> None:
        # It never enqueues jobs, so the host has no reason to call this.
        raise Err(JobFailure(message=f"{NAME} has no jobs", retry_after_ms=None))
