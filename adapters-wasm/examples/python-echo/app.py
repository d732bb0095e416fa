"""python-echo: a minimal adapter written in Python (componentize-py).

Serves `POST /echo` and `GET /hello` under `/api/adapters/python-echo/`, and offers agents one
tool, `python_reverse`. It needs no grant: of the contract's imports (componentize-py brings in
all of them) it calls only `registry`, which is always available; the others are refused if
ever called. The plumbing (answers, errors, the route table) is in `guest_util.py`.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.handler import Job, JobFailure
from wit_world.imports import registry
from wit_world.imports.types import Description, HttpRequest, HttpResponse, ToolSpec

from guest_util import Router, body_text, query_param, text

NAME = "python-echo"
VERSION = "0.1.0"

REVERSE_PARAMETERS = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "The text to reverse"}},
    "required": ["text"],
    "additionalProperties": False,
}


def echo(request: HttpRequest) -> HttpResponse:
    # Shows as `last_activity_at` on the adapter's registry entry.
    registry.touch()
    return text(200, f"{NAME} got: {body_text(request)}")


def hello(request: HttpRequest) -> HttpResponse:
    registry.touch()
    name = query_param(request, "name")
    greeting = f"hello {name}, from" if name else "hello from"
    return text(200, f"{greeting} {NAME} {VERSION}")


# `describe` lists these and `handle_http` serves exactly these.
ROUTES = Router({("POST", "/echo"): echo, ("GET", "/hello"): hello})


class Handler(exports.Handler):
    def describe(self) -> Description:
        return Description(
            name=NAME,
            version=VERSION,
            routes=ROUTES.routes(),
            required_secrets=[],
            metadata=[("language", "python"), ("auth", "none")],
        )

    def handle_http(self, request: HttpRequest) -> HttpResponse:
        return ROUTES.handle(request)

    def run_job(self, job: Job) -> None:
        # This adapter never enqueues jobs, so the host has no reason to call this.
        raise Err(JobFailure(message="python-echo has no jobs", retry_after_ms=None))


class ToolProvider(exports.ToolProvider):
    def list_tools(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                name="python_reverse",
                description="Reverses the characters of a text",
                parameters_json=json.dumps(REVERSE_PARAMETERS),
            )
        ]

    def call_tool(self, name: str, args_json: str) -> str:
        if name != "python_reverse":
            raise Err(f"unknown tool {name}")
        # The host checks arguments against the schema first; checking again costs little and
        # turns a host bug into an error the model can read instead of a trap.
        try:
            args = json.loads(args_json)
        except ValueError as e:
            raise Err(f"arguments are not JSON: {e}") from None
        text_arg = args.get("text") if isinstance(args, dict) else None
        if not isinstance(text_arg, str):
            raise Err('expected {"text": <string>}')
        return text_arg[::-1]
