"""`spadework toolworld ...`: list, inspect, play, evaluate, export and serve toolworlds."""

from __future__ import annotations

import functools
import json
import statistics
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import anyio
import typer
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.progress import Progress
from rich.table import Table

from toolworlds.checks import check_world
from toolworlds.core import Finish, ToolWorld
from toolworlds.hosting.export import export_world
from toolworlds.hosting.http import MAX_BODY_BYTES
from toolworlds.hosting.serving import HostOption
from toolworlds.play import Transcript, play
from toolworlds.policies import make_policy
from toolworlds.registry import UnknownWorldError, available_worlds, builtin_worlds, is_model_written, load_world
from toolworlds.sandbox import WorldLoadError
from toolworlds.spec import spec_schema
from toolworlds.untrusted.worlds import check_in_sandbox, describe, play_in_sandbox, plays_in_sandbox

toolworld_app = typer.Typer(help="List, inspect, play, evaluate, export and serve toolworlds.", no_args_is_help=True)
console = Console()


class PolicyName(StrEnum):
    oracle = "oracle"
    random = "random"


class Transport(StrEnum):
    stdio = "stdio"
    http = "http"


WorldName = Annotated[
    str,
    typer.Argument(
        help="A world name, module:Class or file.py:Class (trusted), a spec file.json, or file.py (sandboxed)."
    ),
]
T = TypeVar("T")


def _world(name: str) -> type[ToolWorld[Any]]:
    try:
        return load_world(name)
    except UnknownWorldError as error:
        raise typer.BadParameter(str(error), param_hint="NAME") from None


def _sandboxed(name: str, work: Callable[[Path], T]) -> T:
    """Run `work` on a model-written file; a file that is missing or does not load is a usage error."""
    path = Path(name)
    if not path.is_file():
        raise typer.BadParameter(f"no such file: {name}", param_hint="NAME")
    try:
        return work(path)
    except WorldLoadError as error:
        raise typer.BadParameter(f"{name} does not load in the sandbox: {error}", param_hint="NAME") from None


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


@toolworld_app.command("list")
def list_worlds() -> None:
    """The toolworlds spadework knows: built-in and installed plugins."""
    table = Table("name", "tools", "max steps", "description", title="toolworlds")
    for name, world in sorted(available_worlds().items()):
        summary = world.description.split("\n", 1)[0]
        table.add_row(name, str(len(world.tools())), str(world.max_steps), summary)
    console.print(table)


@toolworld_app.command()
def show(
    name: WorldName,
    as_json: Annotated[bool, typer.Option("--json", help="Print the OpenAI tool list as JSON instead.")] = False,
) -> None:
    """What the agent is told about a world (its description), then the world's tools with their argument schemas."""
    world = _sandboxed(name, describe) if is_model_written(name) else _world(name)
    if as_json:
        typer.echo(json.dumps(world.openai_tools(), indent=2))
        return
    console.print(Panel(escape(world.description or "(no description)"), title=f"{world.name}: what the agent is told"))
    title = f"{world.name}: {len(world.tools())} tools"
    table = Table("tool", "arguments", "description", title=title, show_lines=True)
    for spec in world.tools():
        schema = spec.input_schema
        required = set(schema.get("required", []))
        arguments = "\n".join(_argument_line(arg, prop, arg in required) for arg, prop in schema["properties"].items())
        table.add_row(spec.name, arguments or "-", spec.description.split("\n", 1)[0])
    console.print(table)


_BOUNDS = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<",
           "minLength": "len>=", "maxLength": "len<=", "pattern": "~"}  # fmt: skip


