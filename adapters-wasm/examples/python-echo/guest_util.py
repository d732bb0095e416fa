"""What every Python adapter needs besides its own logic, the shape of the Rust guests'
`guest-util` crate: answers (text, JSON, `{"error": ...}`), request parts, a JSON body, a route
table that turns raised `HttpError`s into answers.
"""

import json
from typing import Any, Callable, Optional
from urllib.parse import parse_qs

from wit_world.imports.types import HttpRequest, HttpResponse, Route


def respond(status: int, content_type: str, body: bytes) -> HttpResponse:
    return HttpResponse(status=status, headers=[("content-type", content_type)], body=body)


def text(status: int, body: str) -> HttpResponse:
    """A `text/plain` answer."""
    return respond(status, "text/plain; charset=utf-8", body.encode("utf-8"))


def json_answer(status: int, value: Any) -> HttpResponse:
    """A JSON answer."""
    return respond(status, "application/json", json.dumps(value).encode("utf-8"))


def error(status: int, message: str) -> HttpResponse:
    """`{"error": message}`, the shape of every error of the API."""
    return json_answer(status, {"error": message})


class HttpError(Exception):
    """A failure a handler raises to answer `error(status, message)`."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def query_param(request: HttpRequest, key: str) -> Optional[str]:
    """The first value of `key` in the query string, percent-decoded."""
    values = parse_qs(request.query, keep_blank_values=True).get(key)
    return values[0] if values else None


def body_text(request: HttpRequest) -> str:
    """The body as text; undecodable bytes are replaced rather than failing."""
    return request.body.decode("utf-8", errors="replace")


def read_json(request: HttpRequest) -> dict:
    """The body as a JSON object, or an `HttpError` 400 saying why not."""
    try:
        value = json.loads(body_text(request))
    except ValueError as e:
        raise HttpError(400, f"the body is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise HttpError(400, "the body must be a JSON object")
    return value


Handler = Callable[[HttpRequest], HttpResponse]


class Router:
    """A route table, `{("POST", "/echo"): handler, ...}`: `routes()` is what `describe` lists,
    and `handle(request)` calls the matching handler. A raised `HttpError` becomes its answer;
    any other exception a 500 naming it, so a bug shows in the answer rather than as a trap.
    """

    def __init__(self, table: dict[tuple[str, str], Handler]):
        self.table = table

    def routes(self) -> list[Route]:
        return [Route(method=m, path=p) for m, p in self.table]

    def handle(self, request: HttpRequest) -> HttpResponse:
        handler = self.table.get((request.method, request.path))
        if handler is None:
            # The host sends only declared routes; this is a route declared without a handler.
            return error(404, f"no route {request.method} {request.path}")
        try:
            return handler(request)
        except HttpError as e:
            return error(e.status, e.message)
        except Exception as e:  # noqa: BLE001 - any bug becomes a readable 500
            return error(500, f"{type(e).__name__}: {e}")

