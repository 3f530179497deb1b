"""The `spadework` command: one entry point, a sub-command per part of the system."""

from __future__ import annotations

from typing import Annotated

import typer

from benchmarks.cli import bench_app
from engine import cli as engine_cli
from spadework import __version__
from spadework.logs import configure_logging
from toolworlds.cli import toolworld_app
from toolworlds.registry import UnknownWorldError
from trainers.corpus_cli import corpus_app
from trainers.designer.cli import design
from trainers.train_cli import report, train, train_compare

app = typer.Typer(
    help="spadework: a language model teaches itself tool use by self-play.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
app.add_typer(toolworld_app, name="toolworld")
app.add_typer(corpus_app, name="corpus")
app.add_typer(bench_app, name="bench")
app.command("rollout")(engine_cli.rollout)
app.command("episodes")(engine_cli.show)
app.command("mock-server")(engine_cli.mock_server)
app.command("serve")(engine_cli.serve)
app.command("design")(design)
app.command("train")(train)
app.command("report")(report)
app.command("train-compare")(train_compare)


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"spadework {__version__}")
        raise typer.Exit()


LOG_LEVELS = ("debug", "info", "warning", "error")


def _log_level(value: str) -> str:
    if value.lower() not in LOG_LEVELS:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(LOG_LEVELS)}")
    return value.lower()


@app.callback()
def main(
    log_level: Annotated[
        str,
        typer.Option(
            envvar="SPADEWORK_LOG_LEVEL",
            callback=_log_level,
            help="debug, info, warning or error (or set the environment variable SPADEWORK_LOG_LEVEL).",
        ),
    ] = "info",
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    configure_logging(log_level)


def run() -> None:
    """The `spadework` command. A path it cannot use (missing, a directory, not writable) or a world it
    cannot find ends in one line naming it, not a traceback, whichever command met it."""
    try:
        app()
    except (OSError, UnknownWorldError) as error:
        typer.echo(f"Error: {error}", err=True)
        raise SystemExit(2) from None