def _type_of(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " | ".join(json.dumps(value) for value in prop["enum"])
    if "anyOf" in prop:
        return " | ".join(_type_of(option) for option in prop["anyOf"])
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    if prop.get("type") == "array":
        return f"list[{_type_of(prop.get('items', {}))}]"
    return str(prop.get("type", "any"))


def _argument_line(name: str, prop: dict[str, Any], required: bool) -> str:
    """`name: type (bounds) = default: description`, the way a reader scans an API reference."""
    bounds = ", ".join(f"{sign}{prop[key]}" for key, sign in _BOUNDS.items() if key in prop)
    line = f"[bold]{name}[/bold]: {_type_of(prop)}" + (f" ({bounds})" if bounds else "")
    if not required:
        line += f" = {json.dumps(prop.get('default'))}"
    description = prop.get("description")
    return f"{line}\n  [dim]{description}[/dim]" if description else line


@toolworld_app.command("play")
def play_command(
    name: WorldName,
    seed: Annotated[int, typer.Option(help="Which task.")] = 0,
    policy: Annotated[PolicyName, typer.Option(help="oracle replays the reference solution.")] = PolicyName.oracle,
    show_hint: Annotated[bool, typer.Option(help="Also print the privileged hint.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the transcript as JSON.")] = False,
) -> None:
    """Play one episode and print the transcript with the final score (a bare FILE.py plays in the sandbox)."""
    chosen = make_policy(policy.value, seed)
    if is_model_written(name):
        transcript = _sandboxed(name, lambda path: play_in_sandbox(path, seed, chosen))
    else:
        transcript = play(_world(name)(), seed, chosen)
    if as_json:
        typer.echo(transcript.model_dump_json(indent=2))
        return
    _print_transcript(transcript, show_hint)


def _print_transcript(transcript: Transcript, show_hint: bool) -> None:
    task = transcript.task
    body = task.instruction + (f"\n\n[dim]hint: {task.hint}[/dim]" if show_hint else "")
    console.print(Panel(body, title=f"{task.world} · seed {task.seed} · {task.variant}", expand=False))
    for number, turn in enumerate(transcript.turns, 1):
        action = turn.action
        if isinstance(action, Finish):
            console.print(f"[bold]{number:>2}. finish[/bold] answer={action.answer!r}")
        else:
            console.print(f"[bold]{number:>2}. {action.name}[/bold]({_short(action.arguments, 120)})")
        colour = "red" if "error" in turn.result.info else "green"
        console.print(f"    [{colour}]→ {_short(turn.result.observation)}[/{colour}]")
    last = transcript.turns[-1].result
    ending = "terminated" if last.terminated else "truncated at the step limit"
    console.print(f"[bold]score {transcript.score:.3f}[/bold] ({ending}; {last.info.get('scorecard', '')})")


@toolworld_app.command("eval")
def evaluate(
    names: Annotated[
        list[str] | None, typer.Argument(help="Worlds to evaluate, each as NAME takes it (default: all built-in).")
    ] = None,
    seeds: Annotated[int, typer.Option(min=1, help="Play seeds 0..SEEDS-1.")] = 200,
    policies: Annotated[list[PolicyName] | None, typer.Option("--policy", help="Policies to compare.")] = None,
) -> None:
    """Score scripted policies over many seeds and compare them in one table."""
    names = names or list(builtin_worlds())
    policies = policies or [PolicyName.oracle, PolicyName.random]
    table = Table("world", "policy", "episodes", "mean score", "solved", "median tool calls", "variants")
    with Progress(console=console, transient=True) as progress:
        job = progress.add_task("playing", total=len(names) * len(policies) * seeds)
        for name in names:
            for policy in policies:
                transcripts = _plays(name, range(seeds), policy.value)
                progress.advance(job, seeds)
                scores = [t.score for t in transcripts]
                table.add_row(
                    transcripts[0].task.world,
                    policy.value,
                    str(seeds),
                    f"{statistics.mean(scores):.3f}",
                    f"{sum(s >= 1.0 for s in scores) / seeds:.0%}",
                    f"{statistics.median(t.tool_calls for t in transcripts):g}",
                    str(len({t.task.variant for t in transcripts})),
                )
    console.print(table)


def _plays(name: str, seeds: range, policy: str) -> list[Transcript]:
    """One play of `name` per seed: in this process, or each in the sandbox for a model-written file."""
    if is_model_written(name):
        return _sandboxed(name, lambda path: plays_in_sandbox(path, seeds, lambda seed: make_policy(policy, seed)))
    world = _world(name)
    return [play(world(), seed, make_policy(policy, seed)) for seed in seeds]


@toolworld_app.command()
def check(
    name: WorldName,
    seeds: Annotated[int, typer.Option(min=1, help="Check seeds 0..SEEDS-1.")] = 50,
) -> None:
    """Check that a world keeps the contract (the checks model-written worlds must pass too)."""
    if is_model_written(name):
        results = _sandboxed(name, lambda path: check_in_sandbox(path, range(seeds)))
    else:
        results = check_world(_world(name), range(seeds))
    table = Table("check", "result", "detail", title=f"{name}: contract checks over {seeds} seeds")
    for result in results:
        table.add_row(result.name, _verdict_word(result.passed), result.detail)
    console.print(table)
    if not all(result.passed for result in results):
        raise typer.Exit(code=1)


@toolworld_app.command()
def validate(
    file: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="A world's .py file, a spec .json, or a model's reply.")
    ],
    seeds: Annotated[int, typer.Option(min=1, help="Smoke-test seeds 0..SEEDS-1.")] = 8,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
    write_source: Annotated[
        Path | None,
        typer.Option(
            help="Write the code the gates judged (extracted and repaired), which is what play, serve "
            "and rollout run, to this file."
        ),
    ] = None,
) -> None:
    """Run model-written code through every gate (extract, repair, policy, sandbox load, smoke test), or a
    spec through its own (parse, compile, smoke test).

    Exits 0 only if the world is valid. The code runs only in confined sandbox processes, never here.
    """
    from toolworlds.untrusted.validate import run_validation, validate_spec

    text = file.read_text(errors="replace")
    if file.suffix == ".json":  # a spec: its own gates (parse, compile, the same smoke checks)
        verdict = anyio.run(functools.partial(validate_spec, text, seeds=range(seeds)))
    else:
        verdict = run_validation(text, range(seeds), filename=file.name)
    if write_source is not None and verdict.source is not None:
        write_source.write_text(verdict.source)
    if as_json:
        typer.echo(json.dumps(verdict.summary(), indent=2))
    else:
        table = Table("gate", "result", "detail", title=f"{file}: {'valid' if verdict.valid else 'rejected'}")
        for gate in verdict.gates:
            table.add_row(gate.name, _verdict_word(gate.passed), gate.detail)
        console.print(table)
        if verdict.checks:
            checks = Table("smoke check", "result", "detail", title=f"played in the sandbox over {seeds} seeds")
            for check in verdict.checks:
                checks.add_row(check.name, _verdict_word(check.passed), check.detail)
            console.print(checks)
        if verdict.fixes:
            console.print(f"Judged (and run by play, serve and rollout) as repaired: {'; '.join(verdict.fixes)}."
                          + ("" if write_source else " --write-source FILE writes that code out."))  # fmt: skip
    if not verdict.valid:
        raise typer.Exit(code=1)


