"""A toolworld as an MCP server (official `mcp` SDK, low-level server): stdio and streamable HTTP.

Each MCP session plays its own episode. The tools are the world's own (same schemas), plus three for the
episode itself: `start_task` (reset for a seed; returns the task), `finish` (end it, with an answer) and
`get_score`. Over stdio one process serves one client, so one episode lives in the process; over HTTP
each `mcp-session-id` gets its own, dropped with the session.

MCP requires `structuredContent` to be an object, so a tool's result comes back as
`{"result": <the tool's output>, "reward": ..., "terminated": ..., "truncated": ...}`; `result` matches
the tool's exported output schema. Refusals (bad arguments, tool errors) are `isError` results whose
text is the same error observation an in-process agent sees.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from pydantic import BaseModel, Field, ValidationError
from starlette.applications import Starlette

from toolworlds.core import Finish, StepResult, ToolCall, ToolWorld, error_observation
from toolworlds.episode import Grade, World, as_world
from toolworlds.hosting.sessions import PublicTask, ScoreReport, Session, SessionError
from toolworlds.tool import listing, problems_in

EPISODE_TOOLS = ("start_task", "finish", "get_score")
M = TypeVar("M", bound=BaseModel)


class StartTask(BaseModel):
    seed: int = Field(description="Which task: the same seed always gives the same task.")
    include_hint: bool = Field(default=False, description="Also return the privileged hint.")


class FinishArguments(BaseModel):
    answer: str | None = Field(default=None, description="The answer, when the task asks a question.")


class EpisodeEnd(Grade):
    """What `finish` answers: the grade of the state the episode ended in."""

    finished: bool


class _Episodes:
    """Which episode a request plays in: one per MCP connection, or one for the whole process."""

    def __init__(self, world: World, one_per_process: bool) -> None:
        self._world = world
        self._one_per_process = one_per_process
        self._process: Session | None = None
        self._by_connection: weakref.WeakKeyDictionary[object, Session] = weakref.WeakKeyDictionary()

    def _connection(self, ctx: ServerRequestContext[Any]) -> object:
        # The SDK keeps one Connection per stateful session but exposes it only privately (mcp 2.3).
        connection = getattr(ctx.session, "_connection", None)
        if connection is None:
            raise MCPError(code=types.INTERNAL_ERROR, message="this mcp version hides the session connection")
        return connection

    def current(self, ctx: ServerRequestContext[Any]) -> Session | None:
        if self._one_per_process:
            return self._process
        return self._by_connection.get(self._connection(ctx))

    async def start(self, ctx: ServerRequestContext[Any], seed: int, include_hint: bool) -> Session:
        """A fresh episode for this connection (or process), replacing and closing the one before."""
        episode = await self._world.open()
        session = Session(episode=episode, public_task=PublicTask.of(await episode.reset(seed), include_hint))
        previous = self.current(ctx)
        if self._one_per_process:
            self._process = session
        else:
            self._by_connection[self._connection(ctx)] = session
        if previous is not None:
            await previous.episode.close()
        return session


def _text(value: Any) -> list[types.TextContent]:
    return [types.TextContent(type="text", text=json.dumps(value))]


def _refusal(observation: Any) -> types.CallToolResult:
    return types.CallToolResult(content=_text(observation), is_error=True)


def _object_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


def _step_schema(result: dict[str, Any]) -> dict[str, Any]:
    defs = result.pop("$defs", None)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "result": result,
            "reward": {"type": "number"},
            "terminated": {"type": "boolean"},
            "truncated": {"type": "boolean"},
        },
        "required": ["result", "reward", "terminated", "truncated"],
    }
    if defs:
        schema["$defs"] = defs
    return schema


def build_server(world: World | type[ToolWorld[Any]], *, one_per_process: bool) -> Server[Any]:
    """The MCP server of `world` (a trusted class plays in this process; a `SandboxedFile` in the sandbox)."""
    world = as_world(world)
    clash = set(EPISODE_TOOLS) & {spec.name for spec in world.tools()}
    if clash:
        raise ValueError(f"{world.name} has tools named {sorted(clash)}, which MCP serving reserves")
    sessions = _Episodes(world, one_per_process)
    tools = [
        types.Tool(
            name="start_task",
            description=f"Start a new {world.name} episode for a seed and read the task. Call this first.",
            input_schema=_object_schema(StartTask),
            output_schema=_object_schema(PublicTask),
        ),
        *[
            types.Tool(
                name=spec.name,
                description=spec.description,
                input_schema=spec.input_schema,
                output_schema=_step_schema(dict(spec.output_schema)),
            )
            for spec in world.tools()
        ],
        types.Tool(
            name="finish",
            description="End the episode, with the answer if the task asked a question; returns the score.",
            input_schema=_object_schema(FinishArguments),
            output_schema=_object_schema(EpisodeEnd),
        ),
        types.Tool(
            name="get_score",
            description="The score of the episode's state as it is now.",
            input_schema={"type": "object", "properties": {}},
            output_schema=_object_schema(ScoreReport),
        ),
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = dict(params.arguments or {})
        if params.name == "start_task":
            wanted = _parse(StartTask, arguments)
            if isinstance(wanted, types.CallToolResult):
                return wanted
            started = await sessions.start(ctx, wanted.seed, wanted.include_hint)
            return _structured(started.public_task.model_dump(mode="json"))
        current = sessions.current(ctx)
        if current is None:
            return _refusal(error_observation("no_episode", "call start_task first"))
        try:  # the episode's rules are the HTTP sessions' (`Session`): a world that fails ends its episode
            if params.name == "get_score":
                return _structured((await current.score()).model_dump(mode="json"))
            if params.name == "finish":
                parsed = _parse(FinishArguments, arguments)
                if isinstance(parsed, types.CallToolResult):
                    return parsed
                end = await current.step(Finish(answer=parsed.answer))
                ended = EpisodeEnd(finished=True, score=end.reward, scorecard=str(end.info.get("scorecard", "")))
                return _structured(ended.model_dump(mode="json"))
            step = await current.step(ToolCall(name=params.name, arguments=arguments))
        except SessionError as error:
            return _refusal(error_observation(error.code, str(error)))
        if "error" in step.info:
            return _refusal(_step_content(step))
        return _structured(_step_content(step))

    return Server(f"spadework-{world.name}", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


def _parse(model: type[M], arguments: dict[str, Any]) -> M | types.CallToolResult:
    try:
        return model.model_validate(arguments, strict=True)
    except ValidationError as error:
        problems = problems_in(error)
        message = f"invalid arguments: {listing(problems)}"
        return _refusal(error_observation("invalid_arguments", message, problems))


def _step_content(step: StepResult) -> dict[str, Any]:
    return {
        "result": step.observation,
        "reward": step.reward,
        "terminated": step.terminated,
        "truncated": step.truncated,
    }


def _structured(content: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=_text(content), structured_content=content)


async def _refuse_discover(ctx: ServerRequestContext[Any], call_next: Any) -> Any:
    """Make clients that probe `server/discover` fall back to the stateful `initialize` handshake.

    Answering the probe would put them on MCP's stateless protocol revision, where every request
    arrives on a fresh connection and an episode could not outlive one tool call.
    """
    if ctx.method == "server/discover":
        raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found", data=ctx.method)
    return await call_next(ctx)


def mcp_http_app(
    world: World | type[ToolWorld[Any]],
    host: str = "127.0.0.1",
    *,
    running: Callable[[], AbstractAsyncContextManager[None]] | None = None,
) -> Starlette:
    """Streamable HTTP at `/mcp`, one episode per MCP session.

    `host` is the address the server binds: on loopback the SDK turns on its DNS-rebinding protection.
    `running` (a sandboxed world's pool) is entered around the SDK's own lifespan.
    """
    server = build_server(world, one_per_process=False)
    server.middleware.append(_refuse_discover)
    app: Starlette = server.streamable_http_app(streamable_http_path="/mcp", stateless_http=False, host=host)
    if running is not None:
        sdk_lifespan = app.router.lifespan_context

        @asynccontextmanager
        async def lifespan(served: Starlette) -> AsyncIterator[None]:
            async with running(), sdk_lifespan(served):
                yield

        app.router.lifespan_context = lifespan
    return app


def run_stdio(
    world: World | type[ToolWorld[Any]],
    *,
    running: Callable[[], AbstractAsyncContextManager[None]] | None = None,
) -> None:
    """Serve one client on stdin/stdout until it disconnects."""
    server = build_server(world, one_per_process=True)

    async def main() -> None:
        async with running() if running else nullcontext(), stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
