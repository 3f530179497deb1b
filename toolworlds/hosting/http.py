"""The session API of one toolworld over HTTP (ASGI, Starlette): the API `openapi.json` describes."""

from __future__ import annotations

import json
import traceback
from typing import Any, TypeVar

import structlog
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Lifespan, Message, Receive, Scope, Send

from toolworlds.core import ACTION_ADAPTER, Finish, ToolWorld, error_observation
from toolworlds.episode import World, as_world
from toolworlds.hosting.export import (
    CreateSession,
    FinishRequest,
    Health,
    SessionCreated,
    SessionView,
    openapi_document,
)
from toolworlds.hosting.sessions import SessionError, SessionStore
from toolworlds.tool import ArgumentProblem, listing, problems_in

M = TypeVar("M", bound=BaseModel)


log = structlog.get_logger(__name__)


def _error(status: int, code: str, message: str, fields: list[ArgumentProblem] | None = None) -> JSONResponse:
    return JSONResponse(error_observation(code, message, fields), status_code=status)


def _ok(model: BaseModel, status: int = 200) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json"), status_code=status)


MAX_BODY_BYTES = 1_000_000  # a tool's arguments, an action: far more than any world needs


async def _body(request: Request, limit: int) -> bytes:
    """The raw body, refused with 413 as soon as it is known to exceed `limit` bytes (declared or streamed)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise SessionError(413, "body_too_large", f"the body is {int(declared):,} bytes; the limit is {limit:,}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise SessionError(413, "body_too_large", f"the body exceeds the limit of {limit:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def _json_object(request: Request, required: bool, limit: int) -> dict[str, Any]:
    """The request body as a JSON object; an empty body counts as `{}` where the body is optional."""
    raw = await _body(request, limit)
    if not raw.strip(b" \t\r\n"):  # JSON's own whitespace only: a stray form feed is a malformed body
        if required:
            raise SessionError(422, "invalid_request", "this request needs a JSON object as its body")
        return {}
    try:
        value = json.loads(raw)
    except ValueError as error:
        raise SessionError(400, "invalid_json", f"the body is not valid JSON: {error}") from None
    except RecursionError:
        raise SessionError(400, "invalid_json", "the body is nested too deeply to read") from None
    if not isinstance(value, dict):
        raise SessionError(422, "invalid_request", f"the body must be a JSON object, got {type(value).__name__}")
    return value


def _parse(model: type[M], data: dict[str, Any]) -> M:
    try:
        return model.model_validate(data, strict=True)
    except ValidationError as error:
        raise _Invalid("invalid body", problems_in(error)) from None


class _Invalid(Exception):
    """A body that does not match its schema: answered with 422 and one named problem per field."""

    def __init__(self, what: str, fields: list[ArgumentProblem]) -> None:
        super().__init__(f"{what}: {listing(fields)}")
        self.fields = fields


def create_app(
    world: World | type[ToolWorld[Any]],
    capacity: int = 10_000,
    *,
    lifespan: Lifespan[Starlette] | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Starlette:
    """An ASGI app serving sessions of `world`; each session is an independent episode.

    A trusted world class plays in this process; a sandboxed world (`SandboxedFile`) comes with the `lifespan`
    that starts and stops its pool. Every error is a JSON error body.
    """
    world = as_world(world)
    store = SessionStore(world, capacity)
    document = openapi_document(world)
    tools = world.openai_tools()
    specs = {spec.name: spec for spec in world.tools()}

    async def health(request: Request) -> Response:
        return _ok(Health(status="ok", world=world.name, sessions=len(store)))

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    async def list_tools(request: Request) -> Response:
        return JSONResponse(tools)

    async def create_session(request: Request) -> Response:
        wanted = _parse(CreateSession, await _json_object(request, required=True, limit=max_body_bytes))
        session_id, task = await store.create(wanted.seed, wanted.include_hint)
        return _ok(SessionCreated(session_id=session_id, task=task), status=201)

    async def session(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        found = store.get(session_id)
        if request.method == "DELETE":
            await store.delete(session_id)
            return Response(status_code=204)
        view = SessionView(session_id=session_id, task=found.public_task, steps=found.steps, done=found.done,
                           failure=found.failure)  # fmt: skip
        return _ok(view)

    async def call_tool(request: Request) -> Response:
        session_id, name = request.path_params["session_id"], request.path_params["tool"]
        store.get(session_id)
        spec = specs.get(name)
        if spec is None:
            raise SessionError(404, "unknown_tool", f"{world.name} has no tool {name!r}; GET /tools lists them")
        arguments = await _json_object(request, required=bool(spec.required_arguments), limit=max_body_bytes)
        parsed, problems = spec.validate(arguments)
        if parsed is None:
            raise _Invalid(f"invalid arguments for {name}", problems)
        return _ok(await store.call_tool(session_id, name, arguments))

    async def step(request: Request) -> Response:
        data = await _json_object(request, required=True, limit=max_body_bytes)
        try:
            action = ACTION_ADAPTER.validate_python(data)
        except ValidationError as error:
            raise _Invalid("invalid action", problems_in(error)) from None
        return _ok(await store.step(request.path_params["session_id"], action))

    async def finish(request: Request) -> Response:
        session_id = request.path_params["session_id"]
        store.get(session_id)
        wanted = _parse(FinishRequest, await _json_object(request, required=False, limit=max_body_bytes))
        return _ok(await store.step(session_id, Finish(answer=wanted.answer)))

    async def score(request: Request) -> Response:
        return _ok(await store.score(request.path_params["session_id"]))

    async def snapshot(request: Request) -> Response:
        return JSONResponse(await store.snapshot(request.path_params["session_id"]))

    async def on_session_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, SessionError)
        return _error(error.status, error.code, error.message)

    async def on_invalid(request: Request, error: Exception) -> Response:
        assert isinstance(error, _Invalid)
        return _error(422, "invalid_request", str(error), error.fields)

    async def on_http_error(request: Request, error: Exception) -> Response:
        status = getattr(error, "status_code", 500)
        detail = getattr(error, "detail", "error")
        code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
        response = _error(status, code, f"{detail}: {request.method} {request.url.path}")
        response.headers.update(getattr(error, "headers", None) or {})  # keeps `Allow` on a 405
        return response

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        Route("/tools", list_tools, methods=["GET"]),
        Route("/sessions", create_session, methods=["POST"]),
        Route("/sessions/{session_id}", session, methods=["GET", "DELETE"]),
        Route("/sessions/{session_id}/tools/{tool}", call_tool, methods=["POST"]),
        Route("/sessions/{session_id}/step", step, methods=["POST"]),
        Route("/sessions/{session_id}/finish", finish, methods=["POST"]),
        Route("/sessions/{session_id}/score", score, methods=["GET"]),
        Route("/sessions/{session_id}/snapshot", snapshot, methods=["GET"]),
    ]

    handlers = {SessionError: on_session_error, _Invalid: on_invalid, 404: on_http_error, 405: on_http_error}
    return Starlette(
        routes=routes, exception_handlers=handlers, lifespan=lifespan, middleware=[Middleware(_JsonServerErrors)]
    )


class _JsonServerErrors:
    """An unexpected exception answers a JSON 500 (`server_error`, naming it) and the connection stays open.
    Starlette's handler for `Exception` re-raises once it has answered, and uvicorn then drops the client's
    keep-alive connection: every pooled client saw a reset after any 500."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answered = False

        async def sending(message: Message) -> None:
            nonlocal answered
            answered = answered or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as error:
            if answered:
                raise
            frame = traceback.extract_tb(error.__traceback__)[-1]
            log.error("unexpected error", method=scope["method"], path=scope["path"],
                      error=f"{type(error).__name__}: {error}", at=f"{frame.filename}:{frame.lineno}")  # fmt: skip
            where = f"{scope['method']} {scope['path']}"
            await _error(500, "server_error", f"{type(error).__name__}: {error}: {where}")(scope, receive, send)