def _verdict_word(passed: bool) -> str:
    return "[green]pass[/green]" if passed else "[red]FAIL[/red]"


@toolworld_app.command()
def export(
    name: WorldName,
    out: Annotated[Path, typer.Option(help="Directory to write into (created if missing).")],
) -> None:
    """Write tools.json, schemas/<tool>.{input,output}.json and openapi.json for a world.

    A bare FILE.py is model-written: it is loaded only in the sandbox and exported from its schemas."""
    world = _sandboxed(name, describe) if is_model_written(name) else _world(name)
    written = export_world(world, out)
    console.print(f"wrote {len(written)} files under {out}")


@toolworld_app.command("spec-schema")
def spec_schema_command() -> None:
    """Print the JSON Schema of toolworld spec files: a world as JSON, for authors that cannot write a class.

    Any command that takes a world also takes a spec file, `path/to/world.json`."""
    typer.echo(json.dumps(spec_schema(), indent=2))


@toolworld_app.command()
def serve(
    name: WorldName,
    host: HostOption = "127.0.0.1",
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="Port to bind; 0 picks a free one (printed on start).")
    ] = 8700,
    mcp: Annotated[bool, typer.Option("--mcp", help="Serve as an MCP server instead of the session API.")] = False,
    openenv: Annotated[
        bool, typer.Option("--openenv", help="Serve over OpenEnv's protocol (/ws, /mcp): the `openenv` extra.")
    ] = False,
    transport: Annotated[
        Transport | None, typer.Option(help="With --mcp: stdio or streamable http (default: http).")
    ] = None,
    capacity: Annotated[
        int, typer.Option(min=1, help="Most sessions held at once (HTTP session API; OpenEnv: default 64).")
    ] = 10_000,
    max_body_bytes: Annotated[
        int, typer.Option(min=1, help="Largest request body the HTTP session API reads (larger: 413).")
    ] = MAX_BODY_BYTES,
) -> None:
    """Serve a world: the HTTP session API that openapi.json describes, MCP (stdio / streamable HTTP), or
    OpenEnv's protocol."""
    from toolworlds.hosting.serving import serve_asgi, serve_mcp_stdio

    if transport is not None and not mcp:
        raise typer.BadParameter("--transport chooses how MCP is served: add --mcp", param_hint="--transport")
    transport = transport or Transport.http
    if openenv:
        if mcp:
            raise typer.BadParameter("--openenv serves OpenEnv's own MCP routes: leave out --mcp", param_hint="--mcp")
        _serve_openenv(name, host, port, 64 if capacity == 10_000 else capacity)
        return

    if is_model_written(name):
        _serve_sandboxed(Path(name), host, port, mcp, transport, capacity, max_body_bytes)
        return
    world = _world(name)
    if mcp and transport is Transport.stdio:
        serve_mcp_stdio(world)
        return
    if mcp:
        from toolworlds.hosting.mcp_server import mcp_http_app

        serve_asgi(mcp_http_app(world, host), host, port, f"{world.name} MCP (streamable HTTP) at /mcp")
    else:
        from toolworlds.hosting.http import create_app

        serve_asgi(create_app(world, capacity, max_body_bytes=max_body_bytes), host, port, f"{world.name} session API")


def _serve_openenv(name: str, host: str, port: int, sessions: int) -> None:
    """`serve --openenv`: OpenEnv's app over the world (a model-written one in the sandbox)."""
    from toolworlds.hosting.serving import serve_asgi

    try:
        from toolworlds.adapters.openenv import openenv_app
    except ImportError as error:
        raise typer.BadParameter(f"OpenEnv is not installed ({error}): pip install 'spadework[openenv]'",
                                 param_hint="--openenv") from None  # fmt: skip
    try:
        app = openenv_app(name, sessions)
    except (UnknownWorldError, WorldLoadError, FileNotFoundError, ValueError) as error:
        raise typer.BadParameter(str(error), param_hint="NAME") from None
    serve_asgi(app, host, port, f"{name} over OpenEnv (/ws, /mcp, up to {sessions} sessions)")


def _serve_sandboxed(
    path: Path, host: str, port: int, mcp: bool, transport: Transport, capacity: int, max_body_bytes: int
) -> None:
    """`serve` for a model-written file: every episode lives in a sandbox process of its own, never in this one."""
    from toolworlds.hosting.serving import serve_asgi
    from toolworlds.untrusted.worlds import SandboxedFile, sandboxed_app

    described = _sandboxed(str(path), describe)  # loads it once to read its tools and refuse what fails
    if not mcp:
        app = sandboxed_app(path, described, capacity, max_body_bytes)
        serve_asgi(app, host, port, f"{described.name} session API (sandboxed)")
        return
    from toolworlds.hosting.mcp_server import mcp_http_app, run_stdio

    served = SandboxedFile(path, described)
    if transport is Transport.stdio:
        print(f"serving {described.name} MCP over stdio (sandboxed)", file=sys.stderr, flush=True)
        run_stdio(served, running=served.running)
        return
    app = mcp_http_app(served, host, running=served.running)
    serve_asgi(app, host, port, f"{described.name} MCP (streamable HTTP) at /mcp (sandboxed)")
